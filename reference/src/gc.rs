//! Garbage collection: deleting objects no version references (SPEC.md §"Garbage collection").
//!
//! Every version stays readable (time travel), so what becomes garbage is what no manifest of
//! any branch references: data files, segments and deletion vectors of commits that failed or
//! were abandoned, and staging files of crashed uploads. An object younger than the retention
//! period is kept even when unreferenced, because a writer may still be about to commit it.

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use crate::blocking::block_on;
use crate::dataset::load_manifest;
use crate::envelope::{self, ObjectKind};
use crate::error::Result;
use crate::limits::Limits;
use crate::manifest::{READER_FLAG_FRAGMENT_TREE, Segment};
use crate::paths;
use crate::store::Store;
use crate::tree::FragmentTree;

/// What a collection found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Unreferenced objects old enough to delete (deleted unless `dry_run`), with sizes.
    pub garbage: Vec<(String, u64)>,
    /// Unreferenced objects kept because they are younger than the retention period.
    pub too_young: usize,
    /// Referenced objects.
    pub referenced: usize,
    /// Whether nothing was deleted.
    pub dry_run: bool,
}

/// Deletes (or with `dry_run` only lists) unreferenced objects older than `retention` `[GC-01]`.
///
/// # Errors
/// Any manifest or segment that cannot be read stops the collection before anything is
/// deleted: an unreadable version must not make its objects look unreferenced `[GC-02]`.
pub fn collect_garbage(store: &Store, retention: Duration, dry_run: bool) -> Result<GcReport> {
    let limits = Limits::default();
    let mut live: HashSet<String> = HashSet::new();
    let mut segments_seen: HashSet<String> = HashSet::new();
    for branch in store.list_dirs(paths::BRANCHES_DIR)? {
        let dir = format!("{}/{branch}", paths::BRANCHES_DIR);
        for (name, _) in store.list(&dir)? {
            let Some(version) = paths::parse_manifest_name(&name) else { continue };
            let (m, _) = block_on(load_manifest(store, &branch, version, &limits))?;
            if m.reader_flags & READER_FLAG_FRAGMENT_TREE != 0 {
                // Nodes are shared between versions: a subtree already walked is not read again.
                let tree = FragmentTree::open(store, &m, limits.clone())?;
                tree.visit_nodes(&mut |path, node| {
                    if !segments_seen.insert(path.to_string()) {
                        return false;
                    }
                    live.insert(path.to_string());
                    for f in &node.fragments {
                        live.extend(f.files.iter().map(|r| r.path.clone()));
                        live.extend(f.deletion.iter().map(|d| d.path.clone()));
                    }
                    true
                })?;
                continue;
            }
            for sref in &m.segments {
                live.insert(sref.path.clone());
                if !segments_seen.insert(sref.path.clone()) {
                    continue;
                }
                let max = envelope::max_object_len(limits.max_segment_body());
                let bytes = store.get_bounded(&sref.path, max)?;
                let seg: Segment = envelope::open(ObjectKind::Segment, &bytes, limits.max_segment_body(), &sref.path)?;
                for f in &seg.fragments {
                    live.extend(f.files.iter().map(|r| r.path.clone()));
                    live.extend(f.deletion.iter().map(|d| d.path.clone()));
                }
            }
        }
    }
    // Lists objects of vector indexes are live while a record names them [ANN-12]; a record
    // that cannot be decoded stops the collection like an unreadable manifest.
    live.extend(crate::ann::named_lists(store, &limits)?);
    let now = SystemTime::now();
    let mut report = GcReport { dry_run, ..GcReport::default() };
    for dir in [paths::DATA_DIR, paths::INDEX_DIR, paths::DELETIONS_DIR, crate::ann::LISTS_DIR] {
        for (key, size, modified) in store.list_with_times(dir)? {
            if live.contains(&key) {
                report.referenced += 1;
            } else if now.duration_since(modified).unwrap_or_default() < retention {
                report.too_young += 1;
            } else {
                report.garbage.push((key, size));
            }
        }
    }
    if !dry_run {
        for (key, _) in &report.garbage {
            store.delete(key)?;
        }
    }
    Ok(report)
}
