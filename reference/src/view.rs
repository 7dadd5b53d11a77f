//! Views: the answer of a query, saved by name as an immutable object bound to one version
//! (SPEC.md §"Views", VIEW-01 to VIEW-13).
//!
//! A view is `views/<name>.tsview`, an enveloped view record: the version it answers (the
//! manifest's key and the SHA-256 of the manifest's bytes, so a view copied from another
//! dataset is refused), the rows, the query text and a SHA-256 of the rows. The rows are stored
//! in one of two encodings `[VIEW-11]`: a list of row ids in answer order (envelope major 1,
//! at most 2^24 rows), or ascending row ids as maximal runs (major 2, at most 2^40 rows), which
//! a reader validates and indexes in O(runs) memory, never expanding them. Reading one runs
//! VAL-18 in order; [`Dataset::open_view`] then opens the pinned version.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::blocking::block_on;
use crate::dataset::{Dataset, decode_manifest};
use crate::envelope::{self, ObjectKind};
use crate::error::{Error, Result};
use crate::limits::{Limits, hard};
use crate::manifest::{Manifest, VersionRef};
use crate::paths;
use crate::store::{Created, Store};
use crate::writer::WriteOptions;

/// Rows of a list view located together in a fragment tree (memory per chunk, not per view).
const VIEW_LOCATE_CHUNK: usize = 4096;

/// Prefix of view objects.
pub const VIEWS_DIR: &str = "views";
/// Suffix of a view object's key.
pub const VIEW_SUFFIX: &str = ".tsview";
/// Envelope major version of a view whose rows are a list `[VIEW-11]`.
pub const MAJOR_LIST: u16 = 1;
/// Envelope major version of a view whose rows are runs `[VIEW-11]`.
pub const MAJOR_RUNS: u16 = 2;

/// A validated view: a saved query answer `[VIEW-02]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// The view's name (equals the key's).
    pub name: String,
    /// The answered version: the key of its manifest object, exactly (no base resolution).
    pub target: VersionRef,
    /// SHA-256 of the whole manifest object `target` names.
    pub manifest_sha256: [u8; 32],
    /// Creation time, ms since the Unix epoch.
    pub timestamp_ms: u64,
    /// The query text that produced the rows (free text, at most 64 KiB).
    pub query: String,
    /// SHA-256 of the rows as stored `[VIEW-04]`: of a list, each row id as 8 little-endian
    /// bytes; of runs, each run's start and length as 8 little-endian bytes each. The encoding
    /// is a function of the rows (VIEW-12), so equal rows have equal checksums.
    pub rows_sha256: [u8; 32],
    /// Global (live) row ids of the version, in answer order; no duplicates.
    pub rows: ViewRows,
}

/// One run of consecutive row ids, `start .. start + len` `[VIEW-11]`. Field order is the
/// encoding (§6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    /// The first row id.
    pub start: u64,
    /// The number of row ids (at least 1 in a valid view).
    pub len: u64,
}

/// Strictly ascending row ids as maximal runs: each run non-empty, and each starts more than one
/// past the previous one's end (VIEW-11). Row `k` is found in O(log runs); nothing is expanded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowRuns {
    runs: Vec<Run>,
    /// `ends[i]`: the number of rows in runs `0..=i`.
    ends: Vec<u64>,
}

impl RowRuns {
    /// Checks `runs` (VAL-18 step 12, first two checks): every run non-empty, then every run
    /// starting more than one past the end of the one before, and ending at most at 2^64 − 1.
    ///
    /// # Errors
    /// The reason, citing VIEW-11, when a check fails.
    pub fn new(runs: Vec<Run>) -> std::result::Result<Self, String> {
        if let Some(i) = runs.iter().position(|r| r.len == 0) {
            return Err(format!("run {i} is empty [VIEW-11]"));
        }
        let mut ends = Vec::with_capacity(runs.len());
        let mut total = 0u64;
        let mut next = 0u64; // the least start the next run may have
        for (i, r) in runs.iter().enumerate() {
            if i > 0 && r.start < next {
                return Err(format!(
                    "run {i} starts at row {} but must start after row {} (runs ascend and are neither \
                     overlapping nor adjacent) [VIEW-11]",
                    r.start,
                    next - 1
                ));
            }
            let end = r.start.checked_add(r.len).ok_or_else(|| format!("run {i} ends past row 2^64 - 1 [VIEW-11]"))?;
            // `end` ≤ 2^64 − 1 and runs are disjoint, so the total fits.
            total += r.len;
            ends.push(total);
            next = end.saturating_add(1);
        }
        Ok(Self { runs, ends })
    }

    /// The runs of strictly ascending `rows`; `None` if they do not ascend strictly.
    #[must_use]
    pub fn from_ascending(rows: &[u64]) -> Option<Self> {
        let mut runs: Vec<Run> = Vec::new();
        for &r in rows {
            match runs.last_mut() {
                Some(last) if r < last.start + last.len => return None,
                Some(last) if r == last.start + last.len => last.len += 1,
                _ => runs.push(Run { start: r, len: 1 }),
            }
        }
        // Ascending, non-empty, maximal and below 2^64 − 1 by construction, unless a row is 2^64 − 1.
        Self::new(runs).ok()
    }

