//! Verification of a version `[VAL-14]`: every byte of every data file and deletion vector,
//! every checksum, size, padding byte and decoded value.
//!
//! One implementation for both callers: [`Dataset::verify`] stops at the first fault, while a
//! tool that reports every fault (`tessera verify`) calls [`Dataset::verify_fragment`] per
//! fragment (in parallel if it likes) and keeps going. The I/O is async
//! ([`Dataset::verify_each_async`], [`Dataset::verify_fragment_async`]: several fragments'
//! files in flight at once); the blocking calls are facades over it, and the checks of the
//! bytes are one sans-IO function. Each data file is checked on its own, and
//! each column of a file whose footer is sound, so one fault does not hide another.

use std::ops::ControlFlow;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::FuturesOrdered;

use crate::blocking::block_on;
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

/// Fragments [`Dataset::verify_each`] checks at once: their files are read concurrently, and
/// checked one after another on the caller's thread.
const VERIFY_CONCURRENCY: usize = 8;

impl Dataset {
    /// Verifies every fragment of this version, handing each fault to `on_fault` in fragment
    /// order; verification stops when `on_fault` returns [`ControlFlow::Break`]. Returns what
    /// was checked. A blocking facade over [`Dataset::verify_each_async`]; called inside an
    /// async runtime, it reports that as its one fault.
    pub fn verify_each(&self, mut on_fault: impl FnMut(Fault) -> ControlFlow<()>) -> VerifyReport {
        if self.is_partial() {
            // A view's dataset holds some fragments only: verify the whole version.
            let whole = block_on(Dataset::from_manifest(
                self.store().clone(),
                self.manifest().clone(),
                self.manifest_crc32(),
                self.limits().clone(),
            ));
            return match whole {
                Ok(ds) => ds.verify_each(on_fault),
                Err(error) => {
                    let object = crate::paths::manifest_key(self.branch(), self.version());
                    let _ = on_fault(Fault { object, fragment: u64::MAX, column: None, error });
                    VerifyReport::default()
                }
            };
        }
        let run = async {
            let on_fault = &mut on_fault;
            Ok(self.verify_each_async(VERIFY_CONCURRENCY, on_fault).await)
        };
        match block_on(run) {
            Ok(report) => report,
            Err(error) => {
                let _ =
                    on_fault(Fault { object: self.store().url().to_string(), fragment: u64::MAX, column: None, error });
                VerifyReport::default()
            }
        }
    }

    /// [`Dataset::verify_each`] for async callers: `concurrency` fragments are read at once
    /// (at least one), their faults still handed to `on_fault` in fragment order. The future
    /// is `Send` when `on_fault` is. A view's (partial) dataset is a `usage` fault here:
    /// [`Dataset::verify_each`] reopens the whole version for it.
    pub async fn verify_each_async(
        &self,
        concurrency: usize,
        on_fault: &mut impl FnMut(Fault) -> ControlFlow<()>,
    ) -> VerifyReport {
        if self.is_partial() {
            // Opening the whole version reads every fragment record through blocking calls.
            let object = crate::paths::manifest_key(self.branch(), self.version());
            let error = Error::usage("a view's dataset holds some fragments only: verify it with verify_each");
            let _ = on_fault(Fault { object, fragment: u64::MAX, column: None, error });
            return VerifyReport::default();
        }
        let mut report = VerifyReport::default();
        // A loop rather than `stream::iter(..).map(..).buffered(..)`: a closure held across
        // the await would make the future not `Send` (rustc's higher-ranked lifetime limits).
        let mut fragments = self.fragments().iter();
        let mut checked = FuturesOrdered::new();
        loop {
            while checked.len() < concurrency.max(1)
                && let Some(info) = fragments.next()
            {
                checked.push_back(self.verify_collect(info));
            }
            let Some((part, faults)) = checked.next().await else { break };
            report.add(&part);
            for f in faults {
                if on_fault(f).is_break() {
                    return report;
                }
            }
        }
        report
    }

    /// What checking one fragment found: what was checked, and every fault.
    async fn verify_collect(&self, info: &FragmentInfo) -> (VerifyReport, Vec<Fault>) {
        let mut part = VerifyReport::default();
        let mut faults = Vec::new();
        let mut keep = |f| {
            faults.push(f);
            ControlFlow::Continue(())
        };
        let _ = self.verify_fragment_async(info, &mut part, &mut keep).await;
        (part, faults)
    }

