//! Index-assisted vector top-k: `ORDER BY <distance>(column, [..]) LIMIT k` answered from a
//! vector index of the version (`tessera::ann`, SPEC.md §"Vector indexes") when one fits.
//!
//! The `topk` rule hands the scan a [`VectorTopK`]; at run time the first partition asks the
//! table's [`IndexCatalog`] for an index of the version on that column and metric. When there
//! is one, and the query has no filter, ranks nearest first and wants at most as many rows as
//! the search finds, the partition runs the search once for the whole scan ([`SharedAnswer`]);
//! every partition then keeps the hits in its own fragments and sends them exactly as the
//! page scan would, with the vectors the index holds. Otherwise the exact page scan runs. The
//! ranking of the rows found is the exact one (the same distance on the same stored values);
//! only rows in unprobed lists can be missed, which `nprobe` trades against speed, and
//! `ScanOptions::vector_index = false` turns off.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tessera::ann::{Hit, VectorIndex};
use tessera::{Dataset, distance::Distance};

use crate::error::QueryResult;
use crate::table::ScanCounters;
use crate::topk::VectorTopK;

/// The index a table's scans use for one column and metric, if any.
type Found = Option<Arc<VectorIndex>>;

/// The vector indexes a table's scans may use, loaded on first need.
#[derive(Debug)]
pub(crate) struct IndexCatalog {
    /// Whether scans may use an index at all.
    enabled: bool,
    /// Lists to probe; `None` for each index's default.
    nprobe: Option<usize>,
    /// (column, metric) → the index used for it, if any.
    found: Mutex<HashMap<(String, Distance), Found>>,
}

impl IndexCatalog {
    pub(crate) fn new(enabled: bool, nprobe: Option<usize>) -> Self {
        Self { enabled, nprobe, found: Mutex::new(HashMap::new()) }
    }

    /// The index of `ds`'s version for `column` and `metric`: the first by name of the valid
    /// ones.
    async fn index(&self, ds: &Dataset, column: &str, metric: Distance) -> QueryResult<Option<Arc<VectorIndex>>> {
        let key = (column.to_string(), metric);
        if let Some(hit) = self.found.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(hit);
        }
        let index = ds.vector_indexes_for_async(column, metric).await?.into_iter().next().map(Arc::new);
        if let Ok(mut m) = self.found.lock() {
            m.insert(key, index.clone());
        }
        Ok(index)
    }
}

/// What the scan's partitions share: the one search, run by whichever partition comes first
/// while the others wait for its answer.
#[derive(Debug, Default)]
pub(crate) struct SharedAnswer(tokio::sync::Mutex<Option<Answer>>);

/// What a partition does for a vector top-k.
#[derive(Debug, Clone)]
pub(crate) enum Answer {
    /// The index's hits, nearest first.
    Hits(Arc<Vec<Hit>>),
    /// No index applies: run the exact scan.
    Exact,
    /// The search failed; the partition that ran it reports the error.
    Failed,
}

/// The index's answer to `top` over `column`, computed once per scan: its hits, `Exact` when
/// no index fits, `Failed` when the search failed in another partition (which reports it).
/// The search's parts run as tasks of the caller's runtime.
///
/// # Errors
/// The search's errors (a damaged index is `malformed`), in the partition that ran it.
pub(crate) async fn hits(
    top: &VectorTopK,
    ds: &Dataset,
    column: &str,
    catalog: &IndexCatalog,
    counters: &ScanCounters,
) -> QueryResult<Answer> {
    let metric = top.metric.distance();
    if !catalog.enabled
        || top.filter.is_some()
        || top.order.descending
        || top.order.nulls_first
        || metric == Distance::InnerProduct
    {
        return Ok(Answer::Exact);
    }
    // Held across the search: the other partitions wait for the one answer.
    let mut shared = top.shared.0.lock().await;
    if let Some(a) = shared.as_ref() {
        return Ok(a.clone());
    }
    let run = async {
        let Some(index) = catalog.index(ds, column, metric).await? else { return Ok(Answer::Exact) };
        let nprobe = catalog.nprobe.unwrap_or_else(|| index.default_nprobe());
        let (hits, stats) = index.search_async(ds.store(), &top.query, top.k, nprobe).await?;
        counters.index_lists.fetch_add(stats.lists, Ordering::Relaxed);
        counters.index_entries.fetch_add(stats.entries, Ordering::Relaxed);
        counters.index_bytes.fetch_add(stats.bytes, Ordering::Relaxed);
        // Too few non-null vectors found: the exact scan also ranks the nulls.
        if hits.len() < top.k {
            return Ok(Answer::Exact);
        }
        counters.index_searches.fetch_add(1, Ordering::Relaxed);
        QueryResult::Ok(Answer::Hits(Arc::new(hits)))
    };
    match run.await {
        Ok(a) => {
            *shared = Some(a.clone());
            Ok(a)
        }
        Err(e) => {
            *shared = Some(Answer::Failed);
            Err(e)
        }
    }
}