    /// The runs.
    #[must_use]
    pub fn runs(&self) -> &[Run] {
        &self.runs
    }

    /// The number of rows.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.ends.last().copied().unwrap_or(0)
    }

    /// Whether there is no row.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// One past the greatest row id (0 when empty).
    #[must_use]
    pub fn end(&self) -> u64 {
        self.runs.last().map_or(0, |r| r.start + r.len)
    }

    /// Row `k` of the sequence, in O(log runs).
    #[must_use]
    pub fn get(&self, k: u64) -> Option<u64> {
        let i = self.ends.partition_point(|&e| e <= k);
        let r = self.runs.get(i)?;
        Some(r.start + (k - (self.ends[i] - r.len)))
    }

    /// The rows, in order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.runs.iter().flat_map(|r| r.start..r.start + r.len)
    }
}

/// A view's rows in one of its two encodings `[VIEW-11]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ViewRows {
    /// Row ids in answer order (major 1).
    List(Vec<u64>),
    /// Ascending row ids as runs (major 2).
    Runs(RowRuns),
}

impl ViewRows {
    /// The number of rows.
    #[must_use]
    pub fn len(&self) -> u64 {
        match self {
            Self::List(v) => v.len() as u64,
            Self::Runs(r) => r.len(),
        }
    }

    /// Whether there is no row.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `k` of the view: O(1) for a list, O(log runs) for runs.
    #[must_use]
    pub fn get(&self, k: u64) -> Option<u64> {
        match self {
            Self::List(v) => usize::try_from(k).ok().and_then(|k| v.get(k)).copied(),
            Self::Runs(r) => r.get(k),
        }
    }

    /// The rows, in the view's order.
    #[must_use]
    pub fn iter(&self) -> Box<dyn Iterator<Item = u64> + '_> {
        match self {
            Self::List(v) => Box::new(v.iter().copied()),
            Self::Runs(r) => Box::new(r.iter()),
        }
    }

    /// The rows in a vector (for callers that need one; a runs view may be far larger).
    #[must_use]
    pub fn to_vec(&self) -> Vec<u64> {
        match self {
            Self::List(v) => v.clone(),
            Self::Runs(r) => r.iter().collect(),
        }
    }

    /// The encoding a writer stores these rows in `[VIEW-12]`: runs when the rows ascend
    /// strictly and either are more than 2^24 or form fewer than half as many runs as rows;
    /// a list otherwise.
    ///
    /// # Errors
    /// `limit` for more than 2^24 rows that do not ascend strictly (no encoding holds them).
    pub fn canonical(self) -> Result<Self> {
        let (list, runs) = match self {
            Self::Runs(r) => (None, r),
            Self::List(v) => {
                let Some(r) = RowRuns::from_ascending(&v) else {
                    Error::check_limit(|| "view rows that do not ascend".into(), hard::MAX_VIEW_ROWS, v.len() as u64)?;
                    return Ok(Self::List(v));
                };
                (Some(v), r)
            }
        };
        let n = runs.len();
        if 2 * (runs.runs.len() as u64) < n || n > hard::MAX_VIEW_ROWS {
            Ok(Self::Runs(runs))
        } else {
            Ok(Self::List(list.unwrap_or_else(|| runs.iter().collect())))
        }
    }

    /// The SHA-256 of these rows as stored `[VIEW-04]`.
    #[must_use]
    pub fn digest(&self) -> [u8; 32] {
        match self {
            Self::List(v) => View::digest_rows(v),
            Self::Runs(r) => View::digest_runs(r.runs()),
        }
    }

    /// Every row id below `row_count`, none twice `[VIEW-06]`; the reason otherwise.
    fn check_against(&self, row_count: u64) -> std::result::Result<(), String> {
        match self {
            Self::List(v) => check_rows(v, row_count),
            Self::Runs(r) if r.end() > row_count => Err(format!(
                "the last run ends at row {}, not below the version's {row_count} rows [VIEW-06]",
                r.end() - 1
            )),
            Self::Runs(_) => Ok(()),
        }
    }
}

