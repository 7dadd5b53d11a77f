//! Differences between two versions, computed from manifests, index segments and deletion
//! vectors without reading data files (SPEC.md §"Diff").

use std::collections::BTreeMap;

use crate::dataset::{Dataset, FragmentInfo};
use crate::error::Result;
use crate::manifest::Fragment;

/// What changed from one version to another.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diff {
    /// Live rows in fragments only the newer version has.
    pub rows_added: u64,
    /// Live rows of the older version that the newer one no longer has (deleted or removed).
    pub rows_deleted: u64,
    /// Per column name (of the newer schema): rows of fragments whose data for that column was
    /// rewritten (updated), counted in the newer version.
    pub rows_changed: BTreeMap<String, u64>,
    /// Columns only the newer schema has.
    pub columns_added: Vec<String>,
    /// Columns only the older schema has.
    pub columns_dropped: Vec<String>,
    /// Columns whose name changed (old name, new name).
    pub columns_renamed: Vec<(String, String)>,
}

impl Diff {
    /// True when the versions hold the same rows and schema.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

impl Dataset {
    /// The changes from `older` to `self` `[DIFF-01]`. Rows are identified by (fragment id,
    /// physical offset), so the two versions may be on different branches of one dataset.
    ///
    /// # Errors
    /// Errors reading deletion vectors.
    pub fn diff_from(&self, older: &Dataset) -> Result<Diff> {
        self.require_whole("a diff")?;
        older.require_whole("a diff")?;
        let mut d = Diff::default();
        let (a_schema, b_schema) = (older.schema(), self.schema());
        for c in &b_schema.columns {
            match a_schema.column_by_id(c.id) {
                None => d.columns_added.push(c.name.clone()),
                Some(o) if o.name != c.name => d.columns_renamed.push((o.name.clone(), c.name.clone())),
                Some(_) => {}
            }
        }
        d.columns_dropped =
            a_schema.columns.iter().filter(|c| b_schema.column_by_id(c.id).is_none()).map(|c| c.name.clone()).collect();
        let a: BTreeMap<u64, &FragmentInfo> = older.fragments().iter().map(|f| (f.fragment.id, f)).collect();
        let b: BTreeMap<u64, &FragmentInfo> = self.fragments().iter().map(|f| (f.fragment.id, f)).collect();
        for (id, fa) in &a {
            if !b.contains_key(id) {
                d.rows_deleted += fa.fragment.live_rows();
            }
        }
        for (id, fb) in &b {
            let Some(fa) = a.get(id) else {
                d.rows_added += fb.fragment.live_rows();
                continue;
            };
            if fa.fragment == fb.fragment {
                continue;
            }
            if fa.fragment.row_count != fb.fragment.row_count {
                // Rewritten (compacted) fragment: count it as replaced rows.
                d.rows_deleted += fa.fragment.live_rows();
                d.rows_added += fb.fragment.live_rows();
                continue;
            }
            let (da, db) = (older.deleted_rows(fa)?, self.deleted_rows(fb)?);
            // Rows deleted in between: in the newer vector, not in the older one.
            d.rows_deleted += db.iter().filter(|&&r| da.binary_search(&r).is_err()).count() as u64;
            for c in &b_schema.columns {
                if a_schema.column_by_id(c.id).is_some() && file_of(&fa.fragment, c.id) != file_of(&fb.fragment, c.id) {
                    *d.rows_changed.entry(c.name.clone()).or_default() += fb.fragment.live_rows();
                }
            }
        }
        Ok(d)
    }
}

fn file_of(f: &Fragment, column: u32) -> Option<&str> {
    f.files.iter().find(|r| r.column_ids.contains(&column)).map(|r| r.path.as_str())
}
