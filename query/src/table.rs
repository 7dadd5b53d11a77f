//! [`DatasetTable`]: one pinned version of a dataset as a DataFusion table.
//!
//! Planning a scan (`TableProvider::scan`) decides which fragments to read: the pushed-down
//! filters become one predicate; DataFusion's `PruningPredicate` checks it against each
//! fragment's manifest statistics (module `prune`) and drops the fragments that cannot
//! match. The remaining fragments are split into contiguous runs, one per partition, each
//! read by the scan (module `scan`).
//!
//! Every filter is pushed down as *inexact*: the scan uses it to prune fragments and to skip
//! rows before it reads the other columns, and DataFusion still applies it exactly afterwards.
//! Volatile filters (`random()`) are not pushed down, since evaluating them twice would
//! change their meaning.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, Result as DfResult};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::expr_rewriter::unnormalize_col;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_optimizer::pruning::PruningPredicate;
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr};
use tessera::{Dataset, FragmentInfo};

use crate::ann::IndexCatalog;
use crate::convert::{Layout, layout};
use crate::error::QueryResult;
use crate::prune::FragmentStats;
use crate::scan::{DatasetScan, ScanPlan};

/// How scans of a [`DatasetTable`] behave; the defaults are what queries should use, the
/// switches exist so that tests and benchmarks can compare.
#[derive(Clone, Debug)]
// Independent switches, each a knob of its own (as in DataFusion's own options).
#[allow(clippy::struct_excessive_bools)]
pub struct ScanOptions {
    /// Skip fragments whose statistics cannot match the filters.
    pub prune: bool,
    /// Read the filter columns first and the other projected columns only for matching rows.
    pub late_materialize: bool,
    /// Partitions (reader threads) per scan; 0 = the session's target partitions.
    pub partitions: usize,
    /// Compute `ORDER BY <distance>(column, [..]) LIMIT k` in the scan, from the vector
    /// column's pages (module `topk`); off, the engine sorts every row's distance.
    pub vector_top_k: bool,
    /// Answer such a top-k (nearest first, no filter) from a vector index of the version when
    /// there is one (module `ann`); off, always the exact scan.
    pub vector_index: bool,
    /// Lists an index search probes; `None` for the index's default (1/64 of its lists, at least 8).
    pub nprobe: Option<usize>,
}

impl Default for ScanOptions {
    fn default() -> Self {
        Self {
            prune: true,
            late_materialize: true,
            partitions: 0,
            vector_top_k: true,
            vector_index: true,
            nprobe: None,
        }
    }
}

/// What the scans of a table did, summed over every query since the table was made.
#[derive(Debug, Default)]
pub struct ScanCounters {
    /// Fragments the scans considered.
    pub fragments: AtomicU64,
    /// Fragments skipped by their statistics, never read.
    pub pruned: AtomicU64,
    /// Fragments whose filter columns were read and had no matching row (nothing else read).
    pub no_match: AtomicU64,
    /// Rows the scans returned to the engine.
    pub rows_out: AtomicU64,
    /// Pages of vector columns the vector top-k read.
    pub vector_pages: AtomicU64,
    /// Stored bytes of those pages.
    pub vector_bytes: AtomicU64,
    /// Top-k queries answered from a vector index.
    pub index_searches: AtomicU64,
    /// Lists index searches probed (also those that found fewer than k rows, when the exact
    /// scan answered).
    pub index_lists: AtomicU64,
    /// Entries they ranked.
    pub index_entries: AtomicU64,
    /// Bytes of lists they read.
    pub index_bytes: AtomicU64,
}

/// A snapshot of [`ScanCounters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Fragments the scans considered.
    pub fragments: u64,
    /// Fragments skipped by their statistics.
    pub pruned: u64,
    /// Fragments whose filter columns matched no row.
    pub no_match: u64,
    /// Rows returned to the engine.
    pub rows_out: u64,
    /// Pages of vector columns the vector top-k read.
    pub vector_pages: u64,
    /// Stored bytes of those pages.
    pub vector_bytes: u64,
    /// Top-k queries answered from a vector index.
    pub index_searches: u64,
    /// Lists those searches probed.
    pub index_lists: u64,
    /// Entries they ranked.
    pub index_entries: u64,
    /// Bytes of lists they read.
    pub index_bytes: u64,
}

impl ScanCounters {
    /// The counters now.
    #[must_use]
    pub fn snapshot(&self) -> ScanStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ScanStats {
            fragments: get(&self.fragments),
            pruned: get(&self.pruned),
            no_match: get(&self.no_match),
            rows_out: get(&self.rows_out),
            vector_pages: get(&self.vector_pages),
            vector_bytes: get(&self.vector_bytes),
            index_searches: get(&self.index_searches),
            index_lists: get(&self.index_lists),
            index_entries: get(&self.index_entries),
            index_bytes: get(&self.index_bytes),
        }
    }
}

