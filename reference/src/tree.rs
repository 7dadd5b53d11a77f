//! The fragment tree: a version's fragments as a balanced tree of bounded index nodes
//! (SPEC.md §"The fragment tree", TREE-01 to TREE-09, reader flag `FRAGMENT_TREE`).
//!
//! The fragment log (`segment_log.rs`) must be read whole to know any fragment, so opening a
//! version costs O(fragments) bytes on every reader. A tree bounds every object and every path:
//! leaves list fragments in id order, inner nodes list their children with the id range, the
//! fragment and row counts (physical and live) and statistics of each subtree. A reader finds
//! global row `r` or fragment `id` by reading O(depth) nodes ([`FragmentTree::locate`],
//! [`FragmentTree::fragment`]); a commit rewrites only the nodes on the paths to what it changes
//! ([`apply`]), copy-on-write, so it writes O(change + depth) bytes and shares every other node
//! with the versions before it.
//!
//! Nodes are content-named (`index/<sha256>.tsn`) and immutable like every other object.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::blocking::block_on;
use crate::dataset::{FragmentInfo, referenced};
use crate::envelope::{self, ObjectKind};
use crate::error::{Error, Result};
use crate::limits::{Limits, hard};
use crate::manifest::{ColumnStats, Fragment, Manifest, SegmentRef};
use crate::paths;
use crate::schema::Schema;
use crate::stats;
use crate::store::Store;

/// Node body bytes a writer aims at unless told otherwise: small enough that a reader looking
/// rows up at random reads little per row (about one leaf each) and a commit rewriting one path
/// of a three-level tree writes under 200 KiB, large enough that 10^8 fragments fit in three
/// levels (about 430 fragment entries per leaf, about a thousand children per inner node).
/// Measured by the `scale` bench: at 10^9 rows, 64 KiB nodes cut what a rank reads before its
/// first batch from 86 MB to 28 MB against 256 KiB.
pub const DEFAULT_NODE_BYTES: u64 = 64 << 10;

/// Body bytes of a node besides its entries: `level` and the lengths of its two lists.
const NODE_FIXED: u64 = 4 + 8 + 8;

/// Node reads [`FragmentTree::locate_many`] and [`FragmentTree::for_each`] keep in flight at
/// once.
pub const CONCURRENT_NODE_READS: usize = 32;

/// Leaves [`FragmentTree::for_each`] reads together (about 16 MiB of 64 KiB nodes).
pub const WALK_CHUNK: usize = 256;

/// Bytes of decoded nodes a [`FragmentTree`] keeps by default.
pub const DEFAULT_NODE_CACHE_BYTES: u64 = 64 << 20;

/// The body of an index node (`.tsn`) `[TREE-01]`.
///
/// A leaf (`level` 0) lists fragments; an inner node lists its children, one level down.
/// Exactly one of the two lists is non-empty `[TREE-04]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexNode {
    /// 0 for a leaf; a child's level is its parent's minus one.
    pub level: u32,
    /// Leaf: the fragments, strictly ascending by id.
    pub fragments: Vec<Fragment>,
    /// Inner node: the subtrees, in ascending id order.
    pub children: Vec<NodeRef>,
}

/// A reference from an inner node to a child, with a summary of the child's subtree
/// `[TREE-05]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeRef {
    /// Relative path of the child node.
    pub path: String,
    /// Exact size in bytes.
    pub size: u64,
    /// The object's stored envelope CRC (its last four bytes).
    pub crc32: u32,
    /// Smallest fragment id in the subtree.
    pub first_id: u64,
    /// Largest fragment id in the subtree.
    pub last_id: u64,
    /// Fragments in the subtree (≥ 1).
    pub fragment_count: u64,
    /// Physical rows of the subtree's fragments.
    pub row_count: u64,
    /// Live rows of the subtree's fragments (deletions subtracted).
    pub live_row_count: u64,
    /// Statistics over the subtree's fragments, merged as for the manifest `[STAT-06]`.
    pub stats: Vec<ColumnStats>,
}

/// What a node holds, computed from its entries: compared with what its reference says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Smallest fragment id.
    pub first_id: u64,
    /// Largest fragment id.
    pub last_id: u64,
    /// Fragments.
    pub fragment_count: u64,
    /// Physical rows.
    pub row_count: u64,
    /// Live rows.
    pub live_row_count: u64,
}

impl NodeRef {
    fn summary(&self) -> Summary {
        Summary {
            first_id: self.first_id,
            last_id: self.last_id,
            fragment_count: self.fragment_count,
            row_count: self.row_count,
            live_row_count: self.live_row_count,
        }
    }
}

