//! # SQL and vector search over a pinned Tessera version
//!
//! [`QueryEngine`] opens one version of a dataset as the table `ds` in Apache DataFusion and
//! answers SQL over it:
//!
//! ```sql
//! SELECT _rowid, label_name, cosine_distance(embedding, [0.1, 0.2, 0.3]) AS d
//! FROM ds WHERE label_name = 'dog' AND caption LIKE '%snow%'
//! ORDER BY d LIMIT 10
//! ```
//!
//! | piece | module |
//! |---|---|
//! | dtypes as Arrow types and arrays, both ways | the `tessera-arrow` crate, shared with Parquet export and import |
//! | tessera columns as Arrow fields and arrays, `_rowid`, class names | [`convert`] |
//! | the table: filter pushdown, fragment pruning by manifest statistics | [`table`], `prune` |
//! | the scan: reader threads, late materialization, deletion vectors, checksums | `scan` |
//! | `cosine_distance`, `l2_distance`, `inner_product` (the reference's kernels, the same bits on every CPU), `[..]` literals | [`distance`] |
//! | parsing, `_rowid` tie-break, errors with positions and column lists | `sql` |
//! | exact vector top-k: the plan rule, the page scan with a bounded heap | `topk`, `vector_scan` |
//! | the same top-k from a vector index of the version (IVF-Flat), when one fits | `ann` |
//!
//! **Order.** An `ORDER BY` is completed with `_rowid` ascending, so rows that tie on the
//! sort keys come out in row order and `ORDER BY d LIMIT k` is an exact, deterministic top-k
//! (DataFusion's streaming `TopK`: it keeps k rows, whatever the table's size). When the
//! first key is a distance to a constant vector, the scan itself keeps the k best rows of
//! each partition, computing distances from the column's pages (modules `topk`,
//! `vector_scan`); the answer is the same. Without `ORDER BY` the order is unspecified.
//!
//! **Vector indexes.** When the version has a vector index (`tessera::ann`, SPEC.md §24) on
//! the ranked column for the ranked metric, an unfiltered nearest-first top-k reads only the
//! lists nearest the query (module `ann`): the rows returned are ranked exactly, rows in lists
//! not read can be missed. [`ScanOptions::vector_index`] turns this off, and
//! [`ScanOptions::nprobe`] sets the lists read; [`ScanStats`] counts the searches.
//!
//! **Runtimes.** The blocking calls ([`QueryEngine::sql`] and the others) run the query on the
//! crate's runtime (one per process, the machine's cores, started by the first blocking query
//! and never dropped, so no engine drops a runtime wherever it is dropped), and refuse
//! (`usage`) inside an async runtime;
//! [`QueryEngine::sql_async`] and [`QueryEngine::each_batch_async`] run it on the caller's
//! runtime instead, so an async service starts no second one.

mod ann;
pub mod convert;
pub mod distance;
mod error;
mod prune;
mod scan;
mod sql;
pub mod table;
mod topk;
mod vector_scan;

use std::sync::Arc;

use datafusion::arrow::array::{AsArray, RecordBatch};
use datafusion::arrow::datatypes::{SchemaRef, UInt64Type};
use datafusion::execution::context::SessionContext;
use datafusion::execution::{FunctionRegistry, SessionStateBuilder};
use datafusion::prelude::SessionConfig;
use futures::StreamExt;
use tessera::{Dataset, ViewRows, ViewRowsBuilder};

/// The engine this crate builds on, for callers that read the answer's Arrow batches.
pub use datafusion;

pub use crate::convert::ROWID;
pub use crate::error::{QueryError, QueryResult};
pub use crate::table::{DatasetTable, ScanOptions, ScanStats};

/// The table name queries use for the dataset.
pub const TABLE: &str = "ds";

/// A query's answer, collected.
#[derive(Clone, Debug)]
pub struct Answer {
    /// The columns.
    pub schema: SchemaRef,
    /// The rows, in order.
    pub batches: Vec<RecordBatch>,
}

impl Answer {
    /// Rows in the answer.
    #[must_use]
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    /// The answer's `_rowid` column, in order (for an answer of [`QueryEngine::sql_async`];
    /// the blocking [`QueryEngine::row_ids`] selects it itself).
    ///
    /// # Errors
    /// `usage` when the answer has no `_rowid` column.
    pub fn row_ids(&self) -> QueryResult<Vec<u64>> {
        let mut ids = Vec::with_capacity(self.num_rows());
        for b in &self.batches {
            ids.extend(row_id_column(b).ok_or_else(no_row_ids)?.iter().flatten());
        }
        Ok(ids)
    }
}

