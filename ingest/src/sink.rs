//! The writer side of an ingest: holds samples back until the schema is known (planned, or
//! inferred from the first samples), assembles rows into batches, hands them to the
//! reference's [`DatasetWriter`], and commits once at the end. A dataset is created only when
//! the first batch is ready; one this ingest created is removed again when it fails, so a
//! failed ingest leaves nothing behind but unreferenced data files of an append.

use std::path::Path;
use std::time::Instant;

use tessera::{Column, Compression, Dataset, DatasetWriter, Schema, ShapeDisplay, Store, WriteOptions};

use crate::assemble::{Assembler, Reject, SchemaMismatch};
use crate::detect::remove_empty_dirs;
use crate::error::{IngestError, IngestResult};
use crate::input::columns::{self, ColumnEdits};
use crate::input::{self, Bad, Decoded, InferOptions, Sample, Value};
use crate::plan::{check_columns, finish_columns, infer_columns, rename_planned};
use crate::progress::Observer;
use crate::report::{IngestReport, Skipped};

/// The writer side: schema, dataset, column buffers, counters.
pub(crate) struct Sink<'a> {
    store: Store,
    location: String,
    base: Option<Dataset>,
    options: WriteOptions,
    plan: ColumnPlan,
    /// Samples held back until the schema is inferred from them (sources without planned
    /// columns), and their decoded bytes.
    pending: Vec<Sample>,
    pending_bytes: u64,
    /// The dataset is a local folder this ingest made (removed again on failure).
    fresh_dir: bool,
    target: Option<Target>,
    skip_bad: bool,
    skipped: Vec<Bad>,
    rows: u64,
    images: u64,
    raw_bytes: u64,
    input_bytes: u64,
    appended_bytes: u64,
    observer: &'a mut dyn Observer,
    started: Instant,
}

/// Where an ingest writes: the location, its store, the dataset to append to (none for a new
/// one), and whether the ingest made the (local) folder.
pub(crate) struct Place {
    pub(crate) location: String,
    pub(crate) store: Store,
    pub(crate) base: Option<Dataset>,
    pub(crate) fresh_dir: bool,
}

/// How planned or inferred columns become the schema's: the sidecar, renames and kinds,
/// compression, and which dims inference keeps ragged.
pub(crate) struct ColumnPlan {
    pub(crate) sidecar: Option<Vec<Column>>,
    pub(crate) compress: Vec<(String, Compression)>,
    /// Image columns that `compress` does not name are stored `encoded`.
    pub(crate) keep_encoded: bool,
    pub(crate) edits: ColumnEdits,
    pub(crate) infer: InferOptions,
}

/// The dataset being appended to, once the schema is known. A new dataset is created only
/// when the first batch is ready, so an ingest that fails early leaves nothing behind.
pub(crate) struct Target {
    schema: Schema,
    base: Option<Dataset>,
    created: bool,
    writer: Option<DatasetWriter>,
    asm: Assembler,
    /// Samples the schema was inferred from (0 when planned or appending).
    inferred_from: usize,
    /// The dataset existed before this ingest.
    appending: bool,
}

/// Rows buffered before a batch goes to the writer.
const BATCH_ROWS: usize = 1024;
/// Raw bytes buffered before a batch goes to the writer.
const BATCH_BYTES: u64 = 8 << 20;
/// Samples looked at to infer a schema (which dims vary, which fields are optional).
const INFER_SAMPLES: usize = 256;
/// Decoded bytes held for inference at most (fewer samples when they are large).
const INFER_BYTES: u64 = 64 << 20;

/// Decoded bytes of a value (what inference holds in memory).
fn value_bytes(v: &Value) -> u64 {
    (match v {
        Value::Image(i) => i.pixels.len(),
        Value::Audio(a) => a.bytes.len(),
        Value::Video(v) => v.pixels.len(),
        Value::Tensor { bytes, .. } | Value::Bytes(bytes) => bytes.len(),
        Value::Text(t) | Value::Json(t) => t.len(),
        Value::Class { .. } | Value::Int(_) | Value::Float(_) | Value::Bool(_) | Value::Null => 8,
    }) as u64
}