impl<'a> IntoIterator for &'a ViewRows {
    type Item = u64;
    type IntoIter = Box<dyn Iterator<Item = u64> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Collects an answer's row ids one at a time into [`ViewRows`], in O(runs) memory while they
/// ascend: a query over 10^9 rows whose answer is a few ranges never holds 10^9 ids. Rows
/// that stop ascending switch it to a list, bounded by the list limit (2^24).
#[derive(Debug, Default)]
pub struct ViewRowsBuilder {
    runs: Vec<Run>,
    list: Option<Vec<u64>>,
}

impl ViewRowsBuilder {
    /// Appends the next row id of the answer.
    ///
    /// # Errors
    /// `limit` when the rows do not ascend and are more than 2^24.
    pub fn push(&mut self, row: u64) -> Result<()> {
        let what = || "view rows that do not ascend".to_string();
        if let Some(list) = &mut self.list {
            Error::check_limit(what, hard::MAX_VIEW_ROWS, list.len() as u64 + 1)?;
            list.push(row);
            return Ok(());
        }
        match self.runs.last_mut() {
            Some(l) if u128::from(row) == u128::from(l.start) + u128::from(l.len) => l.len += 1,
            Some(l) if u128::from(row) < u128::from(l.start) + u128::from(l.len) => {
                let n: u64 = self.runs.iter().map(|r| r.len).sum();
                Error::check_limit(what, hard::MAX_VIEW_ROWS, n + 1)?;
                let mut list: Vec<u64> = self.runs.iter().flat_map(|r| r.start..r.start + r.len).collect();
                list.push(row);
                self.runs = Vec::new();
                self.list = Some(list);
            }
            _ => self.runs.push(Run { start: row, len: 1 }),
        }
        Ok(())
    }

    /// The rows, in the encoding a writer stores them in (VIEW-12).
    ///
    /// # Errors
    /// `usage` for a row id of 2^64 − 1 in an ascending answer (no version has that row);
    /// `limit` as [`ViewRows::canonical`].
    pub fn finish(self) -> Result<ViewRows> {
        match self.list {
            Some(list) => ViewRows::List(list).canonical(),
            None => ViewRows::Runs(RowRuns::new(self.runs).map_err(Error::usage)?).canonical(),
        }
    }
}

impl View {
    /// The SHA-256 of row ids as [`View::rows_sha256`] defines it for a list.
    #[must_use]
    pub fn digest_rows(rows: &[u64]) -> [u8; 32] {
        let mut h = Sha256::new();
        for chunk in rows.chunks(4096) {
            let bytes: Vec<u8> = chunk.iter().flat_map(|r| r.to_le_bytes()).collect();
            h.update(&bytes);
        }
        h.finalize().into()
    }

    /// The SHA-256 of runs as [`View::rows_sha256`] defines it for runs: each run's `start`,
    /// then its `len`, as 8 little-endian bytes each (the body's encoding of the runs, less
    /// their count).
    #[must_use]
    pub fn digest_runs(runs: &[Run]) -> [u8; 32] {
        let mut h = Sha256::new();
        for chunk in runs.chunks(4096) {
            let bytes: Vec<u8> =
                chunk.iter().flat_map(|r| [r.start.to_le_bytes(), r.len.to_le_bytes()]).flatten().collect();
            h.update(&bytes);
        }
        h.finalize().into()
    }

    /// Opens the version this view pins in `store`, checking the binding (the manifest's
    /// SHA-256 and the rows against its row count) again `[VIEW-05]`: a view read from one
    /// store opens only the same version in another.
    ///
    /// # Errors
    /// `invalid` when the store holds another manifest at the target's key, or none; any
    /// error opening the version.
    pub fn open_dataset(&self, store: &Store, limits: Limits) -> Result<Dataset> {
        let key = view_key(&self.name);
        let (manifest, crc) = load_target(store, &key, &self.target, &self.manifest_sha256, &limits)?;
        self.rows.check_against(manifest.row_count).map_err(|reason| Error::invalid(&key, reason))?;
        block_on(Dataset::from_manifest(store.clone(), manifest, crc, limits))
    }

    /// This view as a stored object (envelope and body), without a body limit: what a writer
    /// stores, and what tools that build views by hand edit through [`RawView`].
    ///
    /// # Errors
    /// Only if encoding fails, which it does not for this type.
    pub fn to_object(&self) -> Result<Vec<u8>> {
        RawView::from(self.clone()).to_object()
    }
}

/// A view record as stored, decoded but not validated (VAL-18 steps 2 to 4): what a reader
/// checks, and what tools that build faulty views edit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawView {
    /// `name`.
    pub name: String,
    /// `target`.
    pub target: VersionRef,
    /// `manifest_sha256`.
    pub manifest_sha256: [u8; 32],
    /// `timestamp_ms`.
    pub timestamp_ms: u64,
    /// `query`.
    pub query: String,
    /// `rows_sha256`.
    pub rows_sha256: [u8; 32],
    /// The rows as stored.
    pub rows: RawRows,
}

/// A view record's rows as stored, unchecked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RawRows {
    /// Major 1: `rows`.
    List(Vec<u64>),
    /// Major 2: the declared `row_count` and the `runs`.
    Runs {
        /// The declared number of rows.
        row_count: u64,
        /// The runs.
        runs: Vec<Run>,
    },
}

/// The body of a major 1 view (§22 `View`); field order is the encoding (§6).
#[derive(Serialize, Deserialize)]
struct ListBody {
    name: String,
    target: VersionRef,
    manifest_sha256: [u8; 32],
    timestamp_ms: u64,
    query: String,
    rows_sha256: [u8; 32],
    rows: Vec<u64>,
}