impl IndexNode {
    /// Checks a decoded node on its own (everything but its reference) and returns what it
    /// holds `[TREE-03]`, `[TREE-04]`: its level against the one expected (a child's is its
    /// parent's minus one; the root's is anything up to the limit), the non-empty list its
    /// level calls for, and its entries.
    ///
    /// # Errors
    /// `limit` for a level over LIM-17 or a fragment over LIM-10 or a path over LIM-12;
    /// `invalid` for the first other broken rule.
    pub fn validate(&self, expected_level: Option<u32>, next_fragment_id: u64, what: &str) -> Result<Summary> {
        Error::check_limit(|| format!("{what}: level [LIM-17]"), hard::MAX_TREE_LEVEL, u64::from(self.level))?;
        if expected_level.is_some_and(|l| l != self.level) {
            return Err(Error::invalid(what, "level is not one less than its parent's [TREE-03]"));
        }
        let overflow = || Error::invalid(what, "row counts overflow");
        if self.level == 0 {
            if !self.children.is_empty() || self.fragments.is_empty() {
                return Err(Error::invalid(what, "a leaf lists one or more fragments and no children [TREE-04]"));
            }
            let (mut rows, mut live) = (0u64, 0u64);
            for (i, f) in self.fragments.iter().enumerate() {
                f.validate_entry(&format!("{what}: fragment {}", f.id))?;
                if i > 0 && self.fragments[i - 1].id >= f.id {
                    return Err(Error::invalid(what, "fragment ids must ascend [TREE-04]"));
                }
                rows = rows.checked_add(f.row_count).ok_or_else(overflow)?;
                live = live.checked_add(f.live_rows()).ok_or_else(overflow)?;
            }
            let (first, last) = (self.fragments[0].id, self.fragments[self.fragments.len() - 1].id);
            if last >= next_fragment_id {
                return Err(Error::invalid(what, "a fragment id is not below next_fragment_id [TREE-04]"));
            }
            return Ok(Summary {
                first_id: first,
                last_id: last,
                fragment_count: self.fragments.len() as u64,
                row_count: rows,
                live_row_count: live,
            });
        }
        if !self.fragments.is_empty() || self.children.is_empty() {
            return Err(Error::invalid(what, "an inner node lists one or more children and no fragments [TREE-04]"));
        }
        let (mut count, mut rows, mut live) = (0u64, 0u64, 0u64);
        for (i, c) in self.children.iter().enumerate() {
            paths::validate_relative(&c.path, what)?;
            let span = c.last_id.checked_sub(c.first_id).map(|d| d.saturating_add(1));
            if c.fragment_count == 0 || span.is_none_or(|s| c.fragment_count > s) || c.live_row_count > c.row_count {
                return Err(Error::invalid(
                    what,
                    format!("child {i}: counts or id range impossible for its subtree [TREE-04]"),
                ));
            }
            if i > 0 && self.children[i - 1].last_id >= c.first_id {
                return Err(Error::invalid(what, "children's id ranges must ascend without overlap [TREE-04]"));
            }
            count = count.checked_add(c.fragment_count).ok_or_else(overflow)?;
            rows = rows.checked_add(c.row_count).ok_or_else(overflow)?;
            live = live.checked_add(c.live_row_count).ok_or_else(overflow)?;
        }
        let (first, last) = (self.children[0].first_id, self.children[self.children.len() - 1].last_id);
        if last >= next_fragment_id {
            return Err(Error::invalid(what, "a fragment id is not below next_fragment_id [TREE-04]"));
        }
        Ok(Summary { first_id: first, last_id: last, fragment_count: count, row_count: rows, live_row_count: live })
    }
}

/// A decoded, validated node and what it holds.
#[derive(Debug)]
struct Loaded {
    node: IndexNode,
    summary: Summary,
    /// Body bytes, what the cache is charged.
    bytes: u64,
}

/// Decoded nodes by path, least recently used first out, within a byte bound.
#[derive(Debug, Default)]
struct NodeCache {
    map: HashMap<String, (Arc<Loaded>, u64)>,
    clock: u64,
    bytes: u64,
}

impl NodeCache {
    fn get(&mut self, path: &str) -> Option<Arc<Loaded>> {
        self.clock += 1;
        let clock = self.clock;
        self.map.get_mut(path).map(|(n, used)| {
            *used = clock;
            n.clone()
        })
    }

    fn insert(&mut self, path: &str, node: Arc<Loaded>, bound: u64) {
        self.clock += 1;
        self.bytes += node.bytes;
        if let Some((old, _)) = self.map.insert(path.to_string(), (node, self.clock)) {
            self.bytes -= old.bytes;
        }
        while self.bytes > bound && self.map.len() > 1 {
            let Some(oldest) = self.map.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| k.clone()) else {
                break;
            };
            if let Some((n, _)) = self.map.remove(&oldest) {
                self.bytes -= n.bytes;
            }
        }
    }
}

