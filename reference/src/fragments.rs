//! Parallel writers: data files written in many processes, committed once (SPEC.md §15.7,
//! `FRG-01` to `FRG-05`).
//!
//! [`Dataset::write_fragments`] encodes and uploads data files exactly as an append does, but
//! commits nothing: it returns one [`FragmentRecord`] per fragment, a small value (a few hundred
//! bytes of JSON) that travels to the one process that commits. [`Dataset::commit_fragments`]
//! validates every record against the version it commits on top of, as a reader would validate
//! the fragment, and commits them all as one version through the usual optimistic loop
//! (`commit.rs`): an append rebases over concurrent appends, an overwrite conflicts with any
//! concurrent commit. Nothing is visible until that commit; the data files of records that are
//! never committed are unreferenced objects that garbage collection removes (GC-01).

use serde::{Deserialize, Serialize};

use crate::batch::Batch;
use crate::blocking::block_on;
use crate::commit::{Change, Rewrite, WriteOptions, commit_change};
use crate::dataset::Dataset;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::manifest::{ColumnStats, DataFileRef, Fragment, Scalar};
use crate::paths;
use crate::schema::Schema;
use crate::writer::PendingFragment;

/// The `format` value of a record's JSON form `[FRG-01]`.
pub const RECORD_FORMAT: &str = "tessera-fragment/1";

/// A fragment whose data files are written but not committed `[FRG-01]`.
///
/// It serialises (serde, e.g. JSON) to the wire form of SPEC.md §15.7; deserialising checks the
/// `format` tag and nothing else. Everything else is checked when the record is committed
/// ([`Dataset::commit_fragments`]), because only then is the schema known.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(into = "wire::Record", try_from = "wire::Record")]
pub struct FragmentRecord {
    /// Rows in the fragment; every data file holds exactly this many.
    pub row_count: u64,
    /// The data files, one per column group, as a segment would list them.
    pub files: Vec<DataFileRef>,
    /// Per-column statistics of the fragment's rows (STAT-04).
    pub stats: Vec<ColumnStats>,
}

impl FragmentRecord {
    /// The record as JSON text (the wire form of SPEC.md §15.7).
    ///
    /// # Errors
    /// Never in practice (every field is plain data); kept fallible for serde's sake.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|e| Error::usage(format!("fragment record: {e}")))
    }

    /// Parses [`FragmentRecord::to_json`] output.
    ///
    /// # Errors
    /// `usage` for text that is not a record of this format: a record comes from the caller, not
    /// from the dataset's stored bytes.
    pub fn from_json(text: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|e| Error::usage(format!("not a {RECORD_FORMAT} record: {e}")))
    }

    /// Bytes of the data files the record references.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

/// How [`Dataset::commit_fragments`] combines the records with the version it commits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitMode {
    /// The records' rows follow the base version's rows; rebases over concurrent appends.
    Append,
    /// The new version holds exactly the records' rows (the base's fragments are removed);
    /// exclusive: any concurrent commit to the branch is a `conflict` `[FRG-04]`.
    Overwrite,
}

impl Dataset {
    /// Writes `batch` as data files of this version's schema and returns their fragment records,
    /// without committing anything `[FRG-02]`. Fragments are cut as an append cuts them
    /// (`options.target_file_bytes`, column groups).
    ///
    /// # Errors
    /// As [`crate::DatasetWriter::append`]: `usage` for a batch that does not fit the schema,
    /// storage errors.
    pub fn write_fragments(&self, batch: &Batch, options: WriteOptions) -> Result<Vec<FragmentRecord>> {
        let mut w = self.writer(options);
        w.append(batch)?;
        Ok(w.finish()?
            .into_iter()
            .map(|p| FragmentRecord { row_count: p.row_count, files: p.files, stats: p.stats })
            .collect())
    }

