//! The commit loop: builds the next manifest for a change (append, delete, rewrite), creates it
//! with create-if-absent, and rebases onto a newer version after a lost race; `delete_rows` and
//! `restore` are its simplest users (SPEC.md §"Commit protocol", VER-05 to VER-08 and VER-13).
//!
//! A commit uploads its data files and one index segment (content-addressed, so re-uploads
//! are harmless), then creates the next version's manifest with create-if-absent. If another
//! writer took that version first, an append is rebased onto the new latest version and tried
//! again; anything else is a [`Error::Conflict`].
//!
//! The rest of writing lives beside this file: `writer.rs` (creating a dataset, appending rows
//! as data files; its types are re-exported here), `segment_log.rs` (index segments) and
//! `refs.rs` (branches, tags, history).

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use crate::blocking::block_on;
use crate::dataset::{At, Dataset, FragmentInfo, latest_version_async, load_manifest};
use crate::envelope::{self, ObjectKind};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::manifest::{
    ColumnStats, DeletionRef, DeletionVector, Fragment, KNOWN_WRITER_FLAGS, Manifest, READER_FLAG_FRAGMENT_TREE,
    Segment, VersionRef,
};
use crate::paths;
use crate::schema::Schema;
use crate::segment_log::{merge_tiers, write_segments};
use crate::stats;
use crate::store::{Created, Store};
use crate::tree::{self, FragmentTree};
use crate::writer::PendingFragment;

// The writer's types keep their paths under `commit` (`tessera::commit::WriteOptions`, ...).
pub(crate) use crate::writer::write_data_file;
pub use crate::writer::{DEFAULT_TARGET_FILE_BYTES, DatasetWriter, IndexLayout, WriteOptions};

/// How many times an append is rebased onto a newer version before giving up.
const MAX_REBASES: usize = 16;

/// What a commit changes, in a form that can be re-applied to a newer base (rebase).
#[derive(Debug)]
pub(crate) enum Change {
    /// New fragments (ids are assigned when the manifest is built).
    Append(Vec<PendingFragment>),
    /// Newly deleted physical rows per fragment id.
    Delete(BTreeMap<u64, Vec<u64>>),
    /// Replaced or removed fragments and/or a new schema (updates, schema evolution, compaction).
    Rewrite(Rewrite),
}

/// A change that replaces existing fragments (same ids) or the schema.
#[derive(Debug, Default)]
pub(crate) struct Rewrite {
    /// The new schema, when it changes.
    pub(crate) schema: Option<Schema>,
    /// The new `next_column_id`, when columns are added.
    pub(crate) next_column_id: Option<u32>,
    /// New versions of existing fragments (same ids).
    pub(crate) replace: Vec<Fragment>,
    /// Fragment ids removed.
    pub(crate) remove: Vec<u64>,
    /// Whole fragments added at the end (their ids are reassigned).
    pub(crate) add: Vec<Fragment>,
    /// The second parent, for a merge commit.
    pub(crate) merged: Option<VersionRef>,
    /// Conflicts with any concurrent commit (not only with ones touching the same fragments).
    pub(crate) exclusive: bool,
}