/// Where a node hangs in the tree: what its reader must check it against.
#[derive(Clone, Debug)]
enum Parent<'a> {
    /// The root, referenced by the manifest's one `SegmentRef` `[TREE-02]`.
    Root { sref: &'a SegmentRef, live_rows: u64 },
    /// A child of an inner node at `level + 1`.
    Child { nref: &'a NodeRef, level: u32 },
}

/// A version's fragment tree, read lazily: the root at open, every other node when a lookup
/// first needs it, each validated when it is read and kept in a bounded cache.
#[derive(Debug)]
pub struct FragmentTree {
    store: Store,
    root: Option<(SegmentRef, Arc<Loaded>)>,
    next_fragment_id: u64,
    limits: Limits,
    cache: Mutex<NodeCache>,
    cache_bytes: u64,
    /// Nodes some caller is reading now: another caller that wants one waits for it instead
    /// of reading it again (many loader threads descend at once at the start of an epoch).
    in_flight: Mutex<HashSet<String>>,
    landed: tokio::sync::Notify,
    reads: AtomicU64,
}

/// Where [`FragmentTree::locate_many_indexed`] is with one row: the node it is in, its offset
/// among the node's live rows, and the live rows and fragments before the node.
struct At {
    node: Arc<Loaded>,
    offset: u64,
    rows_before: u64,
    fragments_before: u64,
}

/// A node to read and its parent's level.
type Wanted = (NodeRef, u32);

impl FragmentTree {
    /// The tree of a version without fragments (what a writer builds a first tree on).
    fn empty(store: &Store, limits: &Limits) -> Self {
        FragmentTree {
            store: store.clone(),
            root: None,
            next_fragment_id: u64::MAX,
            limits: limits.clone(),
            cache: Mutex::default(),
            cache_bytes: 0,
            in_flight: Mutex::default(),
            landed: tokio::sync::Notify::new(),
            reads: AtomicU64::new(0),
        }
    }

    /// Opens the tree of a manifest that sets `FRAGMENT_TREE`: reads and checks the root node
    /// only `[TREE-02]`, `[TREE-06]`.
    ///
    /// # Errors
    /// `invalid` for a manifest with several `segments` entries or a root that disagrees with
    /// its reference or with the manifest's `row_count`; storage and envelope errors.
    pub fn open(store: &Store, manifest: &Manifest, limits: Limits) -> Result<Self> {
        block_on(Self::open_async(store, manifest, limits))
    }

    /// As [`FragmentTree::open`] (async).
    ///
    /// # Errors
    /// As [`FragmentTree::open`].
    pub async fn open_async(store: &Store, manifest: &Manifest, limits: Limits) -> Result<Self> {
        let mut tree = Self {
            store: store.clone(),
            root: None,
            next_fragment_id: manifest.next_fragment_id,
            limits,
            cache: Mutex::default(),
            cache_bytes: DEFAULT_NODE_CACHE_BYTES,
            in_flight: Mutex::default(),
            landed: tokio::sync::Notify::new(),
            reads: AtomicU64::new(0),
        };
        match manifest.segments.as_slice() {
            [] if manifest.row_count == 0 => {}
            [] => {
                return Err(Error::invalid(
                    paths::manifest_key(&manifest.branch, manifest.version),
                    format!("an empty tree holds 0 live rows, manifest says {} [MAN-06]", manifest.row_count),
                ));
            }
            [sref] => {
                let root = tree.fetch(&sref.path, &Parent::Root { sref, live_rows: manifest.row_count }, true).await?;
                tree.root = Some((sref.clone(), root));
            }
            _ => {
                return Err(Error::invalid(
                    paths::manifest_key(&manifest.branch, manifest.version),
                    "a fragment tree has at most one root: segments lists more than one [TREE-06]",
                ));
            }
        }
        Ok(tree)
    }

    /// Opens a version of a dataset lazily: resolves it and reads its manifest (with every
    /// check of VAL-05 and VAL-06), then its root node, and nothing else. This is how a rank
    /// starts on a dataset of any size: what it reads before its first lookup does not grow
    /// with the number of fragments.
    ///
    /// # Errors
    /// `usage` for a version indexed by a fragment log (open it with
    /// [`crate::Dataset::open_at`]); as [`crate::Dataset::open_at`] otherwise.
    pub fn open_at(store: &Store, at: &crate::dataset::At, limits: Limits) -> Result<(Manifest, Self)> {
        block_on(Self::open_at_async(store, at, limits))
    }

    /// As [`FragmentTree::open_at`] (async).
    ///
    /// # Errors
    /// As [`FragmentTree::open_at`].
    pub async fn open_at_async(store: &Store, at: &crate::dataset::At, limits: Limits) -> Result<(Manifest, Self)> {
        let (manifest, _) = crate::dataset::load_manifest_at(store, at, &limits).await?;
        let (branch, version) = (&manifest.branch, manifest.version);
        if manifest.reader_flags & crate::manifest::READER_FLAG_FRAGMENT_TREE == 0 {
            return Err(Error::usage(format!(
                "{branch}@{version} indexes its fragments with a fragment log; open it with Dataset::open_at"
            )));
        }
        let tree = Self::open_async(store, &manifest, limits).await?;
        Ok((manifest, tree))
    }

    /// Keeps up to `bytes` of decoded nodes besides the root (default
    /// [`DEFAULT_NODE_CACHE_BYTES`]).
    #[must_use]
    pub fn with_cache_bytes(mut self, bytes: u64) -> Self {
        self.cache_bytes = bytes;
        self
    }

    /// Fragments in the version.
    #[must_use]
    pub fn fragment_count(&self) -> u64 {
        self.root.as_ref().map_or(0, |(_, r)| r.summary.fragment_count)
    }

    /// Live rows in the version.
    #[must_use]
    pub fn row_count(&self) -> u64 {
        self.root.as_ref().map_or(0, |(_, r)| r.summary.live_row_count)
    }

    /// Levels of the tree (0 when it is empty, 1 when the root is a leaf).
    #[must_use]
    pub fn depth(&self) -> u32 {
        self.root.as_ref().map_or(0, |(_, r)| r.node.level + 1)
    }

    /// Node objects read from the store so far, the root included.
    #[must_use]
    pub fn node_reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// Reads (or finds in the cache) and checks one node; `keep` adds a node read from the
    /// store to the cache (a full walk reads each node once and must not flush what lookups
    /// keep there).
    async fn fetch(&self, path: &str, parent: &Parent<'_>, keep: bool) -> Result<Arc<Loaded>> {
        if let Some(hit) = self.cached(path)? {
            return Ok(hit);
        }
        let max_body = self.limits.max_segment_body();
        let bytes = (self.store.get_bounded_async(path, envelope::max_object_len(max_body)).await)
            .map_err(|e| referenced(e, path))?;
        self.check(path, &bytes, parent, keep)
    }

    fn cached(&self, path: &str) -> Result<Option<Arc<Loaded>>> {
        Ok(self.cache.lock().map_err(|_| Error::usage("node cache poisoned"))?.get(path))
    }

    /// Checks a node's bytes against where it hangs `[VAL-20]` and caches it when `keep`.
    fn check(&self, path: &str, bytes: &[u8], parent: &Parent<'_>, keep: bool) -> Result<Arc<Loaded>> {
        let max_body = self.limits.max_segment_body();
        self.reads.fetch_add(1, Ordering::Relaxed);
        let (size, crc) = match parent {
            Parent::Root { sref, .. } => (sref.size, sref.crc32),
            Parent::Child { nref, .. } => (nref.size, nref.crc32),
        };
        if bytes.len() as u64 != size || envelope::stored_crc(bytes) != crc {
            return Err(Error::invalid(path, "node size or CRC differs from its reference [TREE-02]"));
        }
        let node: IndexNode = envelope::open(ObjectKind::Node, bytes, max_body, path)?;
        let expected = match parent {
            Parent::Root { .. } => None,
            Parent::Child { level, .. } => Some(level.saturating_sub(1)),
        };
        let summary = node.validate(expected, self.next_fragment_id, path)?;
        match parent {
            Parent::Root { sref, live_rows } => {
                if summary.fragment_count != sref.fragment_count || summary.row_count != sref.row_count {
                    return Err(Error::invalid(
                        path,
                        "root's fragment or row count differs from its reference [TREE-05]",
                    ));
                }
                if summary.live_row_count != *live_rows {
                    return Err(Error::invalid(
                        path,
                        format!("tree holds {} live rows, manifest says {live_rows} [MAN-06]", summary.live_row_count),
                    ));
                }
            }
            Parent::Child { nref, .. } => {
                if summary != nref.summary() {
                    return Err(Error::invalid(path, "node's contents differ from its parent's summary [TREE-05]"));
                }
            }
        }
        let loaded = Arc::new(Loaded { node, summary, bytes: bytes.len() as u64 });
        if keep {
            let mut cache = self.cache.lock().map_err(|_| Error::usage("node cache poisoned"))?;
            cache.insert(path, loaded.clone(), self.cache_bytes);
        }
        Ok(loaded)
    }

    /// The fragment holding global live row `row`, with its first row: reads at most one node
    /// per level `[TREE-07]`.
    ///
    /// # Errors
    /// `usage` for a row at or past the row count; node read and validation errors.
    pub fn locate(&self, row: u64) -> Result<FragmentInfo> {
        let mut found = self.locate_many(&[row])?;
        found.pop().ok_or_else(|| Error::usage("no fragment found"))
    }

    /// The fragments holding `rows` (global live rows, any order, repeats allowed), one per row
    /// in the same order. The descent goes one level at a time for all rows together, and the
    /// nodes a level needs are read concurrently (at most [`CONCURRENT_NODE_READS`] at once):
    /// a batch of rows costs one round trip per level, not one per row and level `[TREE-07]`.
    ///
    /// # Errors
    /// `usage` for a row at or past the row count; node read and validation errors.
    pub fn locate_many(&self, rows: &[u64]) -> Result<Vec<FragmentInfo>> {
        Ok(self.locate_many_indexed(rows)?.into_iter().map(|(_, info)| info).collect())
    }

    /// As [`FragmentTree::locate_many`], each fragment with its index in the version: the
    /// number of fragments with a smaller id (its position in [`crate::Dataset::fragments`]
    /// of the whole version), counted from the subtrees' `fragment_count` on the way down.
    ///
    /// # Errors
    /// As [`FragmentTree::locate_many`].
    pub fn locate_many_indexed(&self, rows: &[u64]) -> Result<Vec<(u64, FragmentInfo)>> {
        block_on(self.locate_many_indexed_async(rows))
    }

    /// As [`FragmentTree::locate_many_indexed`] (async).
    ///
    /// # Errors
    /// As [`FragmentTree::locate_many`].
    pub async fn locate_many_indexed_async(&self, rows: &[u64]) -> Result<Vec<(u64, FragmentInfo)>> {
        let total = self.row_count();
        if let Some(&bad) = rows.iter().find(|&&r| r >= total) {
            return Err(Error::usage(format!("row {bad} outside 0..{total}")));
        }
        let Some((_, root)) = &self.root else { return Ok(Vec::new()) };
        let mut at: Vec<At> =
            rows.iter().map(|&r| At { node: root.clone(), offset: r, rows_before: 0, fragments_before: 0 }).collect();
        while at.iter().any(|a| a.node.node.level > 0) {
            let mut steps: Vec<Option<(usize, u64, u64)>> = Vec::with_capacity(at.len());
            let mut wanted: Vec<(NodeRef, u32)> = Vec::new();
            let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
            for a in &at {
                if a.node.node.level == 0 {
                    steps.push(None);
                    continue;
                }
                let (k, skipped, fragments) = child_holding(&a.node.node.children, a.offset)?;
                let c = &a.node.node.children[k];
                if seen.insert(c.path.as_str()) {
                    wanted.push((c.clone(), a.node.node.level));
                }
                steps.push(Some((k, skipped, fragments)));
            }
            let loaded = self.fetch_many(&wanted, true).await?;
            for (a, step) in at.iter_mut().zip(steps) {
                let Some((k, skipped, fragments)) = step else { continue };
                let children = &a.node.node.children;
                let child =
                    loaded.get(&children[k].path).cloned().ok_or_else(|| Error::usage("a node was not read"))?;
                *a = At {
                    node: child,
                    offset: a.offset - skipped,
                    rows_before: a.rows_before + skipped,
                    fragments_before: a.fragments_before + fragments,
                };
            }
        }
        at.iter()
            .map(|a| {
                let (mut first, mut o) = (a.rows_before, a.offset);
                for (i, f) in a.node.node.fragments.iter().enumerate() {
                    let live = f.live_rows();
                    if o < live {
                        let info = FragmentInfo { fragment: Arc::new(f.clone()), first_row: first };
                        return Ok((a.fragments_before + i as u64, info));
                    }
                    o -= live;
                    first += live;
                }
                Err(Error::invalid("fragment tree", "row not found below a node that counts it [TREE-05]"))
            })
            .collect()
    }

    /// Reads the nodes `wanted` (each with its parent's level) that the cache does not hold,
    /// concurrently, and checks each against its reference.
    async fn fetch_many(&self, wanted: &[(NodeRef, u32)], keep: bool) -> Result<HashMap<String, Arc<Loaded>>> {
        let mut out = HashMap::with_capacity(wanted.len());
        let mut rest: Vec<&Wanted> = wanted.iter().collect();
        // Each round reads the nodes no one else is reading, then waits for the others' and
        // takes them from the cache (one that left it, or whose reader failed, is read in the
        // next round).
        while !rest.is_empty() {
            let (mine, theirs) = self.claim(rest, keep, &mut out)?;
            let read = self.read_nodes(&mine, keep).await;
            if keep {
                self.in_flight(|flying| mine.iter().for_each(|(c, _)| _ = flying.remove(&c.path)))?;
                self.landed.notify_waiters();
            }
            out.extend(read?);
            loop {
                // Registered before the check, so a reader that lands in between still wakes it.
                let landed = self.landed.notified();
                if !self.in_flight(|flying| theirs.iter().any(|(c, _)| flying.contains(&c.path)))? {
                    break;
                }
                landed.await;
            }
            rest = theirs;
        }
        Ok(out)
    }

    /// Sorts the nodes `wanted` into those the cache holds (added to `out`), those this
    /// caller reads (claimed as in flight when `keep`), and those another caller is reading.
    fn claim<'w>(
        &self,
        wanted: Vec<&'w Wanted>,
        keep: bool,
        out: &mut HashMap<String, Arc<Loaded>>,
    ) -> Result<(Vec<&'w Wanted>, Vec<&'w Wanted>)> {
        let (mut mine, mut theirs) = (Vec::new(), Vec::new());
        self.in_flight(|flying| {
            for w in wanted {
                if let Some(hit) = self.cached(&w.0.path)? {
                    out.insert(w.0.path.clone(), hit);
                } else if keep && !flying.insert(w.0.path.clone()) {
                    theirs.push(w);
                } else {
                    mine.push(w);
                }
            }
            Ok::<(), Error>(())
        })??;
        Ok((mine, theirs))
    }

    /// Runs `f` on the set of nodes being read (never across an await).
    fn in_flight<T>(&self, f: impl FnOnce(&mut HashSet<String>) -> T) -> Result<T> {
        let mut flying = self.in_flight.lock().map_err(|_| Error::usage("node reads poisoned"))?;
        Ok(f(&mut flying))
    }

    /// Reads the nodes `wanted` from the store, concurrently, and checks each against its
    /// reference.
    async fn read_nodes(&self, wanted: &[&Wanted], keep: bool) -> Result<Vec<(String, Arc<Loaded>)>> {
        use futures::{StreamExt, TryStreamExt};
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let max = envelope::max_object_len(self.limits.max_segment_body());
        let store = &self.store;
        // Built in a loop, not by a closure over `&Wanted`: a closure's higher-ranked borrow
        // would make the future not `Send` (rust-lang/rust#102211).
        let mut reads = Vec::with_capacity(wanted.len());
        for (c, _) in wanted {
            let path = c.path.as_str();
            reads.push(async move { store.get_bounded_async(path, max).await.map_err(|e| referenced(e, path)) });
        }
        let bodies: Vec<Bytes> = futures::stream::iter(reads).buffered(CONCURRENT_NODE_READS).try_collect().await?;
        let mut out = Vec::with_capacity(wanted.len());
        for ((c, level), bytes) in wanted.iter().zip(bodies) {
            let node = self.check(&c.path, &bytes, &Parent::Child { nref: c, level: *level }, keep)?;
            out.push((c.path.clone(), node));
        }
        Ok(out)
    }

    /// The fragment with id `id`, with its first row, or `None` when the version has none:
    /// reads at most one node per level `[TREE-07]`.
    ///
    /// # Errors
    /// Node read and validation errors.
    pub fn fragment(&self, id: u64) -> Result<Option<FragmentInfo>> {
        block_on(self.fragment_async(id))
    }

    /// As [`FragmentTree::fragment`] (async).
    ///
    /// # Errors
    /// As [`FragmentTree::fragment`].
    pub async fn fragment_async(&self, id: u64) -> Result<Option<FragmentInfo>> {
        let Some((_, root)) = &self.root else { return Ok(None) };
        let (mut node, mut first) = (root.clone(), 0u64);
        loop {
            if node.node.level == 0 {
                for f in &node.node.fragments {
                    if f.id == id {
                        return Ok(Some(FragmentInfo { fragment: Arc::new(f.clone()), first_row: first }));
                    }
                    first += f.live_rows();
                }
                return Ok(None);
            }
            let mut next = None;
            for c in &node.node.children {
                if id < c.first_id {
                    return Ok(None);
                }
                if id <= c.last_id {
                    next = Some(c);
                    break;
                }
                first += c.live_row_count;
            }
            let Some(c) = next else { return Ok(None) };
            node = self.fetch(&c.path, &Parent::Child { nref: c, level: node.node.level }, true).await?;
        }
    }

    /// Visits every fragment in id order with its first row, reading every node once (what a
    /// reader that loads the whole version does, VAL-16). The inner levels are read one level
    /// at a time and the leaves in order, in chunks of [`WALK_CHUNK`], each level or chunk's
    /// nodes concurrently: a whole read costs about one round trip per level and per chunk of
    /// leaves, not one per node.
    ///
    /// # Errors
    /// The first node read or validation error, or the first error `visit` returns.
    pub fn for_each(&self, visit: impl FnMut(FragmentInfo) -> Result<()>) -> Result<()> {
        block_on(self.for_each_async(visit))
    }

    /// As [`FragmentTree::for_each`] (async).
    ///
    /// # Errors
    /// As [`FragmentTree::for_each`].
    pub async fn for_each_async(&self, mut visit: impl FnMut(FragmentInfo) -> Result<()>) -> Result<()> {
        let Some((_, root)) = &self.root else { return Ok(()) };
        let mut first = 0u64;
        let mut emit = |leaf: &Loaded| -> Result<()> {
            for f in &leaf.node.fragments {
                visit(FragmentInfo { fragment: Arc::new(f.clone()), first_row: first })?;
                first += f.live_rows();
            }
            Ok(())
        };
        let mut level: Vec<Arc<Loaded>> = vec![root.clone()];
        loop {
            let height = level.first().map_or(0, |n| n.node.level);
            if height == 0 {
                return level.iter().try_for_each(|leaf| emit(leaf));
            }
            let wanted: Vec<(NodeRef, u32)> =
                level.iter().flat_map(|n| n.node.children.iter().map(move |c| (c.clone(), n.node.level))).collect();
            if height == 1 {
                for chunk in wanted.chunks(WALK_CHUNK) {
                    let loaded = self.fetch_many(chunk, false).await?;
                    for (c, _) in chunk {
                        emit(loaded.get(&c.path).ok_or_else(|| Error::usage("a node was not read"))?)?;
                    }
                }
                return Ok(());
            }
            let loaded = self.fetch_many(&wanted, false).await?;
            level = wanted
                .iter()
                .map(|(c, _)| loaded.get(&c.path).cloned().ok_or_else(|| Error::usage("a node was not read")))
                .collect::<Result<_>>()?;
        }
    }

    /// Visits nodes depth first, root first, each with its path; `visit` returns whether to
    /// descend into the node's children (garbage collection skips subtrees it has seen: nodes
    /// are shared between versions). A child is read only when its parent is descended into.
    ///
    /// # Errors
    /// Node read and validation errors.
    pub fn visit_nodes(&self, visit: &mut dyn FnMut(&str, &IndexNode) -> bool) -> Result<()> {
        block_on(self.visit_nodes_async(visit))
    }

    /// As [`FragmentTree::visit_nodes`] (async).
    ///
    /// # Errors
    /// As [`FragmentTree::visit_nodes`].
    pub async fn visit_nodes_async(&self, mut visit: impl FnMut(&str, &IndexNode) -> bool) -> Result<()> {
        let Some((sref, root)) = &self.root else { return Ok(()) };
        if !visit(&sref.path, &root.node) {
            return Ok(());
        }
        let mut stack: Vec<Arc<Loaded>> = vec![root.clone()];
        while let Some(node) = stack.pop() {
            for c in &node.node.children {
                let child = self.fetch(&c.path, &Parent::Child { nref: c, level: node.node.level }, false).await?;
                if visit(&c.path, &child.node) {
                    stack.push(child);
                }
            }
        }
        Ok(())
    }
}