    /// Commits `records` (in order) as one new version of this version's branch `[FRG-03]`.
    ///
    /// Every record is first validated against this version's schema `[FRG-03]`: data file
    /// paths (LAY-02, LAY-09), column coverage (SEG-05, SEG-06), statistics (STAT-01 to
    /// STAT-03, STAT-05) and each data file's header, trailer and footer (VAL-09 to VAL-11).
    /// Then the commit loop runs (VER-05): [`CommitMode::Append`] rebases over concurrent
    /// commits that keep the schema; [`CommitMode::Overwrite`] conflicts with any.
    ///
    /// # Errors
    /// The class of the first failed check (`invalid` for a missing data file or a wrong size,
    /// `malformed` for a corrupt footer, `limit`); `conflict` if the branch moved in a way the
    /// change cannot be rebased over; storage errors.
    pub fn commit_fragments(
        &self,
        records: &[FragmentRecord],
        mode: CommitMode,
        message: &str,
        options: &WriteOptions,
    ) -> Result<Dataset> {
        if mode == CommitMode::Overwrite {
            self.require_whole("an overwrite")?;
        }
        // Check on a handle with an empty data-file cache, so every record's files are read
        // now, even ones this handle validated before (they may have been collected since).
        let (store, manifest, crc, limits) =
            (self.store().clone(), self.manifest().clone(), self.manifest_crc32(), self.limits().clone());
        let fresh = if self.is_partial() {
            Dataset::from_located(store, manifest, crc, self.fragments().to_vec(), limits)?
        } else {
            Dataset::from_log(store, manifest, crc, self.fragments().iter().map(|f| f.fragment.clone()), limits)?
        };
        let fragments =
            records.iter().enumerate().map(|(i, r)| fresh.check_record(r, i)).collect::<Result<Vec<_>>>()?;
        let change = match mode {
            CommitMode::Append => Change::Append(fragments),
            CommitMode::Overwrite => Change::Rewrite(Rewrite {
                remove: self.fragments().iter().map(|f| f.fragment.id).collect(),
                add: fragments
                    .into_iter()
                    .map(|p| Fragment { id: 0, row_count: p.row_count, files: p.files, deletion: None, stats: p.stats })
                    .collect(),
                exclusive: true,
                ..Rewrite::default()
            }),
        };
        block_on(commit_change(self, &change, message, options))
    }

    /// Validates one record against this version `[FRG-03]`, in the order the spec lists.
    fn check_record(&self, r: &FragmentRecord, index: usize) -> Result<PendingFragment> {
        let what = format!("fragment record {index}");
        Error::check_limit(|| format!("{what}: rows"), self.limits().max_file_rows(), r.row_count)?;
        for file in &r.files {
            paths::validate_relative(&file.path, &what)?;
            // Keys are case-sensitive [LAY-01]: `data/x.TSD` is not a data file key.
            let is_data_key = file
                .path
                .strip_prefix(paths::DATA_DIR)
                .and_then(|p| p.strip_prefix('/'))
                .and_then(|name| name.strip_suffix(".tsd"))
                .is_some_and(|stem| !stem.is_empty());
            if !is_data_key {
                return Err(Error::invalid(
                    &what,
                    format!("{:?} is not a data file key data/<name>.tsd [LAY-02]", file.path),
                ));
            }
            if file.column_ids.windows(2).any(|w| w[0] >= w[1]) {
                return Err(Error::invalid(&what, "a file's column ids must ascend [SEG-05]"));
            }
        }
        let fragment =
            Fragment { id: 0, row_count: r.row_count, files: r.files.clone(), deletion: None, stats: r.stats.clone() };
        fragment.check_columns(self.schema()).map_err(|e| match e {
            Error::Invalid { reason, .. } => Error::invalid(&what, reason),
            other => other,
        })?;
        check_stats(self.schema(), &r.stats, r.row_count, &what)?;
        for file in &r.files {
            self.data_file(&fragment, file)?;
        }
        Ok(PendingFragment { row_count: r.row_count, files: r.files.clone(), stats: r.stats.clone() })
    }
}