/// Runs the optimistic commit loop `[VER-05]`: build the next manifest on `base`, try to create
/// it, and on losing the race rebase onto the newer version when the change commutes with what
/// landed (appends always; deletes when the fragments they touch are unchanged).
pub(crate) async fn commit_change(
    base: &Dataset,
    change: &Change,
    message: &str,
    options: &WriteOptions,
) -> Result<Dataset> {
    let store = base.store().clone();
    if !matches!(change, Change::Append(_)) {
        // Deletes and rewrites look up and re-aggregate fragments a partial handle lacks.
        base.require_whole("a change other than an append")?;
    }
    let mut base = base.clone();
    for _ in 0..MAX_REBASES {
        let unknown = base.manifest().writer_flags & !KNOWN_WRITER_FLAGS;
        if unknown != 0 {
            return Err(Error::unsupported(
                base.branch(),
                format!("unknown writer-required flags {unknown:#x} [FLG-04]"),
            ));
        }
        let (manifest, delta) = build(&store, &base, change, message, options).await?;
        match publish(&store, &manifest, &base.limits().tightest(&options.limits)).await? {
            // The new version is the base plus the delta: no segment is read back, so a commit
            // costs O(change) requests whatever the size of the dataset [SEG-08].
            Published::Ours(crc) if base.is_partial() => {
                // A partial base gives a partial version: the fragments it had, then the new
                // ones after every row of the base.
                let mut loaded = base.fragments().to_vec();
                let mut first_row = base.row_count();
                for f in delta.map(|d| d.fragments).unwrap_or_default() {
                    let live = f.live_rows();
                    loaded.push(FragmentInfo { fragment: Arc::new(f), first_row });
                    first_row += live;
                }
                return Dataset::from_located(store, manifest, crc, loaded, options.limits.clone());
            }
            Published::Ours(crc) => {
                // Under a new schema every fragment is checked again [SEG-06].
                let schema_changed = manifest.schema != *base.schema();
                let log = apply_delta(&base, delta).into_iter().map(|(f, new)| (f, new || schema_changed));
                return Dataset::from_log_marked(store, manifest, crc, log, options.limits.clone());
            }
            Published::Theirs => {
                let latest = latest_version_async(&store, base.branch()).await?;
                let at = At::BranchVersion(base.branch().to_string(), latest);
                let newer = if base.is_partial() {
                    Dataset::open_lazy_async(&store, &at, base.limits().clone()).await?.0
                } else {
                    base.checkout_async(&at).await?
                };
                check_rebase(&base, &newer, change)?;
                base = newer;
            }
        }
    }
    Err(Error::Conflict { what: format!("gave up after {MAX_REBASES} lost commit races on {}", base.branch()) })
}

/// The conflict matrix `[VER-08]`: a change can move onto `newer` if the schema is the same and,
/// for deletes, every fragment it touches is unchanged in `newer`.
fn check_rebase(base: &Dataset, newer: &Dataset, change: &Change) -> Result<()> {
    if newer.schema() != base.schema() {
        return Err(Error::Conflict {
            what: format!("{}@{} changed the schema since {}", newer.branch(), newer.version(), base.version()),
        });
    }
    let touched: Vec<u64> = match change {
        Change::Append(_) => Vec::new(),
        Change::Delete(rows) => rows.keys().copied().collect(),
        Change::Rewrite(r) if r.exclusive => {
            return Err(Error::Conflict {
                what: format!(
                    "{}@{} landed while an exclusive change was prepared on {}",
                    newer.branch(),
                    newer.version(),
                    base.version()
                ),
            });
        }
        Change::Rewrite(r) => r.replace.iter().map(|f| f.id).chain(r.remove.iter().copied()).collect(),
    };
    {
        for id in &touched {
            let before = base.fragments().iter().find(|f| f.fragment.id == *id).map(|f| &f.fragment);
            let after = newer.fragments().iter().find(|f| f.fragment.id == *id).map(|f| &f.fragment);
            if before != after {
                return Err(Error::Conflict {
                    what: format!("fragment {id} was changed by {}@{} concurrently", newer.branch(), newer.version()),
                });
            }
        }
    }
    Ok(())
}