/// What a commit's change to the tree wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeWrite {
    /// The new root, `None` when the version has no fragment.
    pub root: Option<SegmentRef>,
    /// Node objects written.
    pub nodes_written: u64,
    /// Bytes of node objects written.
    pub bytes_written: u64,
}

/// One change to the fragment map, by id: insert or replace (`Some`), or remove (`None`).
type Edit<'a> = (u64, Option<&'a Fragment>);

/// A node the writer has placed (new or kept): its reference and level.
#[derive(Clone, Debug)]
struct Placed {
    nref: NodeRef,
    level: u32,
}

/// Writes the nodes of a new version's tree.
struct TreeWriter<'a> {
    store: &'a Store,
    reader: &'a FragmentTree,
    schema: &'a Schema,
    /// Node body bytes aimed at.
    target: u64,
    /// Node body bytes never exceeded (the segment body limit written under, LIM-05).
    max_body: u64,
    out: TreeWrite,
    /// Inner nodes written by this commit, by path (the root-collapse step looks at the top).
    written: HashMap<String, IndexNode>,
    /// Sealed nodes not stored yet, and their bytes ([`TreeWriter::store_pending`]).
    pending: Vec<(String, Bytes)>,
    pending_bytes: u64,
}

/// Node PUTs a commit has in flight at once. A node's key is the hash of its bytes, so a
/// parent can reference children that are not stored yet: the commit seals every node on
/// its paths first, then stores them together, one round trip instead of one per level.
const NODE_PUTS_IN_FLIGHT: usize = 32;
/// Bytes of sealed nodes a commit holds before storing them (a commit that builds a large
/// tree stores it in waves of about this much).
const PENDING_NODE_BYTES: u64 = 32 << 20;