/// The body of a major 2 view (§22 `RunsView`); field order is the encoding (§6).
#[derive(Serialize, Deserialize)]
struct RunsBody {
    name: String,
    target: VersionRef,
    manifest_sha256: [u8; 32],
    timestamp_ms: u64,
    query: String,
    row_count: u64,
    rows_sha256: [u8; 32],
    runs: Vec<Run>,
}

impl From<View> for RawView {
    fn from(v: View) -> Self {
        let rows = match v.rows {
            ViewRows::List(rows) => RawRows::List(rows),
            ViewRows::Runs(r) => RawRows::Runs { row_count: r.len(), runs: r.runs },
        };
        Self {
            name: v.name,
            target: v.target,
            manifest_sha256: v.manifest_sha256,
            timestamp_ms: v.timestamp_ms,
            query: v.query,
            rows_sha256: v.rows_sha256,
            rows,
        }
    }
}

impl RawView {
    /// Runs VAL-18 steps 3 and 4 on a view object's bytes: the envelope, major 1 or 2, then
    /// the body of that major.
    ///
    /// # Errors
    /// `malformed`, `unsupported` (another major) or `limit` (body over `max_body`).
    pub fn decode(bytes: &[u8], max_body: u64, what: &str) -> Result<Self> {
        let (major, body) = envelope::open_raw(ObjectKind::View, bytes, max_body, what, &[MAJOR_LIST, MAJOR_RUNS])?;
        let what = format!("{what} (view)");
        Ok(if major == MAJOR_LIST {
            let b: ListBody = envelope::decode_body(body, &what)?;
            Self {
                name: b.name,
                target: b.target,
                manifest_sha256: b.manifest_sha256,
                timestamp_ms: b.timestamp_ms,
                query: b.query,
                rows_sha256: b.rows_sha256,
                rows: RawRows::List(b.rows),
            }
        } else {
            let b: RunsBody = envelope::decode_body(body, &what)?;
            Self {
                name: b.name,
                target: b.target,
                manifest_sha256: b.manifest_sha256,
                timestamp_ms: b.timestamp_ms,
                query: b.query,
                rows_sha256: b.rows_sha256,
                rows: RawRows::Runs { row_count: b.row_count, runs: b.runs },
            }
        })
    }

    /// The major version and body this record encodes to.
    ///
    /// # Errors
    /// Only if encoding fails, which it does not for these types.
    fn encode(self) -> Result<(u16, Vec<u8>)> {
        match self.rows {
            RawRows::List(rows) => Ok((
                MAJOR_LIST,
                envelope::encode_body(&ListBody {
                    name: self.name,
                    target: self.target,
                    manifest_sha256: self.manifest_sha256,
                    timestamp_ms: self.timestamp_ms,
                    query: self.query,
                    rows_sha256: self.rows_sha256,
                    rows,
                })?,
            )),
            RawRows::Runs { row_count, runs } => Ok((
                MAJOR_RUNS,
                envelope::encode_body(&RunsBody {
                    name: self.name,
                    target: self.target,
                    manifest_sha256: self.manifest_sha256,
                    timestamp_ms: self.timestamp_ms,
                    query: self.query,
                    row_count,
                    rows_sha256: self.rows_sha256,
                    runs,
                })?,
            )),
        }
    }

    /// The stored object: envelope of the rows' major version, body and CRC; no body limit.
    ///
    /// # Errors
    /// Only if encoding fails, which it does not for these types.
    pub fn to_object(self) -> Result<Vec<u8>> {
        let (major, body) = self.encode()?;
        Ok(envelope::frame_major(ObjectKind::View, major, &body))
    }
}

/// The key of a view object.
#[must_use]
pub fn view_key(name: &str) -> String {
    format!("{VIEWS_DIR}/{name}{VIEW_SUFFIX}")
}

/// Checks a view name supplied by a caller: the branch and tag grammar `[VIEW-01]`.
fn check_name(name: &str) -> Result<()> {
    paths::validate_ref_name(name).map_err(|_| {
        Error::usage(format!("{name:?} is not a valid view name (1..=64 of [A-Za-z0-9._-], not starting with '.')"))
    })
}

/// The hard and configured body limit of a view: the segment body limit `[VIEW-03]`.
fn max_body(limits: &Limits) -> u64 {
    limits.max_segment_body()
}

/// Reads view `name` and runs VAL-18 on it; returns it with its target manifest and that
/// manifest's envelope CRC.
fn read_view(store: &Store, name: &str, limits: &Limits) -> Result<(View, Manifest, u32)> {
    block_on(read_view_async(store, name, limits))
}