/// The statistics rules a committer can check without reading rows: STAT-05 (ascending ids),
/// STAT-01 to STAT-03 for schema columns, and `null_count` at most the rows `[FRG-03]`.
fn check_stats(schema: &Schema, stats: &[ColumnStats], rows: u64, what: &str) -> Result<()> {
    if stats.windows(2).any(|w| w[0].column_id >= w[1].column_id) {
        return Err(Error::invalid(what, "statistics column ids must ascend [STAT-05]"));
    }
    for s in stats {
        let Some(col) = schema.column_by_id(s.column_id) else { continue };
        let bad = |reason: &str| Err(Error::invalid(what, format!("statistics of column {}: {reason}", s.column_id)));
        if s.null_count > rows {
            return bad("null_count exceeds the fragment's rows [STAT-04]");
        }
        let eligible = col.shape.is_empty() && col.dtype.is_numeric();
        match (s.min, s.max) {
            (None, None) => {}
            (Some(min), Some(max)) => {
                if !eligible {
                    return bad("min/max on a column that is not rank-0 numeric or bool [STAT-01]");
                }
                if !(variant_fits(col.dtype, min) && variant_fits(col.dtype, max)) {
                    return bad("min/max use another Scalar variant than the dtype's [STAT-02]");
                }
                if !ordered(min, max) {
                    return bad("min is NaN, max is NaN, or min > max [STAT-03]");
                }
            }
            _ => return bad("min and max must both be present or both absent [STAT-03]"),
        }
    }
    Ok(())
}

/// STAT-02: the `Scalar` variant of a dtype.
fn variant_fits(dtype: DType, s: Scalar) -> bool {
    match s {
        Scalar::Bool(_) => dtype == DType::Bool,
        Scalar::Int(_) => matches!(dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64),
        Scalar::UInt(_) => matches!(dtype, DType::U8 | DType::U16 | DType::U32 | DType::U64),
        Scalar::Float(_) => matches!(dtype, DType::F16 | DType::Bf16 | DType::F32 | DType::F64),
    }
}

/// STAT-03: `min ≤ max`, neither NaN (`false < true`; `-0.0 = +0.0`).
fn ordered(min: Scalar, max: Scalar) -> bool {
    match (min, max) {
        (Scalar::Bool(a), Scalar::Bool(b)) => a <= b,
        (Scalar::Int(a), Scalar::Int(b)) => a <= b,
        (Scalar::UInt(a), Scalar::UInt(b)) => a <= b,
        (Scalar::Float(a), Scalar::Float(b)) => a <= b, // false for NaN
        _ => false,
    }
}

/// The wire form of a record (SPEC.md §15.7): JSON needs a tagged format and an exact encoding
/// of float statistics (JSON numbers have no infinities, and `-0.0` must survive).
mod wire {
    use serde::{Deserialize, Serialize};

    use super::{FragmentRecord, RECORD_FORMAT};
    use crate::manifest::{ColumnStats, DataFileRef, Scalar};

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct Record {
        format: String,
        row_count: u64,
        files: Vec<File>,
        stats: Vec<Stats>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        path: String,
        size: u64,
        footer_crc32: u32,
        column_ids: Vec<u32>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Stats {
        column_id: u32,
        null_count: u64,
        min: Option<Value>,
        max: Option<Value>,
    }

    /// A `Scalar`, floats as their IEEE-754 binary64 bit pattern.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Value {
        Bool(bool),
        Int(i64),
        Uint(u64),
        F64Bits(u64),
    }

    impl From<Scalar> for Value {
        fn from(s: Scalar) -> Self {
            match s {
                Scalar::Bool(b) => Self::Bool(b),
                Scalar::Int(i) => Self::Int(i),
                Scalar::UInt(u) => Self::Uint(u),
                Scalar::Float(f) => Self::F64Bits(f.to_bits()),
            }
        }
    }

    impl From<Value> for Scalar {
        fn from(v: Value) -> Self {
            match v {
                Value::Bool(b) => Self::Bool(b),
                Value::Int(i) => Self::Int(i),
                Value::Uint(u) => Self::UInt(u),
                Value::F64Bits(b) => Self::Float(f64::from_bits(b)),
            }
        }
    }

    impl From<FragmentRecord> for Record {
        fn from(r: FragmentRecord) -> Self {
            let stats = r
                .stats
                .into_iter()
                .map(|s| Stats {
                    column_id: s.column_id,
                    null_count: s.null_count,
                    min: s.min.map(Value::from),
                    max: s.max.map(Value::from),
                })
                .collect();
            let files = r
                .files
                .into_iter()
                .map(|f| File { path: f.path, size: f.size, footer_crc32: f.footer_crc32, column_ids: f.column_ids })
                .collect();
            Self { format: RECORD_FORMAT.to_string(), row_count: r.row_count, files, stats }
        }
    }

    impl TryFrom<Record> for FragmentRecord {
        type Error = String;