/// The fragments of `base` with a segment applied, each marked `true` when it is new (to be
/// checked against the schema) and `false` when it is the base's (checked when the base was
/// opened). Appends (ids above every existing one) only extend the shared list.
fn apply_delta(base: &Dataset, delta: Option<Segment>) -> Vec<(Arc<Fragment>, bool)> {
    let existing = base.fragments().iter().map(|f| (f.fragment.clone(), false));
    let Some(seg) = delta else { return existing.collect() };
    let max = base.fragments().last().map(|f| f.fragment.id);
    if seg.removed.is_empty() && seg.fragments.first().is_none_or(|f| max.is_none_or(|m| f.id > m)) {
        return existing.chain(seg.fragments.into_iter().map(|f| (Arc::new(f), true))).collect();
    }
    let mut log: BTreeMap<u64, Arc<Fragment>> = existing.map(|(f, _)| (f.id, f)).collect();
    let new: std::collections::HashSet<u64> = seg.fragments.iter().map(|f| f.id).collect();
    crate::dataset::apply_segment(&mut log, seg);
    log.into_values().map(|f| (f.clone(), new.contains(&f.id))).collect()
}

/// The manifest of the next version on top of `base` for `change`, writing the new index
/// segment (and deletion vectors) and merging segments in geometric tiers. Returns the manifest
/// and the segment of this change (before tier merging), to apply to `base` in memory.
#[allow(clippy::too_many_lines)] // one pass over the change kinds; each arm is short
async fn build(
    store: &Store,
    base: &Dataset,
    change: &Change,
    message: &str,
    options: &WriteOptions,
) -> Result<(Manifest, Option<Segment>)> {
    let bm = base.manifest();
    // The writer's objects must open both through `base` and through the dataset it returns.
    let limits = base.limits().tightest(&options.limits);
    let mut next_fragment_id = bm.next_fragment_id;
    let mut fragments = Vec::new();
    let mut removed = Vec::new();
    let mut row_count = bm.row_count;
    // Appends extend the aggregate; other changes recompute it from the resulting fragments.
    // A partial base lists only some fragments: a tree version has none when it has no root.
    let no_fragments = if base.is_partial() { bm.segments.is_empty() } else { base.fragments().is_empty() };
    let mut stats_lists: Vec<Vec<ColumnStats>> = if no_fragments { Vec::new() } else { vec![bm.stats.clone()] };
    match change {
        Change::Append(pending) => {
            for p in pending {
                fragments.push(Fragment {
                    id: next_fragment_id,
                    row_count: p.row_count,
                    files: p.files.clone(),
                    deletion: None,
                    stats: p.stats.clone(),
                });
                stats_lists.push(p.stats.clone());
                next_fragment_id += 1;
                row_count += p.row_count;
            }
        }
        Change::Rewrite(r) => {
            let live = |id: u64| base.fragments().iter().find(|f| f.fragment.id == id).map(|f| f.fragment.live_rows());
            for f in &r.replace {
                let old =
                    live(f.id).ok_or_else(|| Error::usage(format!("fragment {} is not in the base version", f.id)))?;
                row_count = row_count - old + f.live_rows();
                fragments.push(f.clone());
            }
            for id in &r.remove {
                row_count -=
                    live(*id).ok_or_else(|| Error::usage(format!("fragment {id} is not in the base version")))?;
                removed.push(*id);
            }
            for f in &r.add {
                row_count += f.live_rows();
                let deletion = match &f.deletion {
                    Some(d) => Some(renumber_deletion(store, d, f, next_fragment_id, &limits).await?),
                    None => None,
                };
                fragments.push(Fragment { id: next_fragment_id, deletion, ..f.clone() });
                next_fragment_id += 1;
            }
            fragments.sort_by_key(|f| f.id);
            removed.sort_unstable();
            // Statistics are recomputed from the resulting fragments.
            let gone: Vec<u64> = r.replace.iter().map(|f| f.id).chain(r.remove.iter().copied()).collect();
            stats_lists = base
                .fragments()
                .iter()
                .filter(|f| !gone.contains(&f.fragment.id))
                .map(|f| f.fragment.stats.clone())
                .chain(r.replace.iter().chain(&r.add).map(|f| f.stats.clone()))
                .collect();
        }
        Change::Delete(new_rows) => {
            for (id, rows) in new_rows {
                let info = base
                    .fragments()
                    .iter()
                    .find(|f| f.fragment.id == *id)
                    .ok_or_else(|| Error::usage(format!("fragment {id} is not in the base version")))?;
                let mut all: Vec<u64> = base.deleted_rows_async(info).await?.to_vec();
                all.extend_from_slice(rows);
                all.sort_unstable();
                all.dedup();
                row_count -=
                    all.len() as u64 - info.fragment.row_count.min(info.fragment.row_count - info.fragment.live_rows());
                if all.len() as u64 == info.fragment.row_count {
                    removed.push(*id);
                    continue;
                }
                let dv = DeletionVector { fragment_id: *id, rows: all };
                let dref = write_deletion_vector(store, &dv, &limits).await?;
                fragments.push(Fragment { deletion: Some(dref), ..(*info.fragment).clone() });
            }
        }
    }
    let mut segments = bm.segments.clone();
    let final_schema = match change {
        Change::Rewrite(Rewrite { schema: Some(s), .. }) => s.clone(),
        _ => bm.schema.clone(),
    };
    if let Change::Delete(_) = change {
        stats_lists = base
            .fragments()
            .iter()
            .filter(|f| !removed.contains(&f.fragment.id) && !fragments.iter().any(|n| n.id == f.fragment.id))
            .map(|f| f.fragment.stats.clone())
            .chain(fragments.iter().map(|f| f.stats.clone()))
            .collect();
    }
    // A version with a fragment tree keeps one; one with a log converts when the options ask
    // for a tree (the first commit then writes the whole tree once) [TREE-08].
    let tree = bm.reader_flags & READER_FLAG_FRAGMENT_TREE != 0 || matches!(options.index, IndexLayout::Tree { .. });
    let delta =
        if fragments.is_empty() && removed.is_empty() && (!tree || bm.reader_flags & READER_FLAG_FRAGMENT_TREE != 0) {
            None
        } else if tree {
            let seg = Segment { fragments, removed };
            let node_bytes = match options.index {
                IndexLayout::Tree { node_bytes } => node_bytes,
                IndexLayout::Log => tree::DEFAULT_NODE_BYTES,
            };
            let written = if bm.reader_flags & READER_FLAG_FRAGMENT_TREE != 0 {
                let base_tree = FragmentTree::open_async(store, bm, limits.clone()).await?;
                let (removed, upserts) = (&seg.removed, &seg.fragments);
                tree::apply_async(store, Some(&base_tree), removed, upserts, &final_schema, node_bytes, &limits).await?
            } else {
                let all: Vec<Fragment> =
                    apply_delta(base, Some(seg.clone())).iter().map(|(f, _)| (**f).clone()).collect();
                tree::apply_async(store, None, &[], &all, &final_schema, node_bytes, &limits).await?
            };
            segments = written.root.into_iter().collect();
            Some(seg)
        } else {
            let seg = Segment { fragments, removed };
            let (written, last) = write_segments(store, &seg, limits.max_segment_body()).await?;
            segments.extend(written);
            merge_tiers(store, &mut segments, Some(last), &limits).await?;
            Some(seg)
        };
    let tree_flag = if tree { READER_FLAG_FRAGMENT_TREE } else { 0 };
    let manifest = Manifest {
        reader_flags: bm.reader_flags | tree_flag | crate::manifest::required_reader_flags(&final_schema),
        writer_flags: bm.writer_flags,
        branch: bm.branch.clone(),
        version: bm.version + 1,
        parent: Some(bm.version_ref()),
        base: None,
        merged: match change {
            Change::Rewrite(r) => r.merged.clone(),
            _ => None,
        },
        timestamp_ms: options.timestamp(),
        message: message.to_string(),
        writer_id: options.writer_id(),
        schema: match change {
            Change::Rewrite(Rewrite { schema: Some(s), .. }) => s.clone(),
            _ => bm.schema.clone(),
        },
        next_column_id: match change {
            Change::Rewrite(Rewrite { next_column_id: Some(n), .. }) => *n,
            _ => bm.next_column_id,
        },
        next_fragment_id,
        row_count,
        segments,
        stats: aggregate_stats(&stats_lists, &final_schema),
        metadata: bm.metadata.clone(),
    };
    Ok((manifest, delta))
}

