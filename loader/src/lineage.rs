//! Lineage: which samples a run's steps saw, and which steps saw a sample.
//!
//! A run's order is a pure function of its sources (pinned versions and views), seed and
//! settings, so the loader records those once, plus a line each time an epoch starts or
//! resumes; steps → rows and rows → steps are then recomputed from the plans, reading only
//! metadata. The record costs a few hundred bytes per epoch or resume, whatever the data.
//!
//! # The record (`tessera-lineage/1`)
//! A text file of JSON Lines, appended by rank 0 only ([`LoaderConfig::with_lineage`]):
//! * a **header** line `{"kind":"header","format":"tessera-lineage/1","sources":[…],
//!   "mixture":…,"seed":S,"shuffle":"global"|"none"|"block","window_fragments":K,
//!   "drop_last":B,"global_batch":G,"order_id":"…"}`: each source's `location`, the `branch`
//!   and `version` it pinned (or `view`, a view pinning its own version); `mixture` is `null`
//!   or the mixture's history (`[{"epoch","offset","kind":"weights"|"samples","values",
//!   "epoch_samples"}]`, as [`Mixture::steps`](crate::Mixture)); `order_id` the order's
//!   identity (decimal u64 as a string: a version id, a view id or a mixture's digest). A
//!   run that reopens the record with other settings (a changed mixture) appends a new
//!   header; the last one governs, and a mixture's history extends the earlier ones.
//! * a **start** line per epoch started or resumed:
//!   `{"kind":"start","epoch":E,"consumed":C,"step":K,"unix_ms":T}`: `consumed` the samples of
//!   the epoch consumed before it (all ranks), `step` the run's global step there.
//!
//! **Steps.** Step `k` is the run's `k`-th global batch (`global_batch` samples over all
//! ranks), counting every epoch from epoch 0 in order: epoch `e` holds
//! `ceil(N_e / G)` steps (`floor` with `drop_last`), `N_e` its samples.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tessera::At;

use crate::buffer::HostBuffer;
use crate::config::LoaderConfig;
use crate::error::{LoaderError, Result};
use crate::loader::Loader;
use crate::mixture::{MixSource, MixStep, Mixture, Share};
use crate::sampler::{Plan, ShuffleMode};

/// The record format's name.
pub const LINEAGE_FORMAT: &str = "tessera-lineage/1";

/// A source as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRecord {
    /// Dataset root.
    pub location: String,
    /// The branch of the pinned version (`None` for a view).
    pub branch: Option<String>,
    /// The pinned version (`None` for a view).
    pub version: Option<u64>,
    /// The view read, if any.
    pub view: Option<String>,
}

/// A mixture step as recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct StepRecord {
    epoch: u64,
    offset: u64,
    kind: String,
    values: Vec<f64>,
    epoch_samples: Option<u64>,
}

/// The header line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Header {
    kind: String,
    format: String,
    sources: Vec<SourceRecord>,
    mixture: Option<Vec<StepRecord>>,
    seed: u64,
    shuffle: String,
    window_fragments: Option<usize>,
    drop_last: bool,
    global_batch: u64,
    order_id: String,
}

/// A start line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartRecord {
    /// The epoch started or resumed.
    pub epoch: u64,
    /// Samples of it consumed before (all ranks).
    pub consumed: u64,
    /// The run's global step there.
    pub step: u64,
    /// Wall-clock time, milliseconds since the Unix epoch.
    pub unix_ms: u64,
}