/// [`read_view`] as a `Send` future on the caller's runtime.
async fn read_view_async(store: &Store, name: &str, limits: &Limits) -> Result<(View, Manifest, u32)> {
    check_name(name)?;
    let key = view_key(name);
    let bytes = store.get_bounded_async(&key, envelope::max_object_len(max_body(limits))).await?;
    let raw = RawView::decode(&bytes, max_body(limits), &key)?;
    if raw.name != name {
        return Err(Error::invalid(&key, format!("view record names {:?} [VIEW-04]", raw.name)));
    }
    if paths::validate_ref_name(&raw.target.branch).is_err() || raw.target.version == 0 {
        return Err(Error::invalid(&key, "target is not a valid branch and version [VIEW-04]"));
    }
    Error::check_limit(|| format!("{key}: query bytes"), hard::MAX_METADATA_VALUE_BYTES, raw.query.len() as u64)?;
    let digest = match &raw.rows {
        RawRows::List(rows) => {
            Error::check_limit(|| format!("{key}: rows"), hard::MAX_VIEW_ROWS, rows.len() as u64)?;
            View::digest_rows(rows)
        }
        RawRows::Runs { row_count, runs } => {
            Error::check_limit(|| format!("{key}: row_count"), hard::MAX_VIEW_RUN_ROWS, *row_count)?;
            View::digest_runs(runs)
        }
    };
    if digest != raw.rows_sha256 {
        return Err(Error::invalid(&key, "rows_sha256 differs from the SHA-256 of the rows [VIEW-04]"));
    }
    let (manifest, crc) = load_target_async(store, &key, &raw.target, &raw.manifest_sha256, limits).await?;
    let rows = match raw.rows {
        RawRows::List(rows) => ViewRows::List(rows),
        RawRows::Runs { row_count, runs } => {
            let runs = RowRuns::new(runs).map_err(|reason| Error::invalid(&key, reason))?;
            if runs.len() != row_count {
                return Err(Error::invalid(
                    &key,
                    format!("the runs hold {} rows, row_count says {row_count} [VIEW-11]", runs.len()),
                ));
            }
            ViewRows::Runs(runs)
        }
    };
    rows.check_against(manifest.row_count).map_err(|reason| Error::invalid(&key, reason))?;
    let view = View {
        name: raw.name,
        target: raw.target,
        manifest_sha256: raw.manifest_sha256,
        timestamp_ms: raw.timestamp_ms,
        query: raw.query,
        rows_sha256: raw.rows_sha256,
        rows,
    };
    Ok((view, manifest, crc))
}

/// VAL-18 steps 9 to 11 for view `key`: its target manifest, checked, hashed and compared;
/// returns the manifest and its envelope CRC. The blocking facade of [`load_target_async`].
pub(crate) fn load_target(
    store: &Store,
    key: &str,
    target: &VersionRef,
    manifest_sha256: &[u8; 32],
    limits: &Limits,
) -> Result<(Manifest, u32)> {
    crate::blocking::block_on(load_target_async(store, key, target, manifest_sha256, limits))
}

/// [`load_target`] as a `Send` future on the caller's runtime.
pub(crate) async fn load_target_async(
    store: &Store,
    key: &str,
    target: &VersionRef,
    manifest_sha256: &[u8; 32],
    limits: &Limits,
) -> Result<(Manifest, u32)> {
    let mkey = paths::manifest_key(&target.branch, target.version);
    // A view names a stored manifest exactly; a missing one means a damaged or foreign view.
    let manifest_bytes = store
        .get_bounded_async(&mkey, envelope::max_object_len(limits.max_manifest_body()))
        .await
        .map_err(|e| match e {
            Error::NotFound { .. } => Error::invalid(key, format!("target {mkey} does not exist [VIEW-05]")),
            other => other,
        })?;
    let manifest = decode_manifest(&manifest_bytes, &target.branch, target.version, limits)?;
    if <[u8; 32]>::from(Sha256::digest(&manifest_bytes)) != *manifest_sha256 {
        return Err(Error::invalid(
            key,
            format!("{mkey} is not the manifest the view was saved from (another dataset?) [VIEW-05]"),
        ));
    }
    Ok((manifest, envelope::stored_crc(&manifest_bytes)))
}

/// Every row id below `row_count`, none twice `[VIEW-06]`; the reason otherwise.
fn check_rows(rows: &[u64], row_count: u64) -> std::result::Result<(), String> {
    if let Some((i, r)) = rows.iter().enumerate().find(|(_, r)| **r >= row_count) {
        return Err(format!("row id {r} at position {i} is not below the version's {row_count} rows [VIEW-06]"));
    }
    let mut sorted = rows.to_vec();
    sorted.sort_unstable();
    if let Some(&[r, _]) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("row id {r} is listed twice [VIEW-06]"));
    }
    Ok(())
}

impl Dataset {
    /// Saves `rows` of this version, in this order, as view `name` `[VIEW-07]`, with the query
    /// that produced them; the clock is the creation time.
    ///
    /// # Errors
    /// As [`Dataset::save_view_rows_with`].
    pub fn save_view(&self, name: &str, rows: &[u64], query: &str) -> Result<View> {
        self.save_view_with(name, rows, query, &WriteOptions::default())
    }