impl<'a> Sink<'a> {
    /// A sink for `location` (opened as `store`), appending to `base` when it exists.
    /// A sink for `location` (opened as `store`), appending to `base` when it exists.
    pub(crate) fn new(
        place: Place,
        plan: ColumnPlan,
        options: WriteOptions,
        skip_bad: bool,
        observer: &'a mut dyn Observer,
    ) -> Self {
        Self {
            store: place.store,
            location: place.location,
            base: place.base,
            options,
            plan,
            pending: Vec::new(),
            pending_bytes: 0,
            fresh_dir: place.fresh_dir,
            target: None,
            skip_bad,
            skipped: Vec::new(),
            rows: 0,
            images: 0,
            raw_bytes: 0,
            input_bytes: 0,
            appended_bytes: 0,
            observer,
            started: Instant::now(),
        }
    }

    /// Tells the observer that decoding is over.
    pub(crate) fn decoded(&mut self) {
        self.observer.decoded();
    }

    pub(crate) fn consume(&mut self, out: Vec<Decoded>) -> IngestResult<()> {
        let units = out.len() as u64;
        let rows_before = self.rows;
        let mut bytes = 0;
        for d in out {
            match d {
                Ok(mut sample) => {
                    bytes += sample.input_bytes;
                    for (name, _) in &mut sample.fields {
                        let new = self.plan.edits.name(name);
                        if new != name {
                            *name = new.to_string();
                        }
                    }
                    if self.target.is_none() {
                        self.pending_bytes += sample.fields.iter().map(|(_, v)| value_bytes(v)).sum::<u64>();
                        self.pending.push(sample);
                        if self.pending.len() >= INFER_SAMPLES || self.pending_bytes >= INFER_BYTES {
                            self.start_pending()?;
                        }
                    } else {
                        self.push(sample)?;
                    }
                }
                Err(b) => self.bad(b)?,
            }
        }
        self.observer.advance(units, self.rows - rows_before, bytes);
        Ok(())
    }

    /// Adds one sample to the column buffers (a bad one is skipped or ends the ingest).
    fn push(&mut self, sample: Sample) -> IngestResult<()> {
        let Some(t) = self.target.as_mut() else { return Err(IngestError::other("no schema yet")) };
        let (origin, in_bytes) = (sample.origin.clone(), sample.input_bytes);
        match t.asm.push(sample) {
            Ok(images) => {
                self.rows += 1;
                self.images += images;
                self.input_bytes += in_bytes;
            }
            Err(Reject::Bad(reason)) => self.bad(Bad::new(origin, reason))?,
            Err(Reject::Schema(e)) => return Err(self.schema_question(&origin, &e)),
        }
        if self.target.as_ref().is_some_and(|t| t.asm.rows >= BATCH_ROWS || t.asm.bytes >= BATCH_BYTES) {
            self.flush()?;
        }
        Ok(())
    }

