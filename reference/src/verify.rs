//! Verification of a version `[VAL-14]`: every byte of every data file and deletion vector,
//! every checksum, size, padding byte and decoded value.
//!
//! One implementation for both callers: [`Dataset::verify`] stops at the first fault, while a
//! tool that reports every fault (`tessera verify`) calls [`Dataset::verify_fragment`] per
//! fragment (in parallel if it likes) and keeps going. Each data file is checked on its own, and
//! each column of a file whose footer is sound, so one fault does not hide another.

use std::ops::ControlFlow;

use crate::dataset::{Dataset, FragmentInfo, VerifyReport, check_tail, open_file, referenced};
use crate::error::{Error, ErrorClass};
use crate::manifest::DataFileRef;

/// One fault found by verification: the object at fault, where in it, and the typed error.
#[derive(Debug)]
pub struct Fault {
    /// The object key (data file or deletion vector).
    pub object: String,
    /// The fragment whose reference led to the object (`u64::MAX` for a fault in the version's
    /// index, found when a view's dataset reopens the whole version to verify it).
    pub fragment: u64,
    /// The column, when the fault is in one column's pages of a sound file.
    pub column: Option<String>,
    /// What is wrong.
    pub error: Error,
}

impl Fault {
    /// The error class of the fault `[ERR-*]`.
    #[must_use]
    pub fn class(&self) -> ErrorClass {
        self.error.class()
    }
}

impl Dataset {
    /// Verifies every fragment of this version, handing each fault to `on_fault` in fragment
    /// order; verification stops when `on_fault` returns [`ControlFlow::Break`]. Returns what
    /// was checked.
    pub fn verify_each(&self, mut on_fault: impl FnMut(Fault) -> ControlFlow<()>) -> VerifyReport {
        if self.is_partial() {
            // A view's dataset holds some fragments only: verify the whole version.
            let whole = Dataset::from_manifest(
                self.store().clone(),
                self.manifest().clone(),
                self.manifest_crc32(),
                self.limits().clone(),
            );
            return match whole {
                Ok(ds) => ds.verify_each(on_fault),
                Err(error) => {
                    let object = crate::paths::manifest_key(self.branch(), self.version());
                    let _ = on_fault(Fault { object, fragment: u64::MAX, column: None, error });
                    VerifyReport::default()
                }
            };
        }
        let mut report = VerifyReport::default();
        for info in self.fragments() {
            if self.verify_fragment(info, &mut report, &mut on_fault).is_break() {
                break;
            }
        }
        report
    }

    /// Verifies one fragment: each of its data files in full, then its deletion vector. Adds
    /// what was checked to `report` and hands each fault to `on_fault`; returns
    /// [`ControlFlow::Break`] as soon as `on_fault` does.
    pub fn verify_fragment(
        &self,
        info: &FragmentInfo,
        report: &mut VerifyReport,
        on_fault: &mut impl FnMut(Fault) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let id = info.fragment.id;
        for file in &info.fragment.files {
            self.verify_file(info, file, report, &mut |column, error| {
                on_fault(Fault { object: file.path.clone(), fragment: id, column, error })
            })?;
        }
        if let Err(error) = self.deleted_rows(info) {
            let object = info.fragment.deletion.as_ref().map_or_else(String::new, |d| d.path.clone());
            on_fault(Fault { object, fragment: id, column: None, error })?;
        } else {
            report.rows += info.fragment.live_rows();
        }
        ControlFlow::Continue(())
    }

    /// Checks one data file completely: a fault of the file as a whole ends its check; a fault
    /// in one column's pages is reported and the other columns are still checked.
    fn verify_file(
        &self,
        info: &FragmentInfo,
        file: &DataFileRef,
        report: &mut VerifyReport,
        fault: &mut impl FnMut(Option<String>, Error) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let path = file.path.as_str();
        // Bounded by the declared size: a larger object is refused before it is read.
        let bytes = match self.store().get_bounded(path, file.size) {
            Ok(b) if b.len() as u64 == file.size => b,
            Ok(b) => return fault(None, size_mismatch(path, b.len() as u64, file.size)),
            Err(Error::Limit { actual, .. }) => return fault(None, size_mismatch(path, actual, file.size)),
            Err(e) => return fault(None, referenced(e, path)),
        };
        let rows = info.fragment.row_count;
        let columns = match self.file_columns(file) {
            Ok(c) => c,
            Err(e) => return fault(None, e),
        };
        let opened = check_tail(file, self.limits(), &bytes, &bytes)
            .and_then(|tail| open_file(file, rows, &columns, self.limits(), tail, &bytes, 0, None));
        let df = match opened {
            Ok(df) => df,
            Err(e) => return fault(None, e),
        };
        if let Err(e) = df.check_padding(&bytes) {
            fault(None, e)?;
        }
        for c in &columns {
            let Some(chunk) = df.chunk(c.id) else {
                fault(Some(c.name.clone()), Error::invalid(path, format!("column {} missing from the footer", c.id)))?;
                continue;
            };
            let all = 0..rows;
            let (blocks, _) = df.blocks_for(chunk, &all);
            // Block ranges lie inside the file: `DataFile::open` checked them against the footer.
            let stored: Vec<&[u8]> = blocks
                .iter()
                .map(|b| bytes.get(b.offset as usize..(b.offset + b.stored_len) as usize).unwrap_or(&[]))
                .collect();
            match df.decode(c, all, &stored) {
                Ok(data) => {
                    if let Err(e) = null_rows_zero(&data, path, c.id) {
                        fault(Some(c.name.clone()), e)?;
                    }
                    // Kind value rules on live rows [KND-11]; a faulty deletion vector is
                    // reported with the fragment, and its rows then count as live here.
                    let deleted = self.deleted_rows(info).unwrap_or_default();
                    if let Err(e) = crate::kinds::check_live_kind_values(c, &data, &deleted) {
                        fault(Some(c.name.clone()), Error::invalid(path, format!("column {}: {e}", c.id)))?;
                    }
                }
                Err(e) => fault(Some(c.name.clone()), e)?,
            }
            report.blocks += blocks.len() as u64;
        }
        report.files += 1;
        report.bytes += file.size;
        ControlFlow::Continue(())
    }
}