        fn try_from(r: Record) -> Result<Self, String> {
            if r.format != RECORD_FORMAT {
                return Err(format!("format {:?}, expected {RECORD_FORMAT:?}", r.format));
            }
            let stats = r
                .stats
                .into_iter()
                .map(|s| ColumnStats {
                    column_id: s.column_id,
                    null_count: s.null_count,
                    min: s.min.map(Scalar::from),
                    max: s.max.map(Scalar::from),
                })
                .collect();
            let files = r
                .files
                .into_iter()
                .map(|f| DataFileRef {
                    path: f.path,
                    size: f.size,
                    footer_crc32: f.footer_crc32,
                    column_ids: f.column_ids,
                })
                .collect();
            Ok(Self { row_count: r.row_count, files, stats })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Column, ColumnData, Dim, ErrorClass};

    fn setup() -> (tempfile::TempDir, Dataset) {
        let dir = tempfile::tempdir().unwrap();
        let schema = Schema::new([
            Column::new("id", DType::I64, &[]),
            Column::new("x", DType::F32, &[]),
            Column::new("v", DType::U8, &[Dim::Ragged]),
        ])
        .unwrap();
        let ds = Dataset::create(dir.path().to_str().unwrap(), schema, &WriteOptions::default()).unwrap();
        (dir, ds)
    }

    fn batch(start: i64, n: i64) -> Batch {
        let ids: Vec<i64> = (start..start + n).collect();
        #[allow(clippy::cast_precision_loss)]
        let xs: Vec<f32> = ids.iter().map(|&i| if i == 0 { f32::NEG_INFINITY } else { i as f32 * -0.5 }).collect();
        let rows: Vec<Vec<u8>> = ids.iter().map(|&i| vec![7u8; usize::try_from(i % 5).unwrap()]).collect();
        let refs: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
        Batch::new()
            .with("id", ColumnData::from_scalars(&ids))
            .unwrap()
            .with("x", ColumnData::from_scalars(&xs))
            .unwrap()
            .with("v", ColumnData::from_sequences::<u8>(&refs))
            .unwrap()
    }

    fn small() -> WriteOptions {
        WriteOptions { target_file_bytes: 256, ..WriteOptions::default() }
    }

    fn ids(ds: &Dataset) -> Vec<i64> {
        let b = ds.read_rows(0..ds.row_count(), Some(&["id"])).unwrap();
        let col = b.get("id").unwrap();
        (0..col.len()).map(|i| i64::from_le_bytes(col.row(i).try_into().unwrap())).collect()
    }

    #[test]
    fn records_round_trip_through_json_exactly() {
        let (_dir, ds) = setup();
        let recs = ds.write_fragments(&batch(0, 40), small()).unwrap();
        assert!(recs.len() > 1, "small files cut several fragments");
        for r in &recs {
            let text = r.to_json().unwrap();
            assert!(text.contains(RECORD_FORMAT));
            assert_eq!(&FragmentRecord::from_json(&text).unwrap(), r);
        }
        // -inf and -0.0 statistics survive JSON (which has no infinities).
        assert!(recs[0].stats.iter().any(|s| s.min == Some(Scalar::Float(f64::NEG_INFINITY))));
        let bad = recs[0].to_json().unwrap().replace(RECORD_FORMAT, "tessera-fragment/9");
        assert_eq!(FragmentRecord::from_json(&bad).unwrap_err().class(), ErrorClass::Usage);
        assert_eq!(FragmentRecord::from_json("{}").unwrap_err().class(), ErrorClass::Usage);
        let extra = recs[0].to_json().unwrap().replace("\"column_ids\"", "\"x\":1,\"column_ids\"");
        assert_eq!(FragmentRecord::from_json(&extra).unwrap_err().class(), ErrorClass::Usage);
    }

    #[test]
    fn nothing_is_visible_until_the_commit_and_then_all_of_it() {
        let (_dir, ds) = setup();
        let mut recs = ds.write_fragments(&batch(0, 30), small()).unwrap();
        recs.extend(ds.write_fragments(&batch(30, 30), small()).unwrap());
        let reopened = Dataset::open(ds.store().url()).unwrap();
        assert_eq!((reopened.version(), reopened.row_count()), (1, 0));
        let v2 = ds.commit_fragments(&recs, CommitMode::Append, "parallel", &WriteOptions::default()).unwrap();
        assert_eq!((v2.version(), v2.row_count()), (2, 60));
        assert_eq!(ids(&v2), (0..60).collect::<Vec<_>>());
        assert_eq!(v2.verify().unwrap().rows, 60);
        assert_eq!(v2.fragments().len(), recs.len());
    }

