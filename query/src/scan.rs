//! [`DatasetScan`]: the execution plan that reads fragments through the reference reader.
//!
//! Each partition owns a contiguous run of fragments and one reader task on the engine's
//! runtime, which awaits the reference's async reads (`Dataset::read_rows_async`). Per
//! fragment the task
//! 1. reads the filter's columns for the fragment's live rows and evaluates the filter;
//!    a fragment without a matching row ends there;
//! 2. reads the other projected columns: of every live row when many match, else of short
//!    runs around the matching rows, so that a filter on `label` does not read `image`;
//! 3. sends the matching rows as record batches of the session's batch size through a
//!    channel of two batches (bounded memory; reading overlaps the engine's work).
//!
//! Reads go through `Dataset::read_rows`: deletion vectors are honoured and every block's
//! CRC-32 is verified. Rows come out in `_rowid` order within a partition.
//!
//! With a [`VectorTopK`] (set by the `topk` rule) a partition instead evaluates the filter,
//! runs the page scan of `vector_scan` over the vector column of the matching rows of all its
//! fragments, and sends only its k best rows, their other columns read for those rows alone.
//! That path (and the vector index search it may ask first) still reads through the
//! reference's blocking API, so it runs on a thread of its own and blocks on the store
//! runtime for the reads it shares with the plain scan.

use std::collections::BTreeSet;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch, RecordBatchOptions, UInt32Array};
use datafusion::arrow::compute::{concat, take};
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::Result as DfResult;
use datafusion::error::DataFusionError;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PhysicalExpr, PlanProperties,
};
use tessera::{Dataset, FragmentInfo};
use tokio::sync::mpsc;

use crate::ann::{Answer, IndexCatalog};
use crate::convert::{Layout, Source, class_names, column_array, row_ids};
use crate::error::{QueryError, QueryResult};
use crate::table::ScanCounters;
use crate::topk::VectorTopK;
use crate::vector_scan::{Candidate, Candidates, Kernel, PageBuffer, file_of, scan_fragment};

/// Batches a partition's reader may run ahead of the engine.
const CHANNEL_BATCHES: usize = 2;
/// Bytes of the other columns a run may read for rows that did not match, to join two runs
/// (reading a few extra rows is cheaper than a second request for the same block).
const GAP_BYTES: u64 = 64 * 1024;

/// Everything a partition's reader needs.
#[derive(Clone)]
pub(crate) struct ScanPlan {
    pub(crate) ds: Dataset,
    pub(crate) layout: Layout,
    /// Table field indices to output, in order.
    pub(crate) projection: Vec<usize>,
    /// The pushed-down filter: the table fields it reads (ascending) and the expression over
    /// a schema of just those fields.
    pub(crate) filter: Option<(Vec<usize>, Arc<dyn PhysicalExpr>)>,
    /// Rows to return at most (only without filters).
    pub(crate) limit: Option<usize>,
    pub(crate) batch_size: usize,
    pub(crate) counters: Arc<ScanCounters>,
    /// Whether the `topk` rule may hand this scan a vector top-k.
    pub(crate) fast_top_k: bool,
    /// The vector top-k to compute instead of sending every row.
    pub(crate) top_k: Option<Arc<VectorTopK>>,
    /// The version's vector indexes, for such a top-k.
    pub(crate) indexes: Arc<IndexCatalog>,
}

/// The scan of one version's fragments, in contiguous partitions.
#[derive(Clone)]
pub(crate) struct DatasetScan {
    plan: ScanPlan,
    schema: SchemaRef,
    partitions: Vec<Vec<FragmentInfo>>,
    properties: Arc<PlanProperties>,
}

impl fmt::Debug for DatasetScan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatasetScan").field("schema", &self.schema).finish_non_exhaustive()
    }
}

