//! Changing a dataset beyond appends and deletes: schema evolution (add, drop, rename
//! columns), updates of some columns of some rows, and compaction (SPEC.md §"Operations").
//!
//! Each operation rewrites only what it changes: adding a column writes one new data file per
//! fragment holding just that column; an update rewrites the updated columns of the touched
//! fragments; drop and rename change only the schema. All of them commit through the same
//! optimistic protocol as appends.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::batch::Batch;
use crate::blocking::block_on;
use crate::column::ColumnData;
use crate::commit::{Change, Rewrite, WriteOptions, commit_change, write_data_file};
use crate::datafile::{Block, DataFileWriter};
use crate::dataset::{Dataset, FragmentInfo};
use crate::error::{Error, Result};
use crate::manifest::{ColumnStats, Fragment};
use crate::schema::{Column, Dim, Schema, validate_name};
use crate::stats;

impl Dataset {
    /// Reads every physical row (deleted ones included) of a fragment for `cols`.
    ///
    /// # Errors
    /// Validation and storage errors.
    pub fn read_fragment_physical(&self, info: &FragmentInfo, cols: &[&Column]) -> Result<Vec<ColumnData>> {
        let all = 0..info.fragment.row_count;
        let mut out = Vec::with_capacity(cols.len());
        for c in cols {
            let file =
                info.fragment.files.iter().find(|f| f.column_ids.contains(&c.id)).ok_or_else(|| {
                    Error::invalid(format!("fragment {}", info.fragment.id), "column has no data file")
                })?;
            let df = self.data_file(&info.fragment, file)?;
            let chunk = df.chunk(c.id).ok_or_else(|| Error::invalid(&file.path, "column missing from footer"))?;
            let (blocks, _) = df.blocks_for(chunk, &all);
            let ranges: Vec<_> = blocks.iter().map(Block::range).collect();
            let bytes = self.store().get_ranges(&file.path, &ranges)?;
            let stored: Vec<&[u8]> = bytes.iter().map(Bytes::as_ref).collect();
            out.push(df.decode(c, all.clone(), &stored)?);
        }
        Ok(out)
    }

    /// Adds a column `[EVO-01]`. `values` holds one row per live row of this version; `None`
    /// fills a nullable column with nulls. Only the new column is written: one small data file
    /// per fragment.
    ///
    /// # Errors
    /// `usage` for a bad column or values; `conflict` if any commit lands meanwhile.
    pub fn add_column(
        &self,
        column: Column,
        values: Option<&ColumnData>,
        message: &str,
        options: &WriteOptions,
    ) -> Result<Dataset> {
        self.require_whole("adding a column")?;
        let mut column = column;
        column.id = self.manifest().next_column_id;
        let mut schema = self.schema().clone();
        schema.columns.push(column.clone());
        schema.validate()?;
        match values {
            None if !column.nullable => return Err(Error::usage("a non-nullable column needs values")),
            Some(v) if v.len() as u64 != self.row_count() => {
                return Err(Error::usage(format!("{} values for {} rows", v.len(), self.row_count())));
            }
            Some(v) if column.nullable && v.validity().is_none() => v.clone().into_nullable().check_against(&column)?,
            Some(v) => v.check_against(&column)?,
            None => {}
        }
        let values: Option<ColumnData> = values
            .map(|v| if column.nullable && v.validity().is_none() { v.clone().into_nullable() } else { v.clone() });
        let writer = DataFileWriter::with_page_bytes(options.page_bytes);
        let mut replace = Vec::with_capacity(self.fragments().len());
        for info in self.fragments() {
            let deleted = self.deleted_rows(info)?;
            let mut data = ColumnData::for_column(&column);
            let mut live = info.first_row;
            for p in 0..info.fragment.row_count {
                if deleted.binary_search(&p).is_ok() {
                    push_filler(&mut data, &column)?;
                    continue;
                }
                match &values {
                    Some(v) => data.extend_from(v, live as usize..live as usize + 1)?,
                    None => data.push_null()?,
                }
                live += 1;
            }
            let file = write_data_file(self.store(), &writer, &[&column], &[&data])?;
            let mut f = (*info.fragment).clone();
            f.files.push(file);
            f.stats.push(stats::compute(&column, &data));
            replace.push(f);
        }
        let rewrite = Rewrite {
            schema: Some(schema),
            next_column_id: Some(column.id + 1),
            replace,
            exclusive: true,
            ..Rewrite::default()
        };
        block_on(commit_change(self, &Change::Rewrite(rewrite), message, options))
    }