/// Applies a commit's changes to a base tree, copy-on-write `[TREE-08]`: removes the ids in
/// `removed` (an absent id is no change), then inserts or replaces `upserts` by id. Only the
/// nodes on the paths to changed ids are rewritten; a rewritten node over `node_bytes` is split
/// into nodes of about that size (a leaf that only grows at its end, as with appends, leaves
/// full nodes behind it), a node left empty disappears, levels are added while more than one
/// node remains at the top and dropped while the root has one child. No node written has a
/// body over the segment body limit of `limits` `[TREE-09]`.
///
/// `base` is the base version's tree (`None` for a version with a fragment log or none at all:
/// the tree is then built from `upserts` alone).
///
/// # Errors
/// `limit` for one fragment entry over the body limit on its own; storage and read errors.
pub fn apply(
    store: &Store,
    base: Option<&FragmentTree>,
    removed: &[u64],
    upserts: &[Fragment],
    schema: &Schema,
    node_bytes: u64,
    limits: &Limits,
) -> Result<TreeWrite> {
    block_on(apply_async(store, base, removed, upserts, schema, node_bytes, limits))
}

/// As [`apply`] (async).
///
/// # Errors
/// As [`apply`].
pub async fn apply_async(
    store: &Store,
    base: Option<&FragmentTree>,
    removed: &[u64],
    upserts: &[Fragment],
    schema: &Schema,
    node_bytes: u64,
    limits: &Limits,
) -> Result<TreeWrite> {
    let empty;
    let reader = if let Some(t) = base {
        t
    } else {
        empty = FragmentTree::empty(store, limits);
        &empty
    };
    let mut w = TreeWriter::new(store, reader, schema, node_bytes, limits);
    let mut edits: Vec<Edit<'_>> =
        removed.iter().map(|&id| (id, None)).chain(upserts.iter().map(|f| (f.id, Some(f)))).collect();
    // A stable sort keeps a removal before an insert of the same id: removals apply first.
    edits.sort_by_key(|e| e.0);
    let top: Vec<Placed> = if let Some((sref, root)) = &reader.root {
        if edits.is_empty() {
            return Ok(TreeWrite { root: Some(sref.clone()), ..TreeWrite::default() });
        }
        let root_ref = NodeRef {
            path: sref.path.clone(),
            size: sref.size,
            crc32: sref.crc32,
            first_id: root.summary.first_id,
            last_id: root.summary.last_id,
            fragment_count: root.summary.fragment_count,
            row_count: root.summary.row_count,
            live_row_count: root.summary.live_row_count,
            stats: Vec::new(),
        };
        w.rewrite(root, &root_ref, &edits).await?
    } else {
        let fragments: Vec<Fragment> = collapse(&edits).into_iter().filter_map(|(_, f)| f.cloned()).collect();
        w.write_leaves(fragments).await?
    };
    w.finish(top).await
}