/// Copies a fragment's deletion vector under a new fragment id (a deletion vector names its
/// fragment `[DEL-04]`), for fragments that a merge brings over with a new id.
async fn renumber_deletion(
    store: &Store,
    d: &DeletionRef,
    f: &Fragment,
    new_id: u64,
    limits: &Limits,
) -> Result<DeletionRef> {
    let mut dv = crate::dataset::read_deletion_vector_async(store, d, f, limits).await?;
    dv.fragment_id = new_id;
    write_deletion_vector(store, &dv, limits).await
}

/// Writes a deletion vector (content-addressed, so a re-upload is harmless) and returns its
/// reference `[DEL-03]`. Its body limit is the segment body limit `[DEL-01]`.
async fn write_deletion_vector(store: &Store, dv: &DeletionVector, limits: &Limits) -> Result<DeletionRef> {
    let what = format!("deletion vector of fragment {}", dv.fragment_id);
    let bytes = envelope::seal_within(ObjectKind::Deletion, dv, limits.max_segment_body(), &what)?;
    let key = paths::content_key(paths::DELETIONS_DIR, "tsx", &bytes);
    let out = DeletionRef {
        path: key.clone(),
        size: bytes.len() as u64,
        crc32: envelope::stored_crc(&bytes),
        deleted_count: dv.rows.len() as u64,
    };
    store.put_if_absent_async(&key, Bytes::from(bytes)).await?;
    Ok(out)
}