    /// Drops a column from the schema `[EVO-02]`. No data is rewritten; the column's bytes stay
    /// in the data files until compaction, and earlier versions still read it.
    ///
    /// # Errors
    /// `usage` for an unknown column.
    pub fn drop_column(&self, name: &str, message: &str, options: &WriteOptions) -> Result<Dataset> {
        let mut schema = self.schema().clone();
        let before = schema.columns.len();
        schema.columns.retain(|c| c.name != name);
        if schema.columns.len() == before {
            return Err(Error::usage(format!("no column named {name:?}")));
        }
        let rewrite = Rewrite { schema: Some(schema), ..Rewrite::default() };
        block_on(commit_change(self, &Change::Rewrite(rewrite), message, options))
    }

    /// Renames a column `[EVO-03]`; its id, and so its data, stay.
    ///
    /// # Errors
    /// `usage` for an unknown column or a taken name.
    pub fn rename_column(&self, from: &str, to: &str, message: &str, options: &WriteOptions) -> Result<Dataset> {
        validate_name(to, "new column name").map_err(|e| Error::usage(e.to_string()))?;
        let mut schema = self.schema().clone();
        if schema.column(to).is_some() {
            return Err(Error::usage(format!("a column named {to:?} exists")));
        }
        let c = schema
            .columns
            .iter_mut()
            .find(|c| c.name == from)
            .ok_or_else(|| Error::usage(format!("no column named {from:?}")))?;
        c.name = to.to_string();
        let rewrite = Rewrite { schema: Some(schema), ..Rewrite::default() };
        block_on(commit_change(self, &Change::Rewrite(rewrite), message, options))
    }

    /// Sets the values of some columns for some rows `[EVO-04]`. `rows` are global row indices of
    /// this version; `values` holds the new values of the updated columns, one row per entry of
    /// `rows`. Only the updated columns of the touched fragments are rewritten.
    ///
    /// # Errors
    /// `usage` for bad rows or values; `conflict` if a concurrent commit changed the fragments.
    pub fn update_rows(&self, rows: &[u64], values: &Batch, message: &str, options: &WriteOptions) -> Result<Dataset> {
        self.require_whole("updating rows")?;
        if values.num_rows() != rows.len() {
            return Err(Error::usage(format!("{} value rows for {} row indices", values.num_rows(), rows.len())));
        }
        let cols: Vec<&Column> = values
            .names()
            .map(|n| self.schema().column(n).ok_or_else(|| Error::usage(format!("no column named {n:?}"))))
            .collect::<Result<_>>()?;
        for c in &cols {
            let v = values.get(&c.name).ok_or_else(|| Error::usage("column vanished"))?;
            if c.nullable && v.validity().is_none() {
                v.clone().into_nullable().check_against(c)?;
            } else {
                v.check_against(c)?;
            }
        }
        // Fragment id -> (physical row -> index into `values`).
        let mut touched: BTreeMap<u64, (usize, BTreeMap<u64, usize>)> = BTreeMap::new();
        for (k, &r) in rows.iter().enumerate() {
            if r >= self.row_count() {
                return Err(Error::usage(format!("row {r} outside 0..{}", self.row_count())));
            }
            let i = self.fragments().partition_point(|f| f.rows().end <= r);
            let info = &self.fragments()[i];
            let p = self.physical_rows(info, r - info.first_row..r - info.first_row + 1)?;
            let entry = touched.entry(info.fragment.id).or_insert_with(|| (i, BTreeMap::new()));
            if entry.1.insert(p[0], k).is_some() {
                return Err(Error::usage(format!("row {r} is updated twice")));
            }
        }
        let ids: Vec<u32> = cols.iter().map(|c| c.id).collect();
        let writer = DataFileWriter::with_page_bytes(options.page_bytes);
        let mut replace = Vec::with_capacity(touched.len());
        for (i, patch) in touched.values() {
            let info = &self.fragments()[*i];
            let old = self.read_fragment_physical(info, &cols)?;
            let mut new = Vec::with_capacity(cols.len());
            for (c, old) in cols.iter().zip(&old) {
                let v = values.get(&c.name).ok_or_else(|| Error::usage("column vanished"))?;
                let v = if c.nullable && v.validity().is_none() { v.clone().into_nullable() } else { v.clone() };
                let mut d = ColumnData::for_column(c);
                for p in 0..info.fragment.row_count {
                    match patch.get(&p) {
                        Some(&k) => d.extend_from(&v, k..k + 1)?,
                        None => d.extend_from(old, p as usize..p as usize + 1)?,
                    }
                }
                new.push(d);
            }
            let data: Vec<&ColumnData> = new.iter().collect();
            let file = write_data_file(self.store(), &writer, &cols, &data)?;
            let mut f: Fragment = (*info.fragment).clone();
            for r in &mut f.files {
                r.column_ids.retain(|id| !ids.contains(id));
            }
            f.files.retain(|r| !r.column_ids.is_empty());
            f.files.push(file);
            f.stats.retain(|s| !ids.contains(&s.column_id));
            f.stats.extend(cols.iter().zip(&new).map(|(c, d)| stats::compute(c, d)));
            f.stats.sort_by_key(|s: &ColumnStats| s.column_id);
            replace.push(f);
        }
        let rewrite = Rewrite { replace, ..Rewrite::default() };
        block_on(commit_change(self, &Change::Rewrite(rewrite), message, options))
    }