/// Builds a new tree of `fragments` (strictly ascending ids, any number of them) and stores
/// its nodes: what [`apply`] writes for a version without a tree, byte for byte, but streamed,
/// holding one leaf and the references to the leaves written (about 150 bytes per 64 KiB
/// leaf) rather than every fragment. For writers that index many fragments at once (a bulk
/// import, a log converted to a tree, the `scale` bench's 10^8 fragments).
///
/// # Errors
/// `usage` for ids that are not strictly ascending; `limit` for one fragment entry over the
/// body limit on its own; storage errors.
pub fn build(
    store: &Store,
    fragments: impl IntoIterator<Item = Fragment>,
    schema: &Schema,
    node_bytes: u64,
    limits: &Limits,
) -> Result<TreeWrite> {
    block_on(build_async(store, fragments, schema, node_bytes, limits))
}

/// As [`build`] (async).
///
/// # Errors
/// As [`build`].
pub async fn build_async(
    store: &Store,
    fragments: impl IntoIterator<Item = Fragment>,
    schema: &Schema,
    node_bytes: u64,
    limits: &Limits,
) -> Result<TreeWrite> {
    let reader = FragmentTree::empty(store, limits);
    let mut w = TreeWriter::new(store, &reader, schema, node_bytes, limits);
    let (mut previous, mut unordered) = (None::<u64>, None);
    let ascending = fragments.into_iter().map_while(|f| {
        if previous.is_some_and(|p| f.id <= p) {
            unordered = Some(f.id);
            return None;
        }
        previous = Some(f.id);
        Some(f)
    });
    let top = w.write_leaves(ascending).await?;
    if let Some(id) = unordered {
        // Nodes stored so far are unreferenced objects, like those of any failed commit.
        return Err(Error::usage(format!(
            "fragment ids must be strictly ascending: {id} follows a larger or equal id"
        )));
    }
    w.finish(top).await
}

/// The last edit of each id (a removal followed by an insert of one id is the insert).
fn collapse<'a>(edits: &[Edit<'a>]) -> Vec<Edit<'a>> {
    let mut out: Vec<Edit<'a>> = Vec::with_capacity(edits.len());
    for &e in edits {
        match out.last_mut() {
            Some(last) if last.0 == e.0 => *last = e,
            _ => out.push(e),
        }
    }
    out
}