    /// As [`Dataset::save_view`], taking the creation time from `options` (for byte-stable
    /// output).
    ///
    /// # Errors
    /// As [`Dataset::save_view_rows_with`].
    pub fn save_view_with(&self, name: &str, rows: &[u64], query: &str, options: &WriteOptions) -> Result<View> {
        self.save_view_rows_with(name, ViewRows::List(rows.to_vec()), query, options)
    }

    /// Saves `rows`, given as a list or as runs, as view `name` `[VIEW-07]`, stored in the
    /// encoding VIEW-12 picks for them (runs for long ascending answers, so a filter over
    /// 10^9 rows saves without a list of 10^9 ids).
    ///
    /// # Errors
    /// `usage` for a bad name, a row id out of range or listed twice; `limit` for more rows
    /// than the encoding allows (2^24 unordered, 2^40 ascending), a query over 64 KiB or a body
    /// over the view body limit; `conflict` if another view has the name; `unsupported` for a
    /// store without create-if-absent.
    pub fn save_view_rows_with(&self, name: &str, rows: ViewRows, query: &str, options: &WriteOptions) -> Result<View> {
        block_on(self.save_view_rows_with_async(name, rows, query, options))
    }

    /// [`Dataset::save_view`] as a `Send` future on the caller's runtime.
    ///
    /// # Errors
    /// As [`Dataset::save_view_rows_with`].
    pub async fn save_view_async(&self, name: &str, rows: &[u64], query: &str) -> Result<View> {
        self.save_view_rows_with_async(name, ViewRows::List(rows.to_vec()), query, &WriteOptions::default()).await
    }

    /// [`Dataset::save_view_rows_with`] as a `Send` future on the caller's runtime.
    ///
    /// # Errors
    /// As [`Dataset::save_view_rows_with`].
    pub async fn save_view_rows_with_async(
        &self,
        name: &str,
        rows: ViewRows,
        query: &str,
        options: &WriteOptions,
    ) -> Result<View> {
        check_name(name)?;
        let key = view_key(name);
        Error::check_limit(|| format!("{key}: query bytes"), hard::MAX_METADATA_VALUE_BYTES, query.len() as u64)?;
        let rows = rows.canonical()?;
        if let ViewRows::Runs(r) = &rows {
            Error::check_limit(|| format!("{key}: rows"), hard::MAX_VIEW_RUN_ROWS, r.len())?;
        }
        rows.check_against(self.row_count()).map_err(|reason| Error::usage(format!("view {name:?}: {reason}")))?;
        let view = View {
            name: name.to_string(),
            target: VersionRef { branch: self.branch().to_string(), version: self.version() },
            manifest_sha256: self.manifest_sha256_async().await?,
            timestamp_ms: options.timestamp(),
            query: query.to_string(),
            rows_sha256: rows.digest(),
            rows,
        };
        let max = max_body(&self.limits().tightest(&options.limits));
        let (major, body) = RawView::from(view.clone()).encode()?;
        Error::check_limit(|| format!("{key} (view): body length [LIM-05]"), max, body.len() as u64)?;
        let bytes = Bytes::from(envelope::frame_major(ObjectKind::View, major, &body));
        match self.store().put_if_absent_async(&key, bytes.clone()).await? {
            Created::New => Ok(view),
            Created::Existed => {
                // Our own earlier attempt may have landed before a retry: identical bytes are
                // ours.
                let there =
                    self.store().get_bounded_async(&key, envelope::max_object_len(max_body(self.limits()))).await?;
                if there == bytes { Ok(view) } else { Err(Error::Conflict { what: format!("view {name:?} exists") }) }
            }
        }
    }

    /// The SHA-256 of this version's manifest object, which views and vector indexes bind to
    /// (VIEW-02, ANN-02); the object is read again and must be the one this dataset opened.
    pub(crate) fn manifest_sha256(&self) -> Result<[u8; 32]> {
        block_on(self.manifest_sha256_async())
    }

    /// [`Dataset::manifest_sha256`] as a `Send` future on the caller's runtime.
    pub(crate) async fn manifest_sha256_async(&self) -> Result<[u8; 32]> {
        let target = paths::manifest_key(self.branch(), self.version());
        let bytes = self
            .store()
            .get_bounded_async(&target, envelope::max_object_len(self.limits().max_manifest_body()))
            .await?;
        if envelope::stored_crc(&bytes) != self.manifest_crc32() {
            return Err(Error::invalid(&target, "the manifest differs from the one this dataset opened [LAY-06]"));
        }
        Ok(Sha256::digest(&bytes).into())
    }

    /// Reads and validates view `name` of this dataset (VAL-18); the view may pin any
    /// version, not only this one.
    ///
    /// # Errors
    /// `usage` for a bad name, `not_found` for an absent view; `malformed`, `invalid`,
    /// `limit` or `unsupported` for a damaged view or one bound to another dataset.
    pub fn view(&self, name: &str) -> Result<View> {
        read_view(self.store(), name, self.limits()).map(|(v, _, _)| v)
    }