/// Every byte of every null row is zero `[MOD-06]`, a verifier's check (VAL-14): readers check
/// only that a null row's shapes values are 0, which gives rows of a ragged or variable column
/// no bytes at all.
fn null_rows_zero(data: &crate::ColumnData, path: &str, column_id: u32) -> Result<(), Error> {
    match (0..data.len()).find(|&i| !data.is_valid(i) && data.row(i).iter().any(|&b| b != 0)) {
        Some(i) => {
            Err(Error::invalid(path, format!("column {column_id}: null row {i} holds a non-zero byte [MOD-06]")))
        }
        None => Ok(()),
    }
}

fn size_mismatch(path: &str, actual: u64, declared: u64) -> Error {
    Error::invalid(path, format!("file is {actual} bytes, manifest says {declared} [SEG-07]"))
}

#[cfg(test)]
mod tests {
    use std::ops::ControlFlow;

    use crate::{Batch, Column, ColumnData, DType, Dataset, ErrorClass, Schema, WriteOptions};

    /// A dataset with `n` single-file fragments of one i64 column.
    fn dataset(path: &std::path::Path, n: i64) -> Dataset {
        let schema = Schema::new([Column::new("x", DType::I64, &[])]).unwrap();
        let mut ds = Dataset::create(path.to_str().unwrap(), schema, &WriteOptions::default()).unwrap();
        for i in 0..n {
            let batch = Batch::new().with("x", ColumnData::from_scalars(&[i, i + 1])).unwrap();
            ds = ds.append(&batch, "rows", WriteOptions::default()).unwrap();
        }
        ds
    }

    #[test]
    fn null_rows_must_be_zero_bytes() {
        use crate::Dim::Fixed;
        let data = |values: Vec<u8>| {
            ColumnData::from_parts(
                DType::U8,
                vec![Fixed(2)],
                values,
                vec![0, 2, 4],
                Vec::new(),
                Some(vec![true, false]),
            )
        };
        assert!(super::null_rows_zero(&data(vec![9, 9, 0, 0]), "f", 0).is_ok(), "a valid row may hold anything");
        let err = super::null_rows_zero(&data(vec![9, 9, 0, 1]), "f", 0).unwrap_err();
        assert_eq!(err.class(), ErrorClass::Invalid);
        assert!(err.to_string().contains("MOD-06"), "{err}");
    }

    #[test]
    fn kind_values_of_live_rows_are_verified() {
        use crate::Kind;
        let dir = tempfile::tempdir().unwrap();
        let col = Column::new("t", DType::U8, &[crate::Dim::Ragged]).with_kind(Kind::Tokens { vocab_size: Some(10) });
        let schema = Schema::new([col]).unwrap();
        let ds = Dataset::create(dir.path().to_str().unwrap(), schema.clone(), &WriteOptions::default()).unwrap();
        let batch = Batch::new().with("t", ColumnData::from_sequences(&[&[1u8, 2][..], &[3][..]])).unwrap();
        let ds = ds.append(&batch, "rows", WriteOptions::default()).unwrap();
        assert!(ds.verify().is_ok());
        // The same rows checked against a vocabulary of 3: token 3 of row 1 is out of range,
        // unless row 1 is deleted.
        let small = Column::new("t", DType::U8, &[crate::Dim::Ragged]).with_kind(Kind::Tokens { vocab_size: Some(3) });
        let data = ColumnData::from_sequences(&[&[1u8, 2][..], &[3][..]]);
        let err = crate::kinds::check_live_kind_values(&small, &data, &[]).unwrap_err();
        assert!(err.contains("KND-11") && err.contains("row 1"), "{err}");
        assert!(crate::kinds::check_live_kind_values(&small, &data, &[1]).is_ok());
    }

    #[test]
    fn every_fault_or_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let ds = dataset(dir.path(), 3);
        let clean = ds.verify().unwrap();
        assert_eq!((clean.files, clean.rows), (3, 6));
        assert_eq!(ds.verify_each(|_| ControlFlow::Continue(())), clean);

        // Truncate two data files: each is one fault of its own, the third is still checked.
        for info in ds.fragments().iter().take(2) {
            let p = dir.path().join(&info.fragment.files[0].path);
            let len = std::fs::metadata(&p).unwrap().len();
            std::fs::OpenOptions::new().write(true).open(&p).unwrap().set_len(len - 1).unwrap();
        }
        let mut faults = Vec::new();
        let report = ds.verify_each(|f| {
            faults.push(f);
            ControlFlow::Continue(())
        });
        assert_eq!(faults.len(), 2, "{faults:?}");
        assert!(faults.iter().all(|f| f.class() == ErrorClass::Invalid && f.column.is_none()), "{faults:?}");
        assert_eq!(report.files, 1, "the sound file was read in full");
        assert_eq!(ds.verify().unwrap_err().class(), ErrorClass::Invalid, "verify returns the first fault");
        let mut seen = 0;
        ds.verify_each(|_| {
            seen += 1;
            ControlFlow::Break(())
        });
        assert_eq!(seen, 1, "Break stops verification");
    }
}