impl DatasetScan {
    /// Splits `fragments` into at most `partitions` contiguous runs of similar row counts.
    pub(crate) fn new(plan: ScanPlan, fragments: &[FragmentInfo], partitions: usize) -> DfResult<Self> {
        let schema = Arc::new(plan.layout.schema.project(&plan.projection)?);
        let rows: u64 = fragments.iter().map(|f| f.fragment.live_rows()).sum();
        let n = partitions.clamp(1, fragments.len().max(1));
        let per = rows.div_ceil(n as u64).max(1);
        let mut parts: Vec<Vec<FragmentInfo>> = vec![Vec::new()];
        let mut acc = 0u64;
        for f in fragments {
            if acc >= per && parts.len() < n {
                parts.push(Vec::new());
                acc = 0;
            }
            acc += f.fragment.live_rows();
            if let Some(last) = parts.last_mut() {
                last.push(f.clone());
            }
        }
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(parts.len()),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        Ok(Self { plan, schema, partitions: parts, properties })
    }

    /// What the scan reads.
    pub(crate) fn plan(&self) -> &ScanPlan {
        &self.plan
    }

    /// The same scan, sending only the rows of the vector top-k `top_k` (per partition).
    pub(crate) fn with_top_k(&self, top_k: VectorTopK) -> Self {
        let mut scan = self.clone();
        scan.plan.top_k = Some(Arc::new(top_k));
        scan
    }
}

impl DisplayAs for DatasetScan {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.schema.fields().iter().map(|f| f.name().as_str()).collect();
        let fragments: usize = self.partitions.iter().map(Vec::len).sum();
        write!(f, "TesseraScan: fragments={fragments}, projection=[{}]", names.join(", "))?;
        if self.plan.filter.is_some() {
            write!(f, ", filtered")?;
        }
        if let Some(t) = &self.plan.top_k {
            let column = self.plan.layout.schema.field(t.field).name();
            write!(f, ", vector_top_k={} by {}({column})", t.k, t.metric.function_name())?;
        }
        Ok(())
    }
}

impl ExecutionPlan for DatasetScan {
    fn name(&self) -> &'static str {
        "TesseraScan"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn with_new_children(self: Arc<Self>, _children: Vec<Arc<dyn ExecutionPlan>>) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(&self, partition: usize, _context: Arc<TaskContext>) -> DfResult<SendableRecordBatchStream> {
        let fragments = self
            .partitions
            .get(partition)
            .cloned()
            .ok_or_else(|| DataFusionError::Internal(format!("no scan partition {partition}")))?;
        let (tx, rx) = mpsc::channel::<DfResult<RecordBatch>>(CHANNEL_BATCHES);
        let reader = Reader { plan: self.plan.clone(), schema: self.schema.clone() };
        let runtime = tokio::runtime::Handle::try_current().map_err(|e| DataFusionError::External(Box::new(e)))?;
        if self.plan.top_k.is_some() {
            runtime.spawn(async move { reader.run_top_k(&fragments, &tx).await });
        } else {
            runtime.spawn(async move { reader.run(&fragments, &tx).await });
        }
        let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (b, rx)) });
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema.clone(), stream)))
    }
}

/// A partition's reader: a task on the running runtime (the caller's for `sql_async`, else the
/// engine's).
struct Reader {
    plan: ScanPlan,
    schema: SchemaRef,
}

/// Sent on a closed channel: the engine needs no more rows (a satisfied `LIMIT`).
struct Closed;

impl Reader {
    /// Sends the matching rows of `fragments`, in order, until the `LIMIT` is met or the
    /// engine needs no more.
    async fn run(&self, fragments: &[FragmentInfo], tx: &mpsc::Sender<DfResult<RecordBatch>>) {
        let mut left = self.plan.limit.unwrap_or(usize::MAX);
        for info in fragments {
            if left == 0 {
                return;
            }
            let sent = match self.fragment(info).await {
                Ok(Some(batch)) => self.send(&batch, &mut left, tx).await,
                Ok(None) => Ok(()),
                Err(e) => {
                    let _ = tx.send(Err(to_datafusion(e))).await;
                    return;
                }
            };
            if sent.is_err() {
                return;
            }
        }
    }

    /// The vector top-k partition. The distance kernel runs in the task: the scan is the
    /// query's work, and the runtime's threads are the query's threads.
    async fn run_top_k(&self, fragments: &[FragmentInfo], tx: &mpsc::Sender<DfResult<RecordBatch>>) {
        let Some(top) = &self.plan.top_k else { return };
        if let Err(e) = self.top_k(top, fragments, tx).await {
            let _ = tx.send(Err(to_datafusion(e))).await;
        }
    }

