//! [`VectorTopKRule`]: recognises an exact vector top-k in a physical plan and hands it to
//! the scan.
//!
//! The pattern is DataFusion's streaming top-k (`SortExec` with a `fetch` of k) whose first
//! sort key is `cosine_distance` / `l2_distance` / `inner_product` of an embedding column and
//! a constant vector, optionally followed by `_rowid ASC` (the tie-break `sql.rs` adds), over
//! projections, filters and repartitions down to a [`DatasetScan`]:
//!
//! ```text
//! SortExec: TopK(fetch=k), expr=[cosine_distance(emb, [..]) ASC, _rowid ASC]
//!   ProjectionExec / FilterExec(pred) / RepartitionExec / CooperativeExec ...
//!     TesseraScan                         ◄── gets a [`VectorTopK`]
//! ```
//!
//! The rule changes no operator above the scan. The scan then emits, per partition, only the
//! k rows that come first by (distance, `_rowid`) among the rows that pass every filter on
//! the way (module `vector_scan` computes the distances straight from the column's pages);
//! the filters and the sort above still run, over those rows. Since the scan's choice is the
//! sort's own order on the same distances (the same kernel on the same values), the
//! rows it drops could never be in the answer, and the answer equals the full scan's. A
//! fragment the scan cannot handle this way is sent whole, as before.
//!
//! The rule does not fire for a volatile filter (`random()`), which the scan and the filter
//! above would evaluate differently, for a filter above a projection, for sort keys other than
//! the distance and `_rowid`, or for columns whose vectors are not float (integer vectors are
//! converted by the function, and ragged ones have no fixed row size).

use std::sync::Arc;

use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::Schema;
use datafusion::common::Result as DfResult;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};
use datafusion::physical_expr_common::physical_expr::is_volatile;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
#[allow(deprecated)]
use datafusion::physical_plan::coalesce_batches::CoalesceBatchesExec;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::expressions::{BinaryExpr, Column, Literal};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use tessera::{DType, Dim};

use crate::ann::SharedAnswer;
use crate::convert::Source;
use crate::distance::{Metric, VectorFunction, scalar_vector};
use crate::scan::DatasetScan;

/// An exact vector top-k the scan computes from the embedding column's pages.
#[derive(Clone, Debug)]
pub(crate) struct VectorTopK {
    /// Rows to keep per partition.
    pub(crate) k: usize,
    pub(crate) metric: Metric,
    /// The table field of the vector column.
    pub(crate) field: usize,
    /// The constant vector, as the function received it.
    pub(crate) query: Vec<f64>,
    /// The distance key's order (`descending`, `nulls_first`); ties go by `_rowid` ascending.
    pub(crate) order: SortOptions,
    /// Every filter between the sort and the scan, over table fields: the fields it reads
    /// (ascending) and the expression over a schema of just those fields.
    pub(crate) filter: Option<(Vec<usize>, Arc<dyn PhysicalExpr>)>,
    /// The index search, run once for all the scan's partitions (module `ann`).
    pub(crate) shared: Arc<SharedAnswer>,
}

/// The physical optimizer rule; see the module docs.
#[derive(Debug, Default)]
pub(crate) struct VectorTopKRule;