impl<'a> TreeWriter<'a> {
    fn new(store: &'a Store, reader: &'a FragmentTree, schema: &'a Schema, node_bytes: u64, limits: &Limits) -> Self {
        let max_body = limits.max_segment_body();
        TreeWriter {
            store,
            reader,
            schema,
            target: node_bytes.clamp(NODE_FIXED + 1, max_body),
            max_body,
            out: TreeWrite::default(),
            written: HashMap::new(),
            pending: Vec::new(),
            pending_bytes: 0,
        }
    }

    /// Adds levels over the nodes at the top until one is left, lets a root with one child
    /// give way to it, stores every pending node and returns what was written.
    async fn finish(mut self, mut top: Vec<Placed>) -> Result<TreeWrite> {
        // One node at the top: the root; several: add a level over them.
        while top.len() > 1 {
            let level = top[0].level + 1;
            top = self.write_inner(level, top.into_iter().map(|p| p.nref).collect()).await?;
        }
        // A root with one child gives way to the child (the tree shrinks after removals).
        while let Some(p) = top.first()
            && p.level > 0
        {
            let only = match self.written.get(&p.nref.path) {
                Some(node) => (node.children.len() == 1).then(|| node.children[0].clone()),
                None => match &self.reader.root {
                    Some((sref, root)) if sref.path == p.nref.path => {
                        (root.node.children.len() == 1).then(|| root.node.children[0].clone())
                    }
                    _ => {
                        let parent = Parent::Child { nref: &p.nref, level: p.level + 1 };
                        let node = self.reader.fetch(&p.nref.path, &parent, true).await?;
                        (node.node.children.len() == 1).then(|| node.node.children[0].clone())
                    }
                },
            };
            let Some(child) = only else { break };
            top = vec![Placed { nref: child, level: p.level - 1 }];
        }
        // Every node must be stored before a manifest can reference the root.
        self.store_pending().await?;
        self.out.root = top.pop().map(|p| SegmentRef {
            path: p.nref.path,
            size: p.nref.size,
            crc32: p.nref.crc32,
            fragment_count: p.nref.fragment_count,
            row_count: p.nref.row_count,
        });
        Ok(std::mem::take(&mut self.out))
    }