/// The version-wide statistics `[STAT-06]`: a schema column is included only when every list
/// (fragment, or the previous aggregate) has it.
fn aggregate_stats(lists: &[Vec<ColumnStats>], schema: &Schema) -> Vec<ColumnStats> {
    let mut merged = stats::merge_all(lists.iter().map(Vec::as_slice));
    merged.retain(|s| {
        schema.column_by_id(s.column_id).is_some() && lists.iter().all(|l| l.iter().any(|x| x.column_id == s.column_id))
    });
    merged
}

impl Dataset {
    /// Deletes rows by global row index (of this version) with deletion vectors: data files are
    /// not rewritten `[DEL-06]`. A fragment whose rows are all deleted is removed.
    ///
    /// # Errors
    /// `usage` for an index out of range; `conflict` if a concurrent commit changed the same
    /// fragments; storage errors.
    pub fn delete_rows(&self, rows: &[u64], message: &str, options: &WriteOptions) -> Result<Dataset> {
        block_on(self.delete_rows_async(rows, message, options))
    }

    /// As [`Dataset::delete_rows`] (async).
    ///
    /// # Errors
    /// As [`Dataset::delete_rows`].
    pub async fn delete_rows_async(&self, rows: &[u64], message: &str, options: &WriteOptions) -> Result<Dataset> {
        self.require_whole("deleting rows")?;
        let mut per: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        let mut sorted = rows.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        for r in sorted {
            if r >= self.row_count() {
                return Err(Error::usage(format!("row {r} outside 0..{}", self.row_count())));
            }
            let i = self.fragments().partition_point(|f| f.rows().end <= r);
            let info = &self.fragments()[i];
            let p = self.physical_rows_async(info, r - info.first_row..r - info.first_row + 1).await?;
            per.entry(info.fragment.id).or_default().extend(p);
        }
        commit_change(self, &Change::Delete(per), message, options).await
    }

    /// Commits, on top of the latest version of this version's branch, a version equal to this
    /// one (same schema and rows) `[VER-13]`.
    ///
    /// # Errors
    /// `conflict` if another commit takes the version first; storage errors.
    pub fn restore(&self, message: &str, options: &WriteOptions) -> Result<Dataset> {
        block_on(self.restore_async(message, options))
    }