/// A batch's `_rowid` column, if it has one.
fn row_id_column(batch: &RecordBatch) -> Option<&datafusion::arrow::array::UInt64Array> {
    batch.schema().index_of(ROWID).ok().and_then(|i| batch.column(i).as_primitive_opt::<UInt64Type>())
}

fn no_row_ids() -> QueryError {
    QueryError::Usage(format!("the answer has no {ROWID} column of row ids to save"))
}

/// The runtime of the blocking calls, one per process: the machine's cores run the scans'
/// tasks (network stores need its I/O driver, retries and slow stores its timer).
fn runtime() -> QueryResult<&'static tokio::runtime::Runtime> {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    if let Some(rt) = RT.get() {
        return Ok(rt);
    }
    let threads = std::thread::available_parallelism().map_or(2, usize::from);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("tessera-query")
        .enable_all()
        .build()
        .map_err(|e| QueryError::Engine(e.into()))?;
    // A concurrent first call may have set one: either serves (the other is dropped here, on
    // a thread outside any runtime).
    Ok(RT.get_or_init(|| rt))
}

/// SQL over one pinned version of a dataset.
pub struct QueryEngine {
    ctx: SessionContext,
    table: Arc<DatasetTable>,
}

impl std::fmt::Debug for QueryEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryEngine").field("table", &self.table).finish_non_exhaustive()
    }
}

impl QueryEngine {
    /// The engine over `ds`'s version with default scan options.
    ///
    /// # Errors
    /// As [`QueryEngine::with_options`].
    pub fn new(ds: Dataset) -> QueryResult<Self> {
        Self::with_options(ds, ScanOptions::default())
    }

    /// The engine over `ds`'s version.
    ///
    /// # Errors
    /// `usage` when the schema cannot be a table (a column named `_rowid`).
    pub fn with_options(ds: Dataset, options: ScanOptions) -> QueryResult<Self> {
        let threads = std::thread::available_parallelism().map_or(2, usize::from);
        let mut config = SessionConfig::new().with_target_partitions(threads).with_information_schema(false);
        config.options_mut().sql_parser.collect_spans = true;
        let mut state = SessionStateBuilder::new().with_config(config).with_default_features().build();
        for f in distance::functions() {
            state.register_udf(Arc::new(f)).map_err(QueryError::from)?;
        }
        let mut planners = state.expr_planners().to_vec();
        planners.insert(0, Arc::new(distance::ArrayLiteralPlanner));
        let state = SessionStateBuilder::new_from_existing(state)
            .with_expr_planners(planners)
            .with_physical_optimizer_rule(Arc::new(topk::VectorTopKRule))
            .build();
        let ctx = SessionContext::new_with_state(state);
        let table = Arc::new(DatasetTable::new(ds, options)?);
        ctx.register_table(TABLE, table.clone())?;
        Ok(Self { ctx, table })
    }

    /// The table (the pinned version, scan counters).
    #[must_use]
    pub fn table(&self) -> &DatasetTable {
        &self.table
    }

    /// What the scans did so far.
    #[must_use]
    pub fn scan_stats(&self) -> ScanStats {
        self.table.counters().snapshot()
    }

    /// Runs `sql` and collects the answer.
    ///
    /// # Errors
    /// `usage` for bad SQL (with its position), unknown columns (with the real ones) and
    /// type errors; the dataset's errors (class kept) while reading.
    pub fn sql(&self, sql: &str) -> QueryResult<Answer> {
        let mut batches = Vec::new();
        let schema = self.each_batch(sql, |b| {
            batches.push(b);
            true
        })?;
        Ok(Answer { schema, batches })
    }

    /// Runs `sql`, handing each batch of the answer to `each` in order until it returns
    /// `false` (then the query stops reading). Returns the answer's schema.
    ///
    /// # Errors
    /// As [`QueryEngine::sql`].
    pub fn each_batch(&self, sql: &str, each: impl FnMut(RecordBatch) -> bool) -> QueryResult<SchemaRef> {
        let statement = sql::parse(sql)?;
        self.run(statement, each)
    }

    /// As [`QueryEngine::sql`], on the caller's runtime (a multi-thread tokio runtime: the
    /// scans run as its tasks).
    ///
    /// # Errors
    /// As [`QueryEngine::sql`].
    pub async fn sql_async(&self, sql: &str) -> QueryResult<Answer> {
        let mut batches = Vec::new();
        let schema = self
            .each_batch_async(sql, |b| {
                batches.push(b);
                true
            })
            .await?;
        Ok(Answer { schema, batches })
    }