/// One version of a dataset as a table: its columns (see [`crate::convert`]) and `_rowid`.
pub struct DatasetTable {
    ds: Dataset,
    layout: Layout,
    options: ScanOptions,
    counters: Arc<ScanCounters>,
    indexes: Arc<IndexCatalog>,
}

impl fmt::Debug for DatasetTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatasetTable")
            .field("branch", &self.ds.branch())
            .field("version", &self.ds.version())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl DatasetTable {
    /// The table of `ds`'s version.
    ///
    /// # Errors
    /// `usage` when the schema has a column the table cannot name (`_rowid`).
    pub fn new(ds: Dataset, options: ScanOptions) -> QueryResult<Self> {
        let layout = layout(ds.schema())?;
        let indexes = Arc::new(IndexCatalog::new(options.vector_index, options.nprobe));
        Ok(Self { ds, layout, options, counters: Arc::default(), indexes })
    }

    /// The pinned version.
    #[must_use]
    pub fn dataset(&self) -> &Dataset {
        &self.ds
    }

    /// What this table's scans did so far.
    #[must_use]
    pub fn counters(&self) -> &Arc<ScanCounters> {
        &self.counters
    }

    /// The table's column names, `_rowid` last.
    pub(crate) fn schema_names(&self) -> Vec<String> {
        self.layout.schema.fields().iter().map(|f| f.name().clone()).collect()
    }

    /// The fragments a predicate over the table's schema may match (all when pruning is off or
    /// the predicate says nothing about statistics).
    fn surviving(&self, predicate: Option<&Arc<dyn PhysicalExpr>>) -> Vec<FragmentInfo> {
        let all = self.ds.fragments();
        let keep = predicate.filter(|_| self.options.prune).and_then(|p| {
            let pruning = PruningPredicate::try_new(p.clone(), self.layout.schema.clone()).ok()?;
            let stats = FragmentStats { fragments: all, schema: self.ds.schema(), table: self.layout.schema.clone() };
            pruning.prune(&stats).ok()
        });
        match keep {
            Some(keep) => all.iter().zip(keep).filter(|(_, k)| *k).map(|(f, _)| f.clone()).collect(),
            None => all.to_vec(),
        }
    }
}

#[async_trait]
impl TableProvider for DatasetTable {
    fn schema(&self) -> SchemaRef {
        self.layout.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                if f.is_volatile() {
                    TableProviderFilterPushDown::Unsupported
                } else {
                    TableProviderFilterPushDown::Inexact
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let schema = &self.layout.schema;
        let projection: Vec<usize> = projection.cloned().unwrap_or_else(|| (0..schema.fields().len()).collect());
        let predicate = conjunction(filters.iter().cloned()).map(unnormalize_col);
        let whole = DFSchema::try_from(schema.as_ref().clone())?;
        let physical = predicate.as_ref().and_then(|p| state.create_physical_expr(p.clone(), &whole).ok());
        let fragments = self.surviving(physical.as_ref());
        let considered = self.ds.fragments().len() as u64;
        self.counters.fragments.fetch_add(considered, Ordering::Relaxed);
        self.counters.pruned.fetch_add(considered - fragments.len() as u64, Ordering::Relaxed);

        // The filter over its own columns, evaluated by the scan before it reads the rest.
        let filter = predicate.filter(|_| self.options.late_materialize).and_then(|p| {
            let mut cols: Vec<usize> = p.column_refs().iter().filter_map(|c| schema.index_of(&c.name).ok()).collect();
            cols.sort_unstable();
            cols.dedup();
            let sub = Schema::new(cols.iter().map(|&i| schema.field(i).clone()).collect::<Vec<_>>());
            let expr = state.create_physical_expr(p, &DFSchema::try_from(sub).ok()?).ok()?;
            (!cols.is_empty()).then_some((cols, expr))
        });
        let partitions = match self.options.partitions {
            0 => state.config().target_partitions(),
            n => n,
        };
        let plan = ScanPlan {
            ds: self.ds.clone(),
            layout: self.layout.clone(),
            projection,
            filter,
            limit: if filters.is_empty() { limit } else { None },
            batch_size: state.config().batch_size(),
            counters: self.counters.clone(),
            fast_top_k: self.options.vector_top_k,
            top_k: None,
            indexes: self.indexes.clone(),
        };
        Ok(Arc::new(DatasetScan::new(plan, &fragments, partitions)?))
    }
}