    /// Verifies one fragment: each of its data files in full, then its deletion vector. Adds
    /// what was checked to `report` and hands each fault to `on_fault`; returns
    /// [`ControlFlow::Break`] as soon as `on_fault` does. A blocking facade over
    /// [`Dataset::verify_fragment_async`].
    pub fn verify_fragment(
        &self,
        info: &FragmentInfo,
        report: &mut VerifyReport,
        on_fault: &mut impl FnMut(Fault) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let mut faults = Vec::new();
        let mut part = VerifyReport::default();
        let run = async {
            let flow = self
                .verify_fragment_async(info, &mut part, &mut |f| {
                    faults.push(f);
                    ControlFlow::Continue(())
                })
                .await;
            Ok(flow)
        };
        if let Err(error) = block_on(run) {
            return on_fault(Fault {
                object: self.store().url().to_string(),
                fragment: info.fragment.id,
                column: None,
                error,
            });
        }
        report.add(&part);
        for f in faults {
            on_fault(f)?;
        }
        ControlFlow::Continue(())
    }

    /// [`Dataset::verify_fragment`] for async callers: the fragment's files are read one
    /// after another, each checked as soon as it has arrived.
    pub async fn verify_fragment_async(
        &self,
        info: &FragmentInfo,
        report: &mut VerifyReport,
        on_fault: &mut impl FnMut(Fault) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let id = info.fragment.id;
        // Read first: the kind rules of KND-11 apply to live rows only. A faulty deletion
        // vector is reported after the files, and its rows then count as live.
        let deleted = self.deleted_rows_async(info).await;
        let live_of_all: &[u64] = deleted.as_deref().map_or(&[], |d| d.as_slice());
        for file in &info.fragment.files {
            let bytes = self.store().get_bounded_async(&file.path, file.size).await;
            self.verify_file(info, file, bytes, live_of_all, report, &mut |column, error| {
                on_fault(Fault { object: file.path.clone(), fragment: id, column, error })
            })?;
        }
        match deleted {
            Err(error) => {
                let object = info.fragment.deletion.as_ref().map_or_else(String::new, |d| d.path.clone());
                on_fault(Fault { object, fragment: id, column: None, error })?;
            }
            Ok(_) => report.rows += info.fragment.live_rows(),
        }
        ControlFlow::Continue(())
    }

    /// Checks one data file completely, given its bytes as read (bounded by the declared
    /// size) and the fragment's deleted rows: a fault of the file as a whole ends its check;
    /// a fault in one column's pages is reported and the other columns are still checked.
    #[allow(clippy::too_many_arguments)]
    fn verify_file(
        &self,
        info: &FragmentInfo,
        file: &DataFileRef,
        read: Result<Bytes, Error>,
        deleted: &[u64],
        report: &mut VerifyReport,
        fault: &mut dyn FnMut(Option<String>, Error) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let path = file.path.as_str();
        // Bounded by the declared size: a larger object is refused before it is read.
        let bytes = match read {
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
                    // Kind value rules on live rows [KND-11].
                    if let Err(e) = crate::kinds::check_live_kind_values(c, &data, deleted) {
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
    fn async_verification_runs_as_a_task_and_reports_faults_in_fragment_order() {
        let dir = tempfile::tempdir().unwrap();
        let ds = std::sync::Arc::new(dataset(dir.path(), 6));
        let clean = ds.verify().unwrap();
        // Damage fragments 4 and 1: faults still come in fragment order, whatever finishes first.
        for i in [4, 1] {
            let p = dir.path().join(&ds.fragments()[i].fragment.files[0].path);
            let len = std::fs::metadata(&p).unwrap().len();
            std::fs::OpenOptions::new().write(true).open(&p).unwrap().set_len(len - 1).unwrap();
        }
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let task = ds.clone();
        // Spawning needs a `Send` future: the async API must give one.
        let (report, faults) = rt
            .block_on(rt.spawn(async move {
                let mut faults = Vec::new();
                let report = task
                    .verify_each_async(4, &mut |f| {
                        faults.push(f.fragment);
                        ControlFlow::Continue(())
                    })
                    .await;
                (report, faults)
            }))
            .unwrap();
        let ids: Vec<u64> = [1, 4].iter().map(|&i| ds.fragments()[i].fragment.id).collect();
        assert_eq!(faults, ids);
        assert_eq!(report.files, clean.files - 2);
        // The blocking facade inside a runtime reports that instead of stalling it.
        let inside = rt.block_on(async { ds.verify() }).unwrap_err();
        assert_eq!(inside.class(), ErrorClass::Usage, "{inside}");
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