impl PhysicalOptimizerRule for VectorTopKRule {
    fn optimize(&self, plan: Arc<dyn ExecutionPlan>, _config: &ConfigOptions) -> DfResult<Arc<dyn ExecutionPlan>> {
        plan.transform_down(|node| {
            let Some(sort) = node.downcast_ref::<SortExec>() else { return Ok(Transformed::no(node)) };
            let Some((scan, hint)) = sort.fetch().and_then(|k| recognise(sort, k)) else {
                return Ok(Transformed::no(node));
            };
            let hinted: Arc<dyn ExecutionPlan> = Arc::new(scan.with_top_k(hint));
            let input = sort.input().clone().transform_up(|n| {
                Ok(if n.is::<DatasetScan>() { Transformed::yes(hinted.clone()) } else { Transformed::no(n) })
            })?;
            let node = node.clone().with_new_children(vec![input.data])?;
            Ok(Transformed::new(node, true, TreeNodeRecursion::Jump))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &'static str {
        "tessera_vector_top_k"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// A sort key on its way down the plan: a column of the current node's input, or the
/// distance of such a column to a constant.
#[derive(Clone, Debug)]
enum Key {
    Column(usize),
    Distance { metric: Metric, column: usize, query: Vec<f64> },
}

impl Key {
    fn from_expr(expr: &Arc<dyn PhysicalExpr>) -> Option<Self> {
        if let Some(c) = expr.downcast_ref::<Column>() {
            return Some(Self::Column(c.index()));
        }
        let fun = expr.downcast_ref::<ScalarFunctionExpr>()?;
        let metric = fun.fun().inner().downcast_ref::<VectorFunction>()?.metric();
        let [left, right] = fun.args() else { return None };
        let (col, lit) = match (left.downcast_ref::<Column>(), right.downcast_ref::<Column>()) {
            (Some(c), None) => (c, right),
            (None, Some(c)) => (c, left),
            _ => return None,
        };
        let value = lit.downcast_ref::<Literal>()?.value();
        let query = scalar_vector(value).ok()??;
        Some(Self::Distance { metric, column: col.index(), query })
    }

    /// The key over a projection's input.
    fn through_projection(self, p: &ProjectionExec) -> Option<Self> {
        let expr = |i: usize| p.expr().get(i).map(|e| &e.expr);
        match self {
            Self::Column(i) => Self::from_expr(expr(i)?),
            Self::Distance { metric, column, query } => {
                let c = expr(column)?.downcast_ref::<Column>()?;
                Some(Self::Distance { metric, column: c.index(), query })
            }
        }
    }

    /// The key over a filter's input (a filter may project its output).
    fn through_filter(self, f: &FilterExec) -> Option<Self> {
        let map = |i: usize| match f.projection() {
            Some(p) => p.get(i).copied(),
            None => Some(i),
        };
        match self {
            Self::Column(i) => Some(Self::Column(map(i)?)),
            Self::Distance { metric, column, query } => Some(Self::Distance { metric, column: map(column)?, query }),
        }
    }
}

/// Whether `node` hands on its input's rows and columns unchanged (in any order or batching).
#[allow(deprecated)] // `CoalesceBatchesExec`: older plans may still carry it.
fn passes_rows(node: &Arc<dyn ExecutionPlan>) -> bool {
    node.is::<RepartitionExec>()
        || node.is::<CoalescePartitionsExec>()
        || node.is::<CooperativeExec>()
        || node.is::<CoalesceBatchesExec>()
}

/// The scan under `sort` and what it should compute, when the sort is a vector top-k.
fn recognise(sort: &SortExec, k: usize) -> Option<(DatasetScan, VectorTopK)> {
    let mut keys = sort.expr().iter();
    let first = keys.next()?;
    let mut distance = Key::from_expr(&first.expr)?;
    let mut rowid = match keys.next() {
        Some(r) if !r.options.descending => Some(Key::from_expr(&r.expr)?),
        Some(_) => return None,
        None => None,
    };
    if keys.next().is_some() {
        return None;
    }
    let mut filters: Vec<Arc<dyn PhysicalExpr>> = Vec::new();
    let mut node = sort.input().clone();
    loop {
        if let Some(p) = node.downcast_ref::<ProjectionExec>() {
            if !filters.is_empty() {
                return None;
            }
            distance = distance.through_projection(p)?;
            rowid = match rowid {
                Some(r) => Some(r.through_projection(p)?),
                None => None,
            };
        } else if let Some(f) = node.downcast_ref::<FilterExec>() {
            if is_volatile(f.predicate()) {
                return None;
            }
            distance = distance.through_filter(f)?;
            rowid = match rowid {
                Some(r) => Some(r.through_filter(f)?),
                None => None,
            };
            filters.push(f.predicate().clone());
        } else if !passes_rows(&node) {
            break;
        }
        node = node.children().first().map(|c| (*c).clone())?;
    }
    let scan = node.downcast_ref::<DatasetScan>()?;
    let plan = scan.plan();
    if !plan.fast_top_k {
        return None;
    }
    let Key::Distance { metric, column, query } = distance else { return None };
    let field = *plan.projection.get(column)?;
    if let Some(r) = rowid {
        let Key::Column(i) = r else { return None };
        if plan.projection.get(i).map(|&f| &plan.layout.sources[f]) != Some(&Source::RowId) {
            return None;
        }
    }
    let Source::Column(name) = &plan.layout.sources[field] else { return None };
    let column = plan.ds.schema().column(name)?;
    let dims = column.shape.iter().copied().try_fold(1u64, |a, d| match d {
        Dim::Fixed(n) => a.checked_mul(n),
        Dim::Ragged => None,
    })?;
    if !matches!(column.dtype, DType::F32 | DType::F16 | DType::Bf16 | DType::F64)
        || dims == 0
        || dims != query.len() as u64
    {
        return None;
    }
    let filter = match filters.into_iter().reduce(|a, b| Arc::new(BinaryExpr::new(a, Operator::And, b))) {
        Some(p) => Some(over_table_fields(&p, &plan.projection, &plan.layout.schema)?),
        None => None,
    };
    let hint = VectorTopK { k, metric, field, query, order: first.options, filter, shared: Arc::default() };
    Some((scan.clone(), hint))
}

/// `predicate` over the scan's output (`projection` of the table's fields) as the fields it
/// reads and the expression over a schema of just those.
fn over_table_fields(
    predicate: &Arc<dyn PhysicalExpr>,
    projection: &[usize],
    table: &Schema,
) -> Option<(Vec<usize>, Arc<dyn PhysicalExpr>)> {
    let mut fields: Vec<usize> =
        collect_columns(predicate).iter().map(|c| projection.get(c.index()).copied()).collect::<Option<_>>()?;
    fields.sort_unstable();
    fields.dedup();
    if fields.is_empty() {
        return None;
    }
    let expr = predicate
        .clone()
        .transform(|e| {
            let Some(c) = e.downcast_ref::<Column>() else { return Ok(Transformed::no(e)) };
            let at = projection.get(c.index()).and_then(|f| fields.iter().position(|x| x == f));
            match at {
                Some(at) => Ok(Transformed::yes(Arc::new(Column::new(table.field(fields[at]).name(), at)) as _)),
                None => Err(datafusion::error::DataFusionError::Internal("filter column".into())),
            }
        })
        .ok()?
        .data;
    Some((fields, expr))
}