#[derive(Serialize, Deserialize)]
struct StartLine {
    kind: String,
    #[serde(flatten)]
    start: StartRecord,
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> LoaderError {
    LoaderError::config(format!("lineage record {}: {e}", path.display()))
}

/// Appends a run's start lines (rank 0's loader holds one).
#[derive(Debug)]
pub(crate) struct LineageWriter {
    path: PathBuf,
    file: Mutex<File>,
}

impl LineageWriter {
    /// Opens (creating) the record at `path` for `loader`, appending a header unless the last
    /// header there is the same.
    pub(crate) fn open<B: HostBuffer>(path: &Path, loader: &Loader<B>) -> Result<Self> {
        let header = header_of(loader);
        let last = if path.exists() { LineageRecord::read(path).ok().map(|r| r.header) } else { None };
        let mut file = OpenOptions::new().create(true).append(true).open(path).map_err(|e| io_err(path, e))?;
        if last.as_ref() != Some(&header) {
            let line = serde_json::to_string(&header).map_err(|e| io_err(path, e))?;
            writeln!(file, "{line}").map_err(|e| io_err(path, e))?;
        }
        Ok(Self { path: path.to_path_buf(), file: Mutex::new(file) })
    }

    /// Appends a start line.
    pub(crate) fn start(&self, epoch: u64, consumed: u64, step: u64) -> Result<()> {
        let unix_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let line = StartLine { kind: "start".into(), start: StartRecord { epoch, consumed, step, unix_ms } };
        let text = serde_json::to_string(&line).map_err(|e| io_err(&self.path, e))?;
        let mut f = self.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        writeln!(f, "{text}").and_then(|()| f.flush()).map_err(|e| io_err(&self.path, e))
    }
}

/// The header describing `loader`'s order.
fn header_of<B: HostBuffer>(loader: &Loader<B>) -> Header {
    let config = loader.config();
    let sources = loader
        .pinned_sources()
        .into_iter()
        .map(|s| match s.at {
            At::BranchVersion(branch, version) => {
                SourceRecord { location: s.location, branch: Some(branch), version: Some(version), view: s.view }
            }
            _ => SourceRecord { location: s.location, branch: None, version: None, view: s.view },
        })
        .collect();
    let mixture = config.mixture.as_ref().map(|m| {
        m.steps
            .iter()
            .map(|st| {
                let weights = st.shares.iter().all(|s| matches!(s, Share::Weight(_)));
                StepRecord {
                    epoch: st.epoch,
                    offset: st.offset,
                    kind: if weights { "weights" } else { "samples" }.into(),
                    values: st
                        .shares
                        .iter()
                        .map(|s| match *s {
                            Share::Weight(w) => w,
                            Share::Samples(n) => n as f64,
                        })
                        .collect(),
                    epoch_samples: st.epoch_samples,
                }
            })
            .collect()
    });
    let (shuffle, window_fragments) = match config.shuffle {
        ShuffleMode::Global => ("global", None),
        ShuffleMode::None => ("none", None),
        ShuffleMode::Block { window_fragments } => ("block", Some(window_fragments)),
    };
    Header {
        kind: "header".into(),
        format: LINEAGE_FORMAT.into(),
        sources,
        mixture,
        seed: config.seed,
        shuffle: shuffle.into(),
        window_fragments,
        drop_last: config.drop_last,
        global_batch: (config.batch_size * config.dist.world_size) as u64,
        order_id: loader.dataset_id().to_string(),
    }
}

/// A lineage record, read back.
#[derive(Clone, Debug)]
pub struct LineageRecord {
    header: Header,
    starts: Vec<StartRecord>,
}

impl LineageRecord {
    /// Reads the record at `path`.
    ///
    /// # Errors
    /// [`LoaderError::Config`] for a missing file, a line that is not JSON of this format, or
    /// a record without a header.
    pub fn read(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| io_err(path, e))?;
        let (mut header, mut starts) = (None, Vec::new());
        for (i, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|e| io_err(path, e))?;
            if line.trim().is_empty() {
                continue;
            }
            let value: serde_json::Value =
                serde_json::from_str(&line).map_err(|e| io_err(path, format!("line {}: {e}", i + 1)))?;
            match value.get("kind").and_then(serde_json::Value::as_str) {
                Some("header") => {
                    let h: Header =
                        serde_json::from_value(value).map_err(|e| io_err(path, format!("line {}: {e}", i + 1)))?;
                    if h.format != LINEAGE_FORMAT {
                        return Err(io_err(path, format!("line {}: format {:?}", i + 1, h.format)));
                    }
                    header = Some(h);
                }
                Some("start") => {
                    let s: StartLine =
                        serde_json::from_value(value).map_err(|e| io_err(path, format!("line {}: {e}", i + 1)))?;
                    starts.push(s.start);
                }
                _ => return Err(io_err(path, format!("line {}: neither a header nor a start", i + 1))),
            }
        }
        let header = header.ok_or_else(|| io_err(path, "no header"))?;
        Ok(Self { header, starts })
    }

    /// The sources, in order (a mixture's source index is a position here).
    #[must_use]
    pub fn sources(&self) -> &[SourceRecord] {
        &self.header.sources
    }

    /// The start lines, in order.
    #[must_use]
    pub fn starts(&self) -> &[StartRecord] {
        &self.starts
    }

    /// Samples per step.
    #[must_use]
    pub fn global_batch(&self) -> u64 {
        self.header.global_batch
    }

    /// A loader of the recorded order with the whole global batch on one rank (reads
    /// metadata only until an epoch runs; a query reads none of the data).
    ///
    /// # Errors
    /// A source that cannot be opened; an order that is not the recorded one.
    pub fn open_loader(&self) -> Result<Loader> {
        let h = &self.header;
        let sources: Vec<MixSource> = h
            .sources
            .iter()
            .map(|s| MixSource {
                at: match (&s.branch, s.version) {
                    (Some(b), Some(v)) => At::BranchVersion(b.clone(), v),
                    _ => At::Latest,
                },
                view: s.view.clone(),
                ..MixSource::new(s.location.clone())
            })
            .collect();
        let first = sources.first().cloned().ok_or_else(|| LoaderError::config("lineage: no source"))?;
        let mut config = match &h.mixture {
            Some(steps) => {
                let steps = steps
                    .iter()
                    .map(|st| {
                        let shares = st
                            .values
                            .iter()
                            .map(|&v| if st.kind == "weights" { Share::Weight(v) } else { Share::Samples(v as u64) })
                            .collect();
                        MixStep { epoch: st.epoch, offset: st.offset, shares, epoch_samples: st.epoch_samples }
                    })
                    .collect();
                LoaderConfig::for_mixture(Mixture { sources, steps })
            }
            None => LoaderConfig { at: first.at, view: first.view, ..LoaderConfig::new(first.location) },
        };
        config.shuffle = match (h.shuffle.as_str(), h.window_fragments) {
            ("global", _) => ShuffleMode::Global,
            ("none", _) => ShuffleMode::None,
            ("block", Some(k)) => ShuffleMode::Block { window_fragments: k },
            (other, _) => return Err(LoaderError::config(format!("lineage: unknown shuffle {other:?}"))),
        };
        config.seed = h.seed;
        config.drop_last = h.drop_last;
        config.batch_size = usize::try_from(h.global_batch).map_err(|_| LoaderError::config("lineage: batch"))?;
        config.memory_budget = 64 << 20;
        config.workers = 1;
        let loader = Loader::open(config)?;
        if loader.dataset_id().to_string() != h.order_id {
            return Err(LoaderError::config(format!(
                "lineage: the sources now give order {} where the record has {} (a source was re-created?)",
                loader.dataset_id(),
                h.order_id
            )));
        }
        Ok(loader)
    }

    /// The epoch and batch of step `step` (epochs counted from 0 in order).
    fn locate<B: HostBuffer>(loader: &Loader<B>, mut step: u64) -> Result<(Plan, usize)> {
        for epoch in 0.. {
            let plan = loader.plan(epoch)?;
            let n = plan.batches_per_rank() as u64;
            if n == 0 {
                return Err(LoaderError::config("lineage: an epoch without steps"));
            }
            if step < n {
                return Ok((plan, step as usize));
            }
            step -= n;
        }
        unreachable!("epochs are unbounded")
    }

    /// The `(source, row)` of every sample of step `step`, in global-batch order (rank 0's
    /// samples first). `loader` comes from [`LineageRecord::open_loader`].
    ///
    /// # Errors
    /// As [`Loader::plan`].
    pub fn rows_at_step<B: HostBuffer>(loader: &Loader<B>, step: u64) -> Result<Vec<(u32, u64)>> {
        let (plan, i) = Self::locate(loader, step)?;
        let mut positions = Vec::new();
        plan.batch_into(i, &mut positions);
        Ok(positions.into_iter().map(|p| loader.source_row(p)).collect())
    }

    /// The steps among the first `steps` that saw row `row` of source `source` (a sample
    /// repeated within a step is listed once).
    ///
    /// # Errors
    /// As [`Loader::plan`].
    pub fn steps_of_row<B: HostBuffer>(loader: &Loader<B>, source: u32, row: u64, steps: u64) -> Result<Vec<u64>> {
        if loader.mixture_order().is_none() && loader.view().is_none() {
            return Self::steps_of_row_inverted(loader, source, row, steps);
        }
        Self::scan(loader, source, row, steps)
    }

    /// [`LineageRecord::steps_of_row`] by walking every step's positions.
    fn scan<B: HostBuffer>(loader: &Loader<B>, source: u32, row: u64, steps: u64) -> Result<Vec<u64>> {
        let mut out = Vec::new();
        let mut positions = Vec::new();
        let mut step = 0u64;
        for epoch in 0.. {
            if step >= steps {
                break;
            }
            let plan = loader.plan(epoch)?;
            for i in 0..plan.batches_per_rank() {
                if step >= steps {
                    break;
                }
                plan.batch_into(i, &mut positions);
                if positions.iter().any(|&p| loader.source_row(p) == (source, row)) {
                    out.push(step);
                }
                step += 1;
            }
        }
        Ok(out)
    }

    /// [`LineageRecord::steps_of_row`] for one version in global or sequential order: per
    /// epoch, the order's inverse gives the row's positions, O(1) each (block shuffle falls
    /// back to the scan).
    fn steps_of_row_inverted<B: HostBuffer>(loader: &Loader<B>, source: u32, row: u64, steps: u64) -> Result<Vec<u64>> {
        let mut out = Vec::new();
        let mut base = 0u64;
        for epoch in 0.. {
            if base >= steps {
                break;
            }
            let plan = loader.plan(epoch)?;
            let gb = plan.global_batch_size() as u64;
            let Some(positions) = plan.positions_of(row) else {
                return Self::scan(loader, source, row, steps);
            };
            if source == 0 {
                let mut seen: Vec<u64> = positions.iter().map(|p| base + p / gb).filter(|&s| s < steps).collect();
                seen.dedup();
                out.extend(seen);
            }
            base += plan.batches_per_rank() as u64;
        }
        Ok(out)
    }

    /// The step after the last start line's epoch ends: how far the recorded run reached at
    /// least (a run that stopped mid-epoch reached less).
    ///
    /// # Errors
    /// As [`Loader::plan`].
    pub fn steps_through_last_epoch<B: HostBuffer>(&self, loader: &Loader<B>) -> Result<u64> {
        let last = self.starts.iter().map(|s| s.epoch).max().unwrap_or(0);
        (0..=last).map(|e| loader.plan(e).map(|p| p.batches_per_rank() as u64)).sum()
    }
}

/// The global step at the start of `plan`'s remaining batches: every earlier epoch's steps
/// plus those consumed in this one.
pub(crate) fn step_at<B: HostBuffer>(loader: &Loader<B>, plan: &Plan) -> Result<u64> {
    let gb = plan.global_batch_size() as u64;
    let consumed = plan.checkpoint(0, 0).map_or(0, |s| s.samples_consumed_global);
    let mut step = consumed / gb.max(1);
    if loader.mixture_order().is_none() {
        // One dataset: every epoch has the same number of steps (no plan per earlier epoch,
        // which block shuffle would build in O(fragments) each).
        return Ok(step + plan.epoch() * loader.batches_per_epoch() as u64);
    }
    for e in 0..plan.epoch() {
        // A mixture's epochs differ in length after a change of the mix.
        step += loader.plan(e)?.batches_per_rank() as u64;
    }
    Ok(step)
}