    /// As [`QueryEngine::each_batch`], on the caller's runtime.
    ///
    /// # Errors
    /// As [`QueryEngine::sql`].
    pub async fn each_batch_async(&self, sql: &str, each: impl FnMut(RecordBatch) -> bool) -> QueryResult<SchemaRef> {
        let statement = sql::parse(sql)?;
        self.run_async(statement, each).await
    }

    /// The row ids (`_rowid`) of `sql`'s answer, in its order: what a view saves. `_rowid`
    /// is added to a plain `SELECT`'s output when it is not there.
    ///
    /// # Errors
    /// As [`QueryEngine::sql`]; `usage` when the answer has no `_rowid` column (an aggregate,
    /// or a union without it).
    pub fn row_ids(&self, sql: &str) -> QueryResult<Vec<u64>> {
        let mut ids = Vec::new();
        self.each_row_id(sql, |id| {
            ids.push(id);
            Ok(())
        })?;
        Ok(ids)
    }

    /// The rows where `predicate` holds, ascending: one SQL boolean expression over the
    /// table's columns, as after `WHERE` (what `tessera delete/update --where` select). A
    /// predicate is parsed on its own first, so nothing but an expression is accepted.
    ///
    /// # Errors
    /// `usage` for text that is not one expression (with its position in `predicate`), an
    /// unknown column (with the real ones, and a hint when `"double quotes"` were meant as
    /// text) or a type error; the dataset's errors (class kept) while reading.
    pub fn rows_where(&self, predicate: &str) -> QueryResult<Vec<u64>> {
        let expr = sql::parse_predicate(predicate)?;
        let answer = self.row_ids(&format!("SELECT {ROWID} FROM {TABLE} WHERE {expr}"));
        let mut rows = answer.map_err(|e| match e {
            QueryError::Usage(m) => QueryError::Usage(sql::predicate_message(&m, predicate)),
            other => other,
        })?;
        rows.sort_unstable();
        Ok(rows)
    }

    /// The row ids of `sql`'s answer, in its order, as a view stores them (SPEC.md VIEW-12):
    /// an ascending answer is collected as runs, so its memory grows with its runs, not its
    /// rows.
    ///
    /// # Errors
    /// As [`QueryEngine::row_ids`]; `limit` for more than 2^24 rows that do not ascend.
    pub fn view_rows(&self, sql: &str) -> QueryResult<ViewRows> {
        let mut b = ViewRowsBuilder::default();
        self.each_row_id(sql, |id| b.push(id))?;
        Ok(b.finish()?)
    }

    /// Calls `f` on each row id of `sql`'s answer, in order, stopping at its first error.
    fn each_row_id(&self, sql: &str, mut f: impl FnMut(u64) -> tessera::Result<()>) -> QueryResult<()> {
        let statement = sql::parse(sql)?;
        let statement = sql::with_rowid_selected(&statement).unwrap_or(statement);
        let mut missing = false;
        let mut failed = None;
        self.run(statement, |b| {
            match row_id_column(&b) {
                Some(col) => {
                    if let Err(e) = col.iter().flatten().try_for_each(&mut f) {
                        failed = Some(e);
                    }
                }
                None => missing = true,
            }
            !missing && failed.is_none()
        })?;
        if missing {
            return Err(no_row_ids());
        }
        failed.map_or(Ok(()), |e| Err(e.into()))
    }

    /// Runs a statement on the crate's runtime (the blocking calls).
    fn run(
        &self,
        statement: datafusion::sql::parser::Statement,
        each: impl FnMut(RecordBatch) -> bool,
    ) -> QueryResult<SchemaRef> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(QueryError::Usage(
                "a blocking query inside an async runtime would stall it; use QueryEngine::sql_async".into(),
            ));
        }
        runtime()?.block_on(self.run_async(statement, each))
    }

    /// Plans and runs a statement on the current runtime, handing over batches in order.
    async fn run_async(
        &self,
        statement: datafusion::sql::parser::Statement,
        mut each: impl FnMut(RecordBatch) -> bool,
    ) -> QueryResult<SchemaRef> {
        let columns: Vec<String> = self.table.schema_names();
        let state = self.ctx.state();
        let plan = sql::plan(&state, statement, &columns).await?;
        let frame = self.ctx.execute_logical_plan(plan).await?;
        let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
        let mut stream = frame.execute_stream().await?;
        while let Some(batch) = stream.next().await {
            if !each(batch?) {
                break;
            }
        }
        Ok(schema)
    }
}