    /// Compacts small fragments and fragments with deletions into fragments of up to
    /// `target_rows` live rows `[EVO-05]`, keeping row order (a merged fragment takes the id of
    /// the first fragment it replaces). Returns this version unchanged when nothing qualifies.
    ///
    /// # Errors
    /// Storage and validation errors; `conflict` if a concurrent commit changed the fragments.
    pub fn compact(&self, target_rows: u64, message: &str, options: &WriteOptions) -> Result<Dataset> {
        self.require_whole("compaction")?;
        let target_rows = target_rows.max(1);
        let small = |f: &FragmentInfo| f.fragment.deletion.is_some() || f.fragment.live_rows() < target_rows / 2;
        let mut groups: Vec<Vec<&FragmentInfo>> = Vec::new();
        let mut current: Vec<&FragmentInfo> = Vec::new();
        let mut rows = 0;
        for f in self.fragments() {
            if !small(f) || rows + f.fragment.live_rows() > target_rows {
                if !current.is_empty() {
                    groups.push(std::mem::take(&mut current));
                }
                rows = 0;
            }
            if small(f) {
                rows += f.fragment.live_rows();
                current.push(f);
            }
        }
        if !current.is_empty() {
            groups.push(current);
        }
        groups.retain(|g| g.len() > 1 || g[0].fragment.deletion.is_some());
        if groups.is_empty() {
            return Ok(self.clone());
        }
        let schema: &Schema = self.schema();
        let cols: Vec<&Column> = schema.columns.iter().collect();
        let writer = DataFileWriter::with_page_bytes(options.page_bytes);
        let mut replace = Vec::new();
        let mut remove = Vec::new();
        for g in groups {
            let range = g[0].first_row..g[g.len() - 1].rows().end;
            let batch = self.read_rows(range.clone(), None)?;
            let data: Vec<&ColumnData> = cols
                .iter()
                .map(|c| batch.get(&c.name).ok_or_else(|| Error::usage("column missing")))
                .collect::<Result<_>>()?;
            let file = write_data_file(self.store(), &writer, &cols, &data)?;
            let stats = cols.iter().zip(&data).map(|(c, d)| stats::compute(c, d)).collect();
            replace.push(Fragment {
                id: g[0].fragment.id,
                row_count: range.end - range.start,
                files: vec![file],
                deletion: None,
                stats,
            });
            remove.extend(g[1..].iter().map(|f| f.fragment.id));
        }
        let rewrite = Rewrite { replace, remove, ..Rewrite::default() };
        block_on(commit_change(self, &Change::Rewrite(rewrite), message, options))
    }
}

/// Appends a placeholder for a deleted row: null when nullable, else zeros (ragged dims 0).
fn push_filler(data: &mut ColumnData, column: &Column) -> Result<()> {
    if column.nullable {
        return data.push_null();
    }
    let shape: Vec<u64> = if column.dtype.is_variable() {
        vec![0]
    } else {
        column.shape.iter().map(|d| if let Dim::Fixed(x) = d { *x } else { 0 }).collect()
    };
    let bytes = shape.iter().try_fold(column.dtype.item_size() as u64, |a, &d| a.checked_mul(d)).unwrap_or(0);
    data.push_row(&shape, &vec![0u8; bytes as usize])
}