    /// The view names of the dataset, sorted; keys under `views/` that are not
    /// `<valid name>.tsview` are ignored `[VIEW-01]`.
    ///
    /// # Errors
    /// Storage errors.
    pub fn views(&self) -> Result<Vec<String>> {
        let mut v: Vec<String> = self
            .store()
            .list(VIEWS_DIR)?
            .into_iter()
            .filter_map(|(n, _)| n.strip_suffix(VIEW_SUFFIX).map(str::to_string))
            .filter(|n| check_name(n).is_ok())
            .collect();
        v.sort();
        Ok(v)
    }

    /// Deletes view `name` `[VIEW-09]`. No version changes; a loader state bound to the view
    /// cannot be resumed afterwards.
    ///
    /// # Errors
    /// `usage` for a bad name; `not_found` if there is no such view; `io` on failure.
    pub fn delete_view(&self, name: &str) -> Result<()> {
        check_name(name)?;
        let file = format!("{name}{VIEW_SUFFIX}");
        if !self.store().list(VIEWS_DIR)?.iter().any(|(n, _)| *n == file) {
            return Err(Error::NotFound { what: format!("view {name:?}") });
        }
        self.store().delete(&view_key(name))
    }

    /// Opens the version view `name` pins, after validating the view (VAL-18), and returns
    /// it with the view. Later commits do not change what it opens `[VIEW-05]`.
    ///
    /// # Errors
    /// As [`Dataset::view`], and any error opening the version (VAL-07 onwards).
    pub fn open_view(store: &Store, name: &str, limits: Limits) -> Result<(Dataset, View)> {
        block_on(Self::open_view_async(store, name, limits))
    }