    /// The vector top-k over `fragments`: the k best rows (by distance, then `_rowid`) among
    /// those that pass the filter, sent with their projected columns. A fragment whose filter
    /// cannot be evaluated here, or without the vector column, is sent whole.
    async fn top_k(
        &self,
        top: &VectorTopK,
        fragments: &[FragmentInfo],
        tx: &mpsc::Sender<DfResult<RecordBatch>>,
    ) -> QueryResult<()> {
        let Source::Column(name) = &self.plan.layout.sources[top.field] else {
            return Err(QueryError::Usage("vector top-k over a non-column".into()));
        };
        let ds = &self.plan.ds;
        let column = ds.schema().column(name).ok_or_else(|| QueryError::Usage(format!("no column {name:?}")))?;
        let mut kernel = Kernel::new(top, column)?;
        let mut best = Candidates::new(top.k, top.order);
        let mut buf = PageBuffer::new();
        let mut whole: Vec<&FragmentInfo> = Vec::new();
        let answer = crate::ann::hits(top, ds, name, &self.plan.indexes, &self.plan.counters).await?;
        let indexed = match &answer {
            Answer::Failed => return Ok(()),
            Answer::Exact => false,
            Answer::Hits(hits) => {
                // This partition's share of the index's answer: the hits in its fragments.
                for h in hits.iter() {
                    if fragments.iter().any(|f| f.rows().contains(&h.row)) {
                        best.offer(Some(h.distance), h.row, Some(&h.vector));
                    }
                }
                true
            }
        };
        for info in fragments.iter().filter(|_| !indexed) {
            let live = info.rows();
            if live.is_empty() {
                continue;
            }
            if file_of(info, column).is_none() {
                whole.push(info);
                continue;
            }
            let selected = match &top.filter {
                None => None,
                Some((fields, expr)) => {
                    let pre = self.fetch(live.clone(), fields).await?;
                    match matching(fields, &pre, expr, &self.plan.layout.schema) {
                        Some(rows) if rows.is_empty() => {
                            self.plan.counters.no_match.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        Some(rows) => Some(rows),
                        None => {
                            whole.push(info);
                            continue;
                        }
                    }
                }
            };
            let physical = ds.physical_rows_async(info, 0..live.end - live.start).await?;
            let wanted: Vec<(u64, u64)> = match &selected {
                None => physical.iter().enumerate().map(|(i, &p)| (p, live.start + i as u64)).collect(),
                Some(rows) => rows
                    .iter()
                    .filter_map(|&r| physical.get(r as usize).map(|&p| (p, live.start + u64::from(r))))
                    .collect(),
            };
            let read =
                scan_fragment(ds, info, column, &wanted, selected.is_none(), &mut kernel, &mut best, &mut buf).await?;
            self.plan.counters.vector_pages.fetch_add(read.pages, Ordering::Relaxed);
            self.plan.counters.vector_bytes.fetch_add(read.bytes, Ordering::Relaxed);
        }
        let mut left = usize::MAX;
        let winners = best.into_rows();
        let mut at = 0;
        for info in fragments {
            let live = info.rows();
            let n = winners[at..].iter().take_while(|c| c.row < live.end).count();
            let mine = &winners[at..at + n];
            at += n;
            if !mine.is_empty() {
                let batch = self.winners(info, column, top.field, mine).await?;
                if self.send(&batch, &mut left, tx).await.is_err() {
                    return Ok(());
                }
            }
        }
        for info in whole {
            if let Some(batch) = self.fragment(info).await?
                && self.send(&batch, &mut left, tx).await.is_err()
            {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The projected columns of fragment `info`'s rows `rows` (in `_rowid` order): the vector
    /// field from the bytes the heap kept, the others read for these rows only.
    async fn winners(
        &self,
        info: &FragmentInfo,
        column: &tessera::Column,
        field: usize,
        rows: &[Candidate],
    ) -> QueryResult<RecordBatch> {
        let live = info.rows();
        let selected: Vec<u32> = rows.iter().map(|c| (c.row - live.start) as u32).collect();
        let rest: Vec<usize> =
            self.plan.projection.iter().copied().filter(|&f| f != field).collect::<BTreeSet<_>>().into_iter().collect();
        let rest_arrays = self.fetch_selected(&live, &selected, &rest).await?;
        let mut out = Vec::with_capacity(self.plan.projection.len());
        for &f in &self.plan.projection {
            if f == field {
                // The rule only takes columns of fixed shape.
                let shape: Vec<u64> =
                    column.shape.iter().map(|d| if let tessera::Dim::Fixed(n) = d { *n } else { 0 }).collect();
                let mut data = tessera::ColumnData::for_column(column);
                for c in rows {
                    match &c.bytes {
                        Some(b) => data.push_row(&shape, b)?,
                        None => data.push_null()?,
                    }
                }
                out.push(column_array(column, &data, self.plan.layout.schema.field(f))?);
            } else {
                let i = rest.iter().position(|x| *x == f).ok_or_else(|| QueryError::Usage("scan field".into()))?;
                out.push(rest_arrays[i].clone());
            }
        }
        self.batch(out, rows.len())
    }

    /// Sends `batch` in slices of the batch size, at most `left` rows.
    async fn send(
        &self,
        batch: &RecordBatch,
        left: &mut usize,
        tx: &mpsc::Sender<DfResult<RecordBatch>>,
    ) -> Result<(), Closed> {
        let rows = batch.num_rows().min(*left);
        let mut at = 0;
        while at < rows {
            let n = self.plan.batch_size.max(1).min(rows - at);
            tx.send(Ok(batch.slice(at, n))).await.map_err(|_| Closed)?;
            self.plan.counters.rows_out.fetch_add(n as u64, Ordering::Relaxed);
            at += n;
        }
        *left -= rows;
        Ok(())
    }

    /// The fragment's rows that may match, or `None` when none does.
    async fn fragment(&self, info: &FragmentInfo) -> QueryResult<Option<RecordBatch>> {
        let live = info.rows();
        if live.is_empty() {
            return Ok(None);
        }
        let Some((filter_fields, expr)) = &self.plan.filter else {
            let arrays = self.fetch(live.clone(), &self.plan.projection).await?;
            return self.batch(arrays, (live.end - live.start) as usize).map(Some);
        };
        let pre = self.fetch(live.clone(), filter_fields).await?;
        let selected = match matching(filter_fields, &pre, expr, &self.plan.layout.schema) {
            Some(rows) if rows.is_empty() => {
                self.plan.counters.no_match.fetch_add(1, Ordering::Relaxed);
                return Ok(None);
            }
            Some(rows) => rows,
            // The filter could not be evaluated here (DataFusion will): keep every row.
            None => (0..(live.end - live.start) as u32).collect(),
        };
        let indices = UInt32Array::from(selected.clone());
        let rest: Vec<usize> = self
            .plan
            .projection
            .iter()
            .copied()
            .filter(|f| !filter_fields.contains(f))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let rest_arrays = self.fetch_selected(&live, &selected, &rest).await?;
        let mut out = Vec::with_capacity(self.plan.projection.len());
        for f in &self.plan.projection {
            let array = if let Some(i) = filter_fields.iter().position(|x| x == f) {
                take(&pre[i], &indices, None).map_err(engine)?
            } else {
                let i = rest.iter().position(|x| x == f).ok_or_else(|| QueryError::Usage("scan field".into()))?;
                rest_arrays[i].clone()
            };
            out.push(array);
        }
        self.batch(out, selected.len()).map(Some)
    }

    /// Arrays of `fields` for the `selected` rows (offsets within `live`): one read of every
    /// live row when the selection is dense, else one read per run of nearby rows.
    async fn fetch_selected(
        &self,
        live: &Range<u64>,
        selected: &[u32],
        fields: &[usize],
    ) -> QueryResult<Vec<ArrayRef>> {
        if fields.is_empty() {
            return Ok(Vec::new());
        }
        let gap = (GAP_BYTES / self.row_bytes(fields).max(1)).max(1);
        let mut runs: Vec<Range<u64>> = Vec::new();
        for &s in selected {
            let s = u64::from(s);
            match runs.last_mut() {
                Some(r) if s - r.end <= gap => r.end = s + 1,
                _ => runs.push(s..s + 1),
            }
        }
        let mut parts: Vec<Vec<ArrayRef>> = Vec::with_capacity(runs.len());
        let mut index = Vec::with_capacity(selected.len());
        let mut base = 0u64;
        let mut sel = selected.iter().peekable();
        for r in &runs {
            parts.push(self.fetch(live.start + r.start..live.start + r.end, fields).await?);
            while let Some(&&s) = sel.peek() {
                if u64::from(s) >= r.end {
                    break;
                }
                index.push((base + u64::from(s) - r.start) as u32);
                sel.next();
            }
            base += r.end - r.start;
        }
        let indices = UInt32Array::from(index);
        (0..fields.len())
            .map(|i| {
                let pieces: Vec<&dyn Array> = parts.iter().map(|p| p[i].as_ref()).collect();
                let whole = concat(&pieces).map_err(engine)?;
                take(&whole, &indices, None).map_err(engine)
            })
            .collect()
    }

    /// Estimated stored bytes per row of `fields` (ragged columns count as large).
    fn row_bytes(&self, fields: &[usize]) -> u64 {
        fields
            .iter()
            .filter_map(|&f| match &self.plan.layout.sources[f] {
                Source::Column(name) => self.plan.ds.schema().column(name),
                _ => None,
            })
            .map(|c| c.fixed_row_bytes().unwrap_or(GAP_BYTES))
            .sum()
    }

    /// Reads the table fields `fields` for the version's rows `rows` (one reference read).
    async fn fetch(&self, rows: Range<u64>, fields: &[usize]) -> QueryResult<Vec<ArrayRef>> {
        let sources = &self.plan.layout.sources;
        let mut names: Vec<&str> = fields
            .iter()
            .filter_map(|&f| match &sources[f] {
                Source::Column(n) | Source::ClassNames(n) => Some(n.as_str()),
                Source::RowId => None,
            })
            .collect();
        names.sort_unstable();
        names.dedup();
        let batch =
            if names.is_empty() { None } else { Some(self.plan.ds.read_rows_async(rows.clone(), Some(&names)).await?) };
        let schema = self.plan.ds.schema();
        fields
            .iter()
            .map(|&f| {
                let data = |n: &str| {
                    let c = schema.column(n).ok_or_else(|| QueryError::Usage(format!("no column {n:?}")))?;
                    let d = batch
                        .as_ref()
                        .and_then(|b| b.get(n))
                        .ok_or_else(|| QueryError::Usage(format!("{n:?} not read")))?;
                    Ok::<_, QueryError>((c, d))
                };
                match &sources[f] {
                    Source::Column(n) => {
                        let (c, d) = data(n)?;
                        column_array(c, d, self.plan.layout.schema.field(f))
                    }
                    Source::ClassNames(n) => {
                        let (c, d) = data(n)?;
                        class_names(c, d)
                    }
                    Source::RowId => Ok(row_ids(rows.clone())),
                }
            })
            .collect()
    }

    fn batch(&self, arrays: Vec<ArrayRef>, rows: usize) -> QueryResult<RecordBatch> {
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        RecordBatch::try_new_with_options(self.schema.clone(), arrays, &options).map_err(engine)
    }
}

/// Offsets of the rows where `expr` is true, or `None` when it cannot be evaluated here.
fn matching(fields: &[usize], arrays: &[ArrayRef], expr: &Arc<dyn PhysicalExpr>, table: &Schema) -> Option<Vec<u32>> {
    let schema = Arc::new(table.project(fields).ok()?);
    let rows = arrays.first().map_or(0, Array::len);
    let batch = RecordBatch::try_new_with_options(
        schema,
        arrays.to_vec(),
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
    .ok()?;
    let mask = expr.evaluate(&batch).ok()?.into_array(rows).ok()?;
    let mask = mask.as_any().downcast_ref::<BooleanArray>()?;
    Some((0..mask.len()).filter(|&i| mask.is_valid(i) && mask.value(i)).map(|i| i as u32).collect())
}

fn engine(e: datafusion::arrow::error::ArrowError) -> QueryError {
    QueryError::Engine(e.into())
}

/// A scan error as the engine carries it; dataset errors stay recoverable as themselves.
fn to_datafusion(e: QueryError) -> DataFusionError {
    match e {
        QueryError::Dataset(e) => DataFusionError::External(Box::new(e)),
        QueryError::Engine(e) => e,
        QueryError::Usage(m) => DataFusionError::Execution(m),
    }
}