    /// A sample that does not fit the schema: exit 2, with the flag that makes it fit where
    /// there is one. Never skipped: `--skip-bad` would drop every such row.
    fn schema_question(&self, origin: &str, e: &SchemaMismatch) -> IngestError {
        let Some(t) = self.target.as_ref() else { return IngestError::other("no schema yet") };
        let Some(col) = e.column.and_then(|i| t.schema.columns.get(i)) else {
            return IngestError::usage(format!("{origin}: {}", e.reason));
        };
        let mut err = IngestError::usage(format!("{origin}: column {:?}: {}", col.name, e.reason));
        match (&e.shape, columns::ragged_hint(col, e.shape.as_deref().unwrap_or_default())) {
            (Some(_), Some(hint)) if t.appending => {
                err = err.note(format!(
                    "the dataset stores {:?} as {}; an append cannot change it (a new dataset takes {hint})",
                    col.name,
                    ShapeDisplay(&col.shape)
                ));
            }
            (Some(_), Some(hint)) => {
                if t.inferred_from > 0 {
                    err = err.note(format!(
                        "the shape was inferred from the first {} samples, which all had {}",
                        t.inferred_from,
                        ShapeDisplay(&col.shape)
                    ));
                }
                err = err.note(format!("rerun with {hint} to store the dims that vary as ragged"));
            }
            _ if e.missing && t.inferred_from > 0 => {
                err = err.note(format!(
                    "all of the first {} samples had this field, so the column is not nullable; a {} beside the inputs can declare it nullable",
                    t.inferred_from,
                    input::SIDECAR
                ));
            }
            _ => {}
        }
        err
    }

    /// A bad input: skipped and listed with `--skip-bad`, else the end of the ingest.
    fn bad(&mut self, b: Bad) -> IngestResult<()> {
        if self.skip_bad {
            self.observer.message(&format!("skipping {}: {}", b.origin, b.reason));
            self.skipped.push(b);
            Ok(())
        } else {
            Err(IngestError::data(format!("bad input {}: {}", b.origin, b.reason))
                .note("--skip-bad skips inputs that cannot be decoded and lists each in the summary"))
        }
    }

    /// Starts with the columns a source planned (named after its input fields).
    pub(crate) fn start_planned(&mut self, cols: Vec<Column>) -> IngestResult<()> {
        let cols = rename_planned(cols, &self.plan.edits).and_then(|p| self.finish_columns(p));
        cols.and_then(|c| self.start(c)).map_err(|e| self.abort_notes(e))
    }

    /// Applies the sidecar, `--kind` and `--compress` to the (renamed) columns.
    fn finish_columns(&self, cols: Vec<Column>) -> IngestResult<Vec<Column>> {
        finish_columns(
            cols,
            self.plan.sidecar.as_deref(),
            &self.plan.compress,
            self.plan.keep_encoded,
            &self.plan.edits,
        )
    }

    /// Infers the schema from the held samples, starts, and adds them.
    fn start_pending(&mut self) -> IngestResult<()> {
        let pending = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        let cols = infer_columns(&pending, &self.plan.infer, &self.plan.edits).and_then(|c| self.finish_columns(c))?;
        self.start(cols)?;
        if let Some(t) = self.target.as_mut()
            && !t.appending
        {
            t.inferred_from = pending.len();
        }
        for s in pending {
            self.push(s)?;
        }
        Ok(())
    }

    /// Fixes the schema, opens the dataset to append to (or plans a new one), and starts the
    /// writer.
    fn start(&mut self, cols: Vec<Column>) -> IngestResult<()> {
        let (schema, base) = if let Some(b) = self.base.take() {
            check_columns(b.schema(), &cols)?;
            (b.schema().clone(), Some(b))
        } else {
            let schema = Schema::new(cols).map_err(|e| IngestError::usage(format!("cannot build a schema: {e}")))?;
            (schema, None)
        };
        let asm = Assembler::new(&schema);
        let writer = base.as_ref().map(|b| b.writer(self.options.clone()));
        let appending = base.is_some();
        self.target = Some(Target { schema, base, created: false, writer, asm, inferred_from: 0, appending });
        Ok(())
    }

    /// The writer, creating the dataset first if it is new.
    fn writer(&mut self) -> IngestResult<&mut DatasetWriter> {
        let Some(t) = self.target.as_mut() else { return Err(IngestError::other("no schema yet")) };
        if t.base.is_none() {
            t.base = Some(Dataset::create_in(&self.store, t.schema.clone(), &self.options)?);
            t.created = true;
        }
        let base = t.base.as_ref().ok_or_else(|| IngestError::other("no dataset"))?;
        Ok(t.writer.get_or_insert_with(|| base.writer(self.options.clone())))
    }