    /// The nodes that replace `node` (referenced by `nref`) once `edits` (sorted, all within
    /// the node's share of the id space) are applied: the node itself when nothing changes,
    /// none when it ends up empty.
    async fn rewrite(&mut self, node: &Loaded, nref: &NodeRef, edits: &[Edit<'_>]) -> Result<Vec<Placed>> {
        let level = node.node.level;
        if level == 0 {
            let edits = collapse(edits);
            let mut out = Vec::with_capacity(node.node.fragments.len() + edits.len());
            let mut changed = false;
            let mut e = edits.iter().peekable();
            for f in &node.node.fragments {
                while let Some(&&(id, new)) = e.peek()
                    && id < f.id
                {
                    if let Some(n) = new {
                        out.push(n.clone());
                        changed = true;
                    }
                    e.next();
                }
                match e.peek() {
                    Some(&&(id, new)) if id == f.id => {
                        if let Some(n) = new {
                            changed |= n != f;
                            out.push(n.clone());
                        } else {
                            changed = true;
                        }
                        e.next();
                    }
                    _ => out.push(f.clone()),
                }
            }
            for &(_, new) in e {
                if let Some(n) = new {
                    out.push(n.clone());
                    changed = true;
                }
            }
            if !changed {
                return Ok(vec![Placed { nref: nref.clone(), level }]);
            }
            return self.write_leaves(out).await;
        }
        // Child i owns the ids from its first id up to the next child's first id; the first
        // child also owns every id below, the last every id above.
        let children = &node.node.children;
        let mut out: Vec<NodeRef> = Vec::with_capacity(children.len() + 1);
        let mut changed = false;
        let mut rest = edits;
        for (i, c) in children.iter().enumerate() {
            let take = match children.get(i + 1) {
                Some(next) => rest.partition_point(|e| e.0 < next.first_id),
                None => rest.len(),
            };
            let (mine, tail) = rest.split_at(take);
            rest = tail;
            // Removing ids the subtree does not hold changes nothing.
            if mine.iter().all(|e| e.1.is_none() && (e.0 < c.first_id || e.0 > c.last_id)) {
                out.push(c.clone());
                continue;
            }
            let child = self.reader.fetch(&c.path, &Parent::Child { nref: c, level }, true).await?;
            let placed = Box::pin(self.rewrite(&child, c, mine)).await?;
            changed |= placed.len() != 1 || placed[0].nref != *c;
            out.extend(placed.into_iter().map(|p| p.nref));
        }
        if !changed {
            return Ok(vec![Placed { nref: nref.clone(), level }]);
        }
        if out.is_empty() {
            return Ok(Vec::new());
        }
        self.write_inner(level, out).await
    }

    /// Writes fragments (ascending ids) as leaves of about the target size: each leaf is
    /// filled up to the target (or the body limit) before the next starts, sealed as soon as it
    /// is full, so a stream of any length is written holding one leaf at a time.
    async fn write_leaves(&mut self, fragments: impl IntoIterator<Item = Fragment>) -> Result<Vec<Placed>> {
        let mut out = Vec::new();
        let (mut leaf, mut used) = (Vec::new(), NODE_FIXED);
        for f in fragments {
            let len = envelope::encode_body(&f)?.len() as u64;
            Error::check_limit(
                || format!("fragment {} record: index node body length [LIM-05]", f.id),
                self.max_body,
                NODE_FIXED + len,
            )?;
            if !leaf.is_empty() && (used + len > self.max_body || used + len > self.target) {
                let full = IndexNode { level: 0, fragments: std::mem::take(&mut leaf), children: Vec::new() };
                out.push(self.put(full).await?);
                used = NODE_FIXED;
            }
            leaf.push(f);
            used += len;
        }
        if !leaf.is_empty() {
            out.push(self.put(IndexNode { level: 0, fragments: leaf, children: Vec::new() }).await?);
        }
        Ok(out)
    }

    /// Writes children (ascending id ranges) as inner nodes at `level` of about the target size.
    async fn write_inner(&mut self, level: u32, children: Vec<NodeRef>) -> Result<Vec<Placed>> {
        Error::check_limit(|| "fragment tree level [LIM-17]".to_string(), hard::MAX_TREE_LEVEL, u64::from(level))?;
        let lens = children.iter().map(|c| Ok(envelope::encode_body(c)?.len() as u64)).collect::<Result<Vec<u64>>>()?;
        let groups = self.pack(&lens, 2, &|i| format!("reference to node {}", children[i].path))?;
        let mut out = Vec::with_capacity(groups.len());
        let mut it = children.into_iter();
        for n in groups {
            let node = IndexNode { level, fragments: Vec::new(), children: it.by_ref().take(n).collect() };
            out.push(self.put(node).await?);
        }
        Ok(out)
    }

    /// Splits entries of the given encoded lengths into consecutive groups, each filled up to
    /// the target before the next starts, and holding at least `min_entries` where the body
    /// limit allows (inner nodes take two, so each level at least halves the node count and
    /// the tree stays shallow whatever the target); returns the group sizes.
    fn pack(&self, lens: &[u64], min_entries: usize, what: &dyn Fn(usize) -> String) -> Result<Vec<usize>> {
        // (entries, body bytes) of each group.
        let mut groups: Vec<(usize, u64)> = Vec::new();
        let (mut n, mut used) = (0usize, NODE_FIXED);
        for (i, &len) in lens.iter().enumerate() {
            Error::check_limit(
                || format!("{}: index node body length [LIM-05]", what(i)),
                self.max_body,
                NODE_FIXED + len,
            )?;
            if n > 0 && (used + len > self.max_body || (used + len > self.target && n >= min_entries)) {
                groups.push((n, used));
                (n, used) = (0, NODE_FIXED);
            }
            n += 1;
            used += len;
        }
        if n > 0 {
            // A last group short of `min_entries` joins the one before where the limit allows
            // [TREE-09].
            match groups.last_mut() {
                Some(prev) if n < min_entries && prev.1 + used - NODE_FIXED <= self.max_body => {
                    *prev = (prev.0 + n, prev.1 + used - NODE_FIXED);
                }
                _ => groups.push((n, used)),
            }
        }
        Ok(groups.into_iter().map(|g| g.0).collect())
    }

    /// Stores the sealed nodes, [`NODE_PUTS_IN_FLIGHT`] at a time. A node that exists already
    /// has the same bytes (its key is their hash).
    async fn store_pending(&mut self) -> Result<()> {
        use futures::{StreamExt, TryStreamExt};
        let nodes = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        let store = self.store;
        futures::stream::iter(nodes)
            .map(|(key, bytes)| async move { store.put_if_absent_async(&key, bytes).await.map(drop) })
            .buffer_unordered(NODE_PUTS_IN_FLIGHT)
            .try_collect::<()>()
            .await
    }

    /// Seals one node, queues it for [`TreeWriter::store_pending`] and returns its reference.
    async fn put(&mut self, node: IndexNode) -> Result<Placed> {
        let summary = match node.level {
            0 => summarise(node.fragments.iter().map(|f| (f.id, f.id, 1, f.row_count, f.live_rows()))),
            _ => summarise(
                node.children.iter().map(|c| (c.first_id, c.last_id, c.fragment_count, c.row_count, c.live_row_count)),
            ),
        };
        let stats_lists: Vec<&[ColumnStats]> = match node.level {
            0 => node.fragments.iter().map(|f| f.stats.as_slice()).collect(),
            _ => node.children.iter().map(|c| c.stats.as_slice()).collect(),
        };
        let stats = aggregate(&stats_lists, self.schema);
        let bytes = envelope::seal_within(ObjectKind::Node, &node, self.max_body, "new index node")?;
        let key = paths::content_key(paths::INDEX_DIR, "tsn", &bytes);
        let nref = NodeRef {
            path: key.clone(),
            size: bytes.len() as u64,
            crc32: envelope::stored_crc(&bytes),
            first_id: summary.first_id,
            last_id: summary.last_id,
            fragment_count: summary.fragment_count,
            row_count: summary.row_count,
            live_row_count: summary.live_row_count,
            stats,
        };
        self.out.nodes_written += 1;
        self.out.bytes_written += bytes.len() as u64;
        self.pending_bytes += bytes.len() as u64;
        self.pending.push((key, Bytes::from(bytes)));
        if self.pending_bytes >= PENDING_NODE_BYTES {
            self.store_pending().await?;
        }
        let level = node.level;
        if level > 0 {
            self.written.insert(nref.path.clone(), node);
        }
        Ok(Placed { nref, level })
    }
}

/// Sums entries `(first_id, last_id, fragments, rows, live rows)` given in id order.
fn summarise(entries: impl Iterator<Item = (u64, u64, u64, u64, u64)>) -> Summary {
    let mut s = Summary { first_id: u64::MAX, last_id: 0, fragment_count: 0, row_count: 0, live_row_count: 0 };
    for (first, last, n, rows, live) in entries {
        s.first_id = s.first_id.min(first);
        s.last_id = last;
        s.fragment_count += n;
        s.row_count = s.row_count.saturating_add(rows);
        s.live_row_count = s.live_row_count.saturating_add(live);
    }
    s
}

/// Statistics over several lists, as the manifest's are merged `[STAT-06]`: a column is
/// included only when every list has an entry for it and the schema still has it.
pub(crate) fn aggregate(lists: &[&[ColumnStats]], schema: &Schema) -> Vec<ColumnStats> {
    let mut merged = stats::merge_all(lists.iter().copied());
    merged.retain(|s| {
        schema.column_by_id(s.column_id).is_some() && lists.iter().all(|l| l.iter().any(|x| x.column_id == s.column_id))
    });
    merged
}

/// The child of an inner node holding the node's live row `offset`, and the live rows and the
/// fragments of the children before it `[TREE-07]`.
fn child_holding(children: &[NodeRef], offset: u64) -> Result<(usize, u64, u64)> {
    let (mut rows, mut fragments) = (0u64, 0u64);
    for (k, c) in children.iter().enumerate() {
        if offset < rows + c.live_row_count {
            return Ok((k, rows, fragments));
        }
        rows += c.live_row_count;
        fragments += c.fragment_count;
    }
    Err(Error::invalid("fragment tree", "row not found in a node that counts it [TREE-05]"))
}