    #[test]
    fn an_append_rebases_over_a_concurrent_commit_and_an_overwrite_conflicts() {
        let (_dir, ds) = setup();
        let recs = ds.write_fragments(&batch(100, 10), small()).unwrap();
        let other = ds.append(&batch(0, 5), "concurrent", WriteOptions::default()).unwrap();
        assert_eq!(other.version(), 2);
        let err = ds.commit_fragments(&recs, CommitMode::Overwrite, "o", &WriteOptions::default()).unwrap_err();
        assert_eq!(err.class(), ErrorClass::Conflict, "{err}");
        let v3 = ds.commit_fragments(&recs, CommitMode::Append, "a", &WriteOptions::default()).unwrap();
        assert_eq!(v3.version(), 3);
        assert_eq!(ids(&v3), (0..5).chain(100..110).collect::<Vec<_>>());
        let v4 = v3.commit_fragments(&recs[..1], CommitMode::Overwrite, "o", &WriteOptions::default()).unwrap();
        assert_eq!((v4.version(), v4.row_count()), (4, recs[0].row_count));
        assert_eq!(v4.verify().unwrap().rows, recs[0].row_count);
    }

    #[test]
    fn a_record_of_a_missing_or_corrupt_file_is_rejected_with_the_spec_class() {
        let (dir, ds) = setup();
        let recs = ds.write_fragments(&batch(0, 10), WriteOptions::default()).unwrap();
        assert_eq!(recs.len(), 1);
        let good = &recs[0];
        let commit = |r: FragmentRecord| {
            ds.commit_fragments(&[r], CommitMode::Append, "", &WriteOptions::default()).unwrap_err().class()
        };
        let with_file = |f: &dyn Fn(&mut DataFileRef)| {
            let mut r = good.clone();
            f(&mut r.files[0]);
            r
        };
        // Absent (VAL-15), wrong size (SEG-07), another footer (SEG-07): invalid.
        assert_eq!(
            commit(with_file(&|f| f.path = "data/00000000000000000000000000000000.tsd".into())),
            ErrorClass::Invalid
        );
        assert_eq!(commit(with_file(&|f| f.size += 1)), ErrorClass::Invalid);
        assert_eq!(commit(with_file(&|f| f.footer_crc32 ^= 1)), ErrorClass::Invalid);
        // Not a data file key (LAY-02), a hostile path (LAY-09), ids out of order (SEG-05),
        // a column missing (SEG-06), rows that differ from the file's (DF-11).
        assert_eq!(commit(with_file(&|f| f.path = "index/x.tsd".into())), ErrorClass::Invalid);
        assert_eq!(commit(with_file(&|f| f.path = "data/../x.tsd".into())), ErrorClass::Invalid);
        assert_eq!(commit(with_file(&|f| f.column_ids.reverse())), ErrorClass::Invalid);
        assert_eq!(commit(with_file(&|f| f.column_ids.pop().map(drop).unwrap_or_default())), ErrorClass::Invalid);
        assert_eq!(commit(FragmentRecord { row_count: 11, ..good.clone() }), ErrorClass::Invalid);
        // Statistics a reader would ignore are refused from a writer (STAT-02, STAT-03).
        let mut r = good.clone();
        r.stats[0].min = Some(Scalar::Float(1.0));
        assert_eq!(commit(r), ErrorClass::Invalid);
        let mut r = good.clone();
        r.stats[0].max = None;
        assert_eq!(commit(r), ErrorClass::Invalid);
        // A corrupt footer byte: the trailer's footer CRC no longer matches (DF-10).
        let path = dir.path().join(&good.files[0].path);
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() - usize::try_from(crate::datafile::TRAILER_LEN).unwrap() - 1;
        bytes[at] ^= 0xFF;
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, bytes).unwrap();
        assert_eq!(commit(good.clone()), ErrorClass::Malformed);
        // Nothing was committed by any of the failures.
        assert_eq!(Dataset::open(dir.path().to_str().unwrap()).unwrap().version(), 1);
    }
}