    /// [`Dataset::open_view`] as a `Send` future on the caller's runtime.
    ///
    /// # Errors
    /// As [`Dataset::open_view`].
    pub async fn open_view_async(store: &Store, name: &str, limits: Limits) -> Result<(Dataset, View)> {
        let (view, manifest, crc) = read_view_async(store, name, &limits).await?;
        if manifest.reader_flags & crate::manifest::READER_FLAG_FRAGMENT_TREE == 0 {
            let ds = Dataset::from_manifest(store.clone(), manifest, crc, limits).await?;
            return Ok((ds, view));
        }
        // Reading some rows of a fragment tree reads only the nodes on the paths to them
        // [VAL-19, TREE-07]: the fragments holding the view's rows, found one run at a time.
        let tree = crate::tree::FragmentTree::open_async(store, &manifest, limits.clone()).await?;
        let mut found: std::collections::BTreeMap<u64, crate::dataset::FragmentInfo> =
            std::collections::BTreeMap::new();
        match &view.rows {
            ViewRows::List(rows) => {
                // Ascending, in chunks located together (one round trip per level each), rows
                // of a fragment already found skipped.
                let mut sorted = rows.clone();
                sorted.sort_unstable();
                for chunk in sorted.chunks(VIEW_LOCATE_CHUNK) {
                    let wanted: Vec<u64> = chunk
                        .iter()
                        .copied()
                        .filter(|r| !found.range(..=*r).next_back().is_some_and(|(_, f)| f.rows().contains(r)))
                        .collect();
                    for (_, info) in tree.locate_many_indexed_async(&wanted).await? {
                        found.entry(info.first_row).or_insert(info);
                    }
                }
            }
            ViewRows::Runs(runs) => {
                for run in runs.runs() {
                    let (mut row, end) = (run.start, run.start + run.len);
                    while row < end {
                        let info = match found.range(..=row).next_back() {
                            Some((_, f)) if f.rows().contains(&row) => f.clone(),
                            _ => {
                                let mut one = tree.locate_many_indexed_async(&[row]).await?;
                                one.pop().map(|(_, info)| info).ok_or_else(|| Error::usage("no fragment found"))?
                            }
                        };
                        row = info.rows().end;
                        found.insert(info.first_row, info);
                    }
                }
            }
        }
        let ds = Dataset::from_located(store.clone(), manifest, crc, found.into_values().collect(), limits)?;
        Ok((ds, view))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_out_of_range_or_repeated_are_refused() {
        assert!(check_rows(&[2, 0, 1], 3).is_ok());
        assert!(check_rows(&[], 0).is_ok());
        assert!(check_rows(&[3], 3).unwrap_err().contains("not below"));
        assert!(check_rows(&[1, 0, 1], 3).unwrap_err().contains("twice"));
    }

    #[test]
    fn the_row_digest_is_sha256_of_little_endian_ids() {
        let expected: [u8; 32] = Sha256::digest([1u8, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]).into();
        assert_eq!(View::digest_rows(&[1, 2]), expected);
        // Chunking does not change the digest.
        let many: Vec<u64> = (0..10_000).collect();
        let flat: Vec<u8> = many.iter().flat_map(|r| r.to_le_bytes()).collect();
        assert_eq!(View::digest_rows(&many), <[u8; 32]>::from(Sha256::digest(&flat)));
    }

    fn runs(pairs: &[(u64, u64)]) -> std::result::Result<RowRuns, String> {
        RowRuns::new(pairs.iter().map(|&(start, len)| Run { start, len }).collect())
    }

    #[test]
    fn runs_must_be_non_empty_ascending_and_apart() {
        assert!(runs(&[]).unwrap().is_empty());
        assert!(runs(&[(0, 3), (4, 2)]).is_ok());
        assert!(runs(&[(0, 3), (4, 0)]).unwrap_err().contains("empty"));
        for bad in [&[(0, 3), (2, 3)][..], &[(4, 2), (0, 3)], &[(0, 3), (3, 2)], &[(5, 1), (5, 1)]] {
            assert!(runs(bad).unwrap_err().contains("must start after"), "{bad:?}");
        }
        assert!(runs(&[(u64::MAX - 1, 2)]).unwrap_err().contains("past row"));
        assert!(runs(&[(u64::MAX - 1, 1)]).is_ok());
    }

    #[test]
    fn runs_index_and_iterate_like_the_rows_they_hold() {
        let r = runs(&[(3, 2), (7, 1), (10, 4)]).unwrap();
        let rows: Vec<u64> = r.iter().collect();
        assert_eq!(rows, vec![3, 4, 7, 10, 11, 12, 13]);
        assert_eq!((r.len(), r.end()), (7, 14));
        for (k, &row) in rows.iter().enumerate() {
            assert_eq!(r.get(k as u64), Some(row), "row {k}");
        }
        assert_eq!(r.get(7), None);
        assert_eq!(RowRuns::from_ascending(&rows), Some(r));
        assert_eq!(RowRuns::from_ascending(&[1, 1]), None);
        assert_eq!(RowRuns::from_ascending(&[2, 1]), None);
        // 10^9 rows in 10^4 runs: indexed without a row list.
        let big = RowRuns::new((0..10_000u64).map(|i| Run { start: i * 200_000, len: 100_000 }).collect()).unwrap();
        assert_eq!(big.len(), 1_000_000_000);
        assert_eq!(big.get(999_999_999), Some(9_999 * 200_000 + 99_999));
        assert_eq!(big.get(100_000), Some(200_000));
    }

    #[test]
    fn the_builder_keeps_runs_while_rows_ascend() {
        let build = |rows: &[u64]| {
            let mut b = ViewRowsBuilder::default();
            rows.iter().try_for_each(|&r| b.push(r)).unwrap();
            b.finish().unwrap()
        };
        assert_eq!(build(&[0, 1, 2, 4, 5]), ViewRows::Runs(runs(&[(0, 3), (4, 2)]).unwrap()));
        assert_eq!(build(&[0, 2, 4]), ViewRows::List(vec![0, 2, 4]), "runs would not be smaller");
        assert_eq!(build(&[0, 1, 2, 1]), ViewRows::List(vec![0, 1, 2, 1]), "duplicates are left to the writer");
        assert_eq!(build(&[5, 6, 7, 0]), ViewRows::List(vec![5, 6, 7, 0]));
        assert_eq!(build(&[]), ViewRows::List(vec![]));
    }

    #[test]
    fn the_runs_digest_is_sha256_of_little_endian_starts_and_lengths() {
        let expected: [u8; 32] = Sha256::digest([[4u8, 0, 0, 0, 0, 0, 0, 0], [2, 0, 0, 0, 0, 0, 0, 0]].concat()).into();
        assert_eq!(View::digest_runs(&[Run { start: 4, len: 2 }]), expected);
        assert_ne!(View::digest_runs(&[Run { start: 4, len: 2 }]), View::digest_rows(&[4, 5]));
    }

    #[test]
    fn both_encodings_round_trip_through_their_major_version() {
        let v = View {
            name: "v".into(),
            target: VersionRef { branch: "main".into(), version: 2 },
            manifest_sha256: [1; 32],
            timestamp_ms: 3,
            query: "q".into(),
            rows_sha256: [2; 32],
            rows: ViewRows::Runs(runs(&[(0, 3)]).unwrap()),
        };
        let object = v.to_object().unwrap();
        assert_eq!(object[8], 2);
        let raw = RawView::decode(&object, 1 << 20, "k").unwrap();
        assert_eq!(raw, RawView::from(v.clone()));
        let list = View { rows: ViewRows::List(vec![2, 0]), ..v };
        let object = list.to_object().unwrap();
        assert_eq!(object[8], 1);
        assert_eq!(RawView::decode(&object, 1 << 20, "k").unwrap().rows, RawRows::List(vec![2, 0]));
        let mut future = object.clone();
        future[8] = 3;
        assert_eq!(RawView::decode(&future, 1 << 20, "k").unwrap_err().class(), crate::ErrorClass::Unsupported);
    }
}
