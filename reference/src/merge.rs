//! Merging one branch's version into another branch (SPEC.md §"Merge").
//!
//! Fast-forward when the target's head is an ancestor of the source; otherwise a three-way
//! merge against their nearest common ancestor: fragments the source added are appended (with
//! new ids), fragments it replaced or removed are taken over, unless the target changed the same
//! fragments or either side changed the schema — then the merge fails with a conflict report.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use crate::blocking::block_on;
use crate::commit::{Change, Published, Rewrite, WriteOptions, commit_change, publish};
use crate::dataset::{At, Dataset, latest_version};
use crate::error::{Error, Result};
use crate::manifest::{Fragment, Manifest, VersionRef};
use crate::paths;

/// What a merge did.
#[derive(Clone, Debug)]
pub struct MergeOutcome {
    /// The target branch's new head (or its unchanged head when there was nothing to merge).
    pub dataset: Dataset,
    /// True when the target was moved forward to the source's content without a three-way merge.
    pub fast_forward: bool,
}

impl Dataset {
    /// Every version this one descends from (itself included), through `parent`, `base` and
    /// `merged` links, as (branch, version) pairs.
    ///
    /// # Errors
    /// Errors reading manifests.
    pub fn ancestors(&self) -> Result<Vec<VersionRef>> {
        let mut seen: HashSet<VersionRef> = HashSet::new();
        let mut order = Vec::new();
        let mut queue = std::collections::VecDeque::from([self.manifest().clone()]);
        while let Some(m) = queue.pop_front() {
            if !seen.insert(m.version_ref()) {
                continue;
            }
            order.push(m.version_ref());
            for r in [&m.base, &m.merged, &m.parent].into_iter().flatten() {
                if !seen.contains(r) {
                    let (pm, _) =
                        block_on(crate::dataset::load_manifest(self.store(), &r.branch, r.version, self.limits()))?;
                    // A branch's first manifest is a copy of its base: follow it as the same content.
                    queue.push_back(Manifest { branch: r.branch.clone(), version: r.version, ..pm });
                }
            }
        }
        Ok(order)
    }

    /// Merges this version into the head of branch `target` `[MRG-01]`.
    ///
    /// # Errors
    /// `conflict` with a report of the fragments or schema changes both sides made; storage
    /// errors.
    pub fn merge_into(&self, target: &str, message: &str, options: &WriteOptions) -> Result<MergeOutcome> {
        self.require_whole("a merge")?;
        paths::validate_ref_name(target)?;
        let head_version = latest_version(self.store(), target)?;
        let head = self.checkout(&At::BranchVersion(target.to_string(), head_version))?;
        let source_anc = self.ancestors()?;
        let target_anc: HashSet<VersionRef> = head.ancestors()?.into_iter().collect();
        if target_anc.contains(&self.manifest().version_ref()) {
            return Ok(MergeOutcome { dataset: head, fast_forward: false });
        }
        if source_anc.contains(&head.manifest().version_ref()) {
            return fast_forward(self, &head, message, options)
                .map(|dataset| MergeOutcome { dataset, fast_forward: true });
        }
        let base_ref = source_anc
            .iter()
            .find(|r| target_anc.contains(r))
            .ok_or_else(|| Error::Conflict { what: "the versions share no ancestor".into() })?;
        let base = self.checkout(&At::BranchVersion(base_ref.branch.clone(), base_ref.version))?;
        crate::commit::check_writer_flags(self.manifest())?;
        let rewrite = three_way(&base, self, &head)?;
        let dataset = block_on(commit_change(&head, &Change::Rewrite(rewrite), message, options))?;
        Ok(MergeOutcome { dataset, fast_forward: false })
    }
}

fn fast_forward(source: &Dataset, head: &Dataset, message: &str, options: &WriteOptions) -> Result<Dataset> {
    crate::commit::check_writer_flags(head.manifest())?;
    crate::commit::check_writer_flags(source.manifest())?;
    let m = Manifest {
        branch: head.branch().to_string(),
        version: head.version() + 1,
        parent: Some(head.manifest().version_ref()),
        base: None,
        merged: Some(source.manifest().version_ref()),
        timestamp_ms: options.timestamp(),
        message: message.to_string(),
        writer_id: options.writer_id(),
        ..source.manifest().clone()
    };
    block_on(async {
        match publish(source.store(), &m, &head.limits().tightest(&options.limits)).await? {
            Published::Ours(crc) => {
                Dataset::from_manifest(source.store().clone(), m, crc, options.limits.clone()).await
            }
            Published::Theirs => {
                Err(Error::Conflict { what: format!("{}@{} was taken during the merge", m.branch, m.version) })
            }
        }
    })
}

type Fragments<'a> = BTreeMap<u64, &'a Fragment>;

fn fragments(ds: &Dataset) -> Fragments<'_> {
    ds.fragments().iter().map(|f| (f.fragment.id, &*f.fragment)).collect()
}

/// The three-way merge of `source` into `target` over `base`, as a rewrite of `target`.
fn three_way(base: &Dataset, source: &Dataset, target: &Dataset) -> Result<Rewrite> {
    let mut report = Vec::new();
    if source.schema() != base.schema() || target.schema() != base.schema() {
        report.push("schema changed since the common ancestor (merge schema changes by hand)".to_string());
    }
    let (b, s, t) = (fragments(base), fragments(source), fragments(target));
    let touched = |side: &Fragments<'_>| -> BTreeSet<u64> {
        b.iter().filter(|(id, f)| side.get(id) != Some(*f)).map(|(id, _)| *id).collect()
    };
    let (s_touched, t_touched) = (touched(&s), touched(&t));
    for id in s_touched.intersection(&t_touched) {
        if s.get(id) != t.get(id) {
            report.push(format!("fragment {id} changed on both sides"));
        }
    }
    if !report.is_empty() {
        return Err(Error::Conflict {
            what: format!(
                "merge of {}@{} into {}: {}",
                source.branch(),
                source.version(),
                target.branch(),
                report.join("; ")
            ),
        });
    }
    let mut rewrite = Rewrite { merged: Some(source.manifest().version_ref()), ..Rewrite::default() };
    for id in s_touched.difference(&t_touched) {
        match s.get(id) {
            Some(f) => rewrite.replace.push((*f).clone()),
            None => rewrite.remove.push(*id),
        }
    }
    rewrite.add = s.iter().filter(|(id, _)| !b.contains_key(id)).map(|(_, f)| (*f).clone()).collect();
    Ok(rewrite)
}