    /// As [`Dataset::restore`] (async).
    ///
    /// # Errors
    /// As [`Dataset::restore`].
    pub async fn restore_async(&self, message: &str, options: &WriteOptions) -> Result<Dataset> {
        let store = self.store().clone();
        let latest = latest_version_async(&store, self.branch()).await?;
        let (head, _) = load_manifest(&store, self.branch(), latest, self.limits()).await?;
        check_writer_flags(&head)?;
        check_writer_flags(self.manifest())?;
        let m = Manifest {
            version: head.version + 1,
            parent: Some(head.version_ref()),
            base: None,
            merged: None,
            timestamp_ms: options.timestamp(),
            message: message.to_string(),
            writer_id: options.writer_id(),
            next_column_id: head.next_column_id.max(self.manifest().next_column_id),
            next_fragment_id: head.next_fragment_id.max(self.manifest().next_fragment_id),
            ..self.manifest().clone()
        };
        match publish(&store, &m, &self.limits().tightest(&options.limits)).await? {
            Published::Ours(crc) => Dataset::from_manifest(store, m, crc, options.limits.clone()).await,
            Published::Theirs => Err(Error::Conflict { what: format!("{}@{} was taken", m.branch, m.version) }),
        }
    }
}

/// Refuses to write on top of a version with writer-required flags this implementation does not
/// know `[FLG-04]`.
pub(crate) fn check_writer_flags(m: &Manifest) -> Result<()> {
    let unknown = m.writer_flags & !KNOWN_WRITER_FLAGS;
    if unknown == 0 {
        Ok(())
    } else {
        Err(Error::unsupported(
            paths::manifest_key(&m.branch, m.version),
            format!("unknown writer-required flags {unknown:#x} [FLG-04]"),
        ))
    }
}

/// Whose manifest sits at the key after a create-if-absent.
pub(crate) enum Published {
    /// Ours, with the CRC of the object.
    Ours(u32),
    /// Another writer's.
    Theirs,
}

/// Creates a manifest object with create-if-absent `[VER-05]`; on `AlreadyExists` reads the
/// object back and compares writer ids, so a retried request that had landed counts as ours
/// `[VER-07]`. A manifest whose body is over `limits`' manifest body limit (a `segments` list
/// too long, say) is refused before anything is written `[LIM-15]`.
pub(crate) async fn publish(store: &Store, manifest: &Manifest, limits: &Limits) -> Result<Published> {
    let key = paths::manifest_key(&manifest.branch, manifest.version);
    let bytes = envelope::seal_within(ObjectKind::Manifest, manifest, limits.max_manifest_body(), &key)?;
    let crc = envelope::stored_crc(&bytes);
    let max_manifest = envelope::max_object_len(crate::limits::hard::MAX_MANIFEST_BODY);
    let created = match store.put_if_absent_async(&key, Bytes::from(bytes)).await {
        Ok(c) => c,
        // The request may have landed even though its response was lost: look before failing,
        // so a caller never sees an error for a commit that happened [VER-07].
        Err(e @ Error::Io { .. }) => match store.get_bounded_async(&key, max_manifest).await {
            Ok(_) => Created::Existed,
            Err(_) => return Err(e),
        },
        Err(e) => return Err(e),
    };
    match created {
        Created::New => Ok(Published::Ours(crc)),
        Created::Existed => {
            let other = store.get_bounded_async(&key, max_manifest).await?;
            let theirs: Manifest =
                envelope::open(ObjectKind::Manifest, &other, crate::limits::hard::MAX_MANIFEST_BODY, &key)?;
            if theirs.writer_id == manifest.writer_id && envelope::stored_crc(&other) == crc {
                Ok(Published::Ours(crc))
            } else {
                Ok(Published::Theirs)
            }
        }
    }
}