    fn flush(&mut self) -> IngestResult<()> {
        let Some(t) = self.target.as_mut() else { return Ok(()) };
        if t.asm.rows == 0 {
            return Ok(());
        }
        let (batch, raw) = t.asm.take_batch()?;
        self.writer()?.append(&batch)?;
        self.raw_bytes += raw;
        self.appended_bytes += raw;
        Ok(())
    }

    /// Removes what a failed ingest made (the dataset it created, the folder it made) and
    /// adds what is left behind to its error.
    pub(crate) fn abort_notes(&mut self, e: IngestError) -> IngestError {
        // The writer waits for its uploads as it is dropped: nothing lands after the clean-up.
        if let Some(t) = self.target.as_mut() {
            t.writer = None;
        }
        let mut e = e.note("no version was committed");
        if self.target.as_ref().is_some_and(|t| t.created) {
            match self.discard_created() {
                Ok(()) => e = e.note(format!("the dataset this ingest created at {} was removed", self.location)),
                Err(why) => {
                    e = e.note(format!(
                        "the dataset at {} was created (empty version 1) before the failure and could not be removed: {why}",
                        self.location
                    ));
                }
            }
        } else if self.appended_bytes >= self.options.target_file_bytes {
            e = e.note("data files already written for this ingest are unreferenced garbage until collected");
        }
        if self.fresh_dir {
            remove_empty_dirs(Path::new(&self.location));
        }
        e
    }

    /// Deletes every object of the dataset this ingest created, if nobody committed to it
    /// since (its main branch is still at our empty version 1).
    fn discard_created(&self) -> IngestResult<()> {
        if tessera::dataset::latest_version(&self.store, "main")? != 1 {
            return Err(IngestError::other("another writer committed to it meanwhile"));
        }
        for (key, _) in self.store.list_recursive("")? {
            self.store.delete(&key)?;
        }
        Ok(())
    }

    /// Flushes, commits the new version and reports what was ingested.
    pub(crate) fn finish(
        mut self,
        message: &str,
        format: &'static str,
        ignored: (usize, &'static str),
    ) -> IngestResult<IngestReport> {
        let started = if self.target.is_none() && !self.pending.is_empty() { self.start_pending() } else { Ok(()) };
        if let Err(e) = started.and_then(|()| self.flush()) {
            return Err(self.abort_notes(e));
        }
        let target = if self.rows == 0 { None } else { self.target.take() };
        let Some(t) = target else {
            if self.skipped.is_empty() {
                return Err(IngestError::not_found("no samples in the inputs; nothing committed"));
            }
            return Err(IngestError::data(format!("all {} inputs were bad; nothing committed", self.skipped.len())));
        };
        let (Some(base), Some(writer)) = (t.base, t.writer) else { return Err(IngestError::other("no writer")) };
        let first_new = base.manifest().next_fragment_id;
        let new = writer.commit(message).map_err(|e| self.abort_notes(e.into()))?;
        let bytes_stored: u64 = new
            .fragments()
            .iter()
            .filter(|f| f.fragment.id >= first_new)
            .flat_map(|f| f.fragment.files.iter())
            .map(|f| f.size)
            .sum();
        Ok(IngestReport {
            location: self.location,
            branch: new.branch().to_string(),
            version: new.version(),
            created: t.created,
            format,
            rows: self.rows,
            images: self.images,
            bytes_raw: self.raw_bytes,
            bytes_stored,
            bytes_input: self.input_bytes,
            seconds: self.started.elapsed().as_secs_f64().max(1e-9),
            skipped: self.skipped.into_iter().map(|b| Skipped { input: b.origin, error: b.reason }).collect(),
            ignored_files: ignored.0,
            ignored_noun: ignored.1,
        })
    }
}
