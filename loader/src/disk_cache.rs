//! A node-local disk cache of the data-file bytes an object-store loader reads, shared by the
//! ranks (processes) of one node, so that epochs after the first read local disk instead of
//! the bucket. Opt-in: [`LoaderConfig::with_cache_dir`](crate::LoaderConfig::with_cache_dir).
//!
//! **What is cached.** Data files only (keys under `data/`): they are immutable and named
//! after their content (SPEC.md LAY-02, LAY-04), so a cached byte never goes stale and is
//! never revalidated. The manifest, segments and deletion vectors are read once when a loader
//! opens and are not cached, nor is the footer through which the reference opens a data file
//! (its index blocks are). A local dataset directory (`Source::Local`) never uses the cache:
//! its files are on this machine already.
//!
//! **Granularity: aligned blocks of [`BLOCK_BYTES`] (1 MiB) of a file**, the last one shorter
//! (so a small file is one entry). A block is fetched whole by its first reader, in one range
//! GET, and then serves every read inside it. Random row reads (a global shuffle) want one
//! page of a few to a few hundred KiB at a time: caching whole files would make the first
//! reads of a cold epoch wait for tens of MB each, and caching exact ranges or pages would
//! make one entry per sample and miss whenever coalescing cut a range differently. A 1 MiB
//! block is still a GET large enough for an object store's throughput, one file per MiB on
//! disk, and at most 1 MiB fetched per miss: a cold epoch fetches each block once (bytes
//! fetched ≈ the dataset). The price is amplification while the cache is smaller than the
//! dataset: a miss fetches its whole block. Except in an epoch's first batch
//! ([`FirstBatch`]): a cold first batch of 64 random rows would wait for 64 MiB (and as much
//! written to disk) instead of its rows, so its misses read only the wanted bytes and their
//! blocks are fetched whole by the next batches (at most twice as many as each batch's own
//! blocks, so none waits for them all).
//!
//! **Entries.** `<cache_dir>/<hash of the dataset location>/<file>.<hash of key>.<block>.tc`:
//! a header (magic, block and chunk sizes, the object key and block index, the data length,
//! a CRC-32 per 16 KiB chunk, the header's own CRC-32), then the block's bytes. A read checks
//! the header and the file's length, then what it reads: a page the loader wants whole (with
//! checksums on) by that page's own CRC-32 from the data file's footer, which it needs checked
//! anyway (one pass, end to end), anything else (rows read alone, index blocks, a page across
//! two blocks) by the entry's CRCs of the chunks it touches. A mismatch drops the entry and
//! fetches the block again ([`CacheStats::corrupt`]). Bytes that fail the format's
//! own page checksum after coming from the cache are fetched once more from the store,
//! replacing the entry; a block whose wanted pages fail their checksum as they arrive from
//! the store is served but not kept.
//!
//! **Sharing between processes.** Readers open committed entries only: a download is written
//! to `<entry>.tmp` and renamed into place once complete, so no reader sees a partial entry
//! (no fsync: after a power loss an entry whose bytes were lost fails its checksums and is
//! fetched again). The temporary file is also the download's lock: its writer holds an
//! exclusive `flock` on it, so one process fetches a block while the others poll (1 to 10 ms
//! apart) until the entry is there; the threads of one process queue for a block on an
//! in-process async mutex first, so they neither poll nor fetch it twice. The kernel releases
//! the lock of a process that dies, and the next one takes the file over and empties it. The
//! owner renames (or, after a failure, removes) the file while it holds the lock; whoever
//! then locks the old file sees that the path names another file (or none) and looks again.
//! One new file per block and no deletions: a lock file of its own per download (created and
//! deleted every block) made ext4's inode allocator the bottleneck of a cold epoch.
//!
//! **Bound and eviction (LRU).** `<cache_dir>/usage` holds the committed bytes (entry file
//! lengths) under its own `flock`. A commit adds its entry there before the rename; when the
//! sum would pass the bound, the committer scans the whole cache directory and deletes the
//! least recently used entries (by modification time, which a read sets at most once a
//! second per entry) down to 7/8 of the bound, recounting the sum on the way, so that it
//! never drifts. Committed entries therefore stay within the bound; temporary files of
//! downloads in flight (one block each) come on top, and files of a dead process's download
//! are removed by the next scan. Each process keeps entries open with their headers parsed
//! (reopening one costs about as much as reading a sample from it): a quarter of its
//! open-file limit, 512 to 8,192, so up to that many MiB of entries evicted by other
//! processes can stay allocated until it drops them.
//!
//! **Failures.** An unusable directory (not creatable or not writable, no `flock`) is a
//! [`LoaderError::Config`] when the loader opens. Later failures of the cache itself (a full
//! disk, a directory removed) never fail a batch: the bytes come from the store,
//! [`CacheStats::errors`] counts them, and the first one is printed to stderr. The directory
//! should be on a local file system: `flock` over NFS is not dependable.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::num::NonZeroUsize;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use rustix::fs::{FlockOperation, flock};

use crate::error::{LoaderError, Result};
use crate::source::{Attempt, BodySink, Dest, Fetcher, RangeRequest, Rounds, backoff_wait, scatter};

/// Bytes of a file per cache entry (aligned; a file's last block is shorter).
pub(crate) const BLOCK_BYTES: u64 = 1 << 20;
/// Bytes per CRC-32 in an entry's header: a read checks whole chunks around what it wants.
const CHUNK_BYTES: u64 = 16 << 10;
const CHUNKS_PER_BLOCK: usize = (BLOCK_BYTES / CHUNK_BYTES) as usize;
/// The smallest bound accepted: fewer entries than this would only thrash.
pub(crate) const MIN_CACHE_BYTES: u64 = 4 * BLOCK_BYTES;
const MAGIC: [u8; 8] = *b"TSRCACHE";
const ENTRY_FORMAT: u32 = 1;
/// Header bytes besides the key and the chunk CRCs: magic, format, block bytes, chunk bytes,
/// key length, block index, data length, chunk count, header CRC.
const HEADER_FIXED: usize = 8 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 4;
/// Entries each process keeps open, with their parsed headers: a quarter of its open-file
/// limit, within these bounds (at the usual limit of 1024, 512: with the local source's 256
/// files, well within it). A random epoch over more entries than are open reopens most of
/// them: mm224 at 10,000 rows is 1,480 entries, whose first cached epoch took 1.16 s with 512
/// open and 0.56 s with all of them open (later epochs 0.36-0.42 s and 0.30-0.35 s).
const OPEN_ENTRIES_MIN: usize = 512;
const OPEN_ENTRIES_MAX: usize = 8192;
/// A read sets an entry's modification time (its LRU age) at most this often.
const TOUCH_EVERY: Duration = Duration::from_secs(1);
/// Whole-block body buffers ([`BLOCK_BYTES`] each) a process allocates at most, reused from
/// download to download. A download holding one collects its body and writes it in one
/// `write`, so the page cache holds the entry in large folios: written in 64 KiB pieces, a
/// warm read of a 150 KB page walked forty small folios (`filemap_get_read_batch` took
/// 5.5 % of a warm epoch's CPU in `cache_bench`, 0.85 % with whole-block writes), and the
/// cold epoch of mm224 from the bench bucket took 5.7-6.3 s against 3.7-5.0 s. Bounded
/// because hundreds of downloads can be in flight (every filling thread drives its own):
/// a buffer each grew the process by up to 700 MB. Downloads beyond these stream through
/// [`STREAM_BUFFER`] bytes.
const WHOLE_BLOCK_BUFFERS: usize = 32;
/// The write buffer of a download without a whole-block buffer.
const STREAM_BUFFER: usize = 64 << 10;
/// The waits between tries of a lock another process holds.
const LOCK_POLL_FIRST: Duration = Duration::from_millis(1);
const LOCK_POLL_MAX: Duration = Duration::from_millis(10);
const LEDGER: &str = "usage";
const ENTRY_SUFFIX: &str = ".tc";
const TMP_SUFFIX: &str = ".tmp";

/// The disk cache's traffic since the loader opened ([`IoStats::cache`](crate::IoStats::cache)).
/// Hits and misses count cache blocks (1 MiB of a file, or a small file whole).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Blocks served from the disk cache.
    pub hits: u64,
    /// Blocks fetched from the store: first reads, and reads of blocks evicted or found
    /// corrupt since.
    pub misses: u64,
    /// Misses of an epoch's first batch, served by reading only the wanted bytes (their
    /// blocks are fetched whole by later batches).
    pub direct: u64,
    /// Bytes the loader read from cached entries (what it wanted, not whole blocks).
    pub read_bytes: u64,
    /// Bytes of the entries this loader wrote into the cache (headers included).
    pub written_bytes: u64,
    /// Entries this loader deleted to keep the cache within its bound.
    pub evictions: u64,
    /// Cached entries found corrupt when read: deleted and fetched again.
    pub corrupt: u64,
    /// Failures of the cache itself (a full disk, a removed directory); the bytes came from
    /// the store instead.
    pub errors: u64,
}

#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    direct: AtomicU64,
    read_bytes: AtomicU64,
    written_bytes: AtomicU64,
    evictions: AtomicU64,
    corrupt: AtomicU64,
    errors: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// FNV-1a, 64 bits: a hash that is the same in every process and build (entry names).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// The file name of block `block` of object `key`: the key's last segment (readable, made
/// safe as a file name), a hash of the whole key, the block index.
fn entry_name(key: &str, block: u64) -> String {
    let stem: String = key
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .chars()
        .take(64)
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .collect();
    format!("{stem}.{:016x}.{block}{ENTRY_SUFFIX}", fnv1a(key.as_bytes()))
}

fn chunk_count(data_len: u64) -> u64 {
    data_len.div_ceil(CHUNK_BYTES)
}

/// The header's length for an entry of `key` holding `data_len` bytes.
fn header_len(key: &str, data_len: u64) -> u64 {
    (HEADER_FIXED + key.len()) as u64 + 4 * chunk_count(data_len)
}

fn encode_header(key: &str, block: u64, data_len: u64, crcs: &[u32]) -> Vec<u8> {
    let mut h = Vec::with_capacity(header_len(key, data_len) as usize);
    h.extend_from_slice(&MAGIC);
    h.extend_from_slice(&ENTRY_FORMAT.to_le_bytes());
    h.extend_from_slice(&(BLOCK_BYTES as u32).to_le_bytes());
    h.extend_from_slice(&(CHUNK_BYTES as u32).to_le_bytes());
    h.extend_from_slice(&(key.len() as u32).to_le_bytes());
    h.extend_from_slice(key.as_bytes());
    h.extend_from_slice(&block.to_le_bytes());
    h.extend_from_slice(&data_len.to_le_bytes());
    h.extend_from_slice(&(crcs.len() as u32).to_le_bytes());
    for c in crcs {
        h.extend_from_slice(&c.to_le_bytes());
    }
    let crc = crc32fast::hash(&h);
    h.extend_from_slice(&crc.to_le_bytes());
    h
}

/// A checked entry header.
#[derive(Debug)]
struct Header {
    /// Header bytes (where the data starts).
    len: u64,
    data_len: u64,
    crcs: Vec<u32>,
}

/// Reads little-endian fields off the front of a byte slice.
struct Cursor<'b> {
    bytes: &'b [u8],
    at: usize,
}

impl<'b> Cursor<'b> {
    fn take(&mut self, n: usize) -> Option<&'b [u8]> {
        let s = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4)?.try_into().ok().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.take(8)?.try_into().ok().map(u64::from_le_bytes)
    }
}

/// Parses and checks the header of an entry of `file_len` bytes that should hold block
/// `block` of `key`; `None` when anything disagrees.
fn decode_header(bytes: &[u8], key: &str, block: u64, file_len: u64) -> Option<Header> {
    let ok = |c: bool| c.then_some(());
    let mut c = Cursor { bytes, at: 0 };
    ok(c.take(8)? == MAGIC)?;
    ok(c.u32()? == ENTRY_FORMAT)?;
    ok(u64::from(c.u32()?) == BLOCK_BYTES)?;
    ok(u64::from(c.u32()?) == CHUNK_BYTES)?;
    ok(c.u32()? as usize == key.len())?;
    ok(c.take(key.len())? == key.as_bytes())?;
    ok(c.u64()? == block)?;
    let data_len = c.u64()?;
    ok(data_len > 0 && data_len <= BLOCK_BYTES)?;
    let n = c.u32()?;
    ok(u64::from(n) == chunk_count(data_len))?;
    let crcs = (0..n).map(|_| c.u32()).collect::<Option<Vec<u32>>>()?;
    let body = c.at;
    let stored = c.u32()?;
    ok(crc32fast::hash(bytes.get(..body)?) == stored)?;
    let len = c.at as u64;
    ok(len + data_len == file_len)?;
    Some(Header { len, data_len, crcs })
}

/// CRC-32 of each chunk of bytes fed in order from a chunk boundary.
#[derive(Debug, Default)]
struct Crcs {
    hasher: crc32fast::Hasher,
    filled: u64,
    done: Vec<u32>,
}

impl Crcs {
    fn update(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let n = ((CHUNK_BYTES - self.filled) as usize).min(bytes.len());
            self.hasher.update(&bytes[..n]);
            self.filled += n as u64;
            bytes = &bytes[n..];
            if self.filled == CHUNK_BYTES {
                self.done.push(std::mem::take(&mut self.hasher).finalize());
                self.filled = 0;
            }
        }
    }

    fn finish(mut self) -> Vec<u32> {
        if self.filled > 0 {
            self.done.push(self.hasher.finalize());
        }
        self.done
    }
}

/// A download's claim on an entry: its temporary file `<entry>.tmp`, open and under an
/// exclusive `flock` for as long as this lives, so that one process at a time writes it. On
/// drop the file is removed (while still locked) unless it was committed, i.e. renamed into
/// place. The temporary file is the lock: a download costs one new file, not two (creating
/// and deleting a lock file per block made ext4's inode allocator the bottleneck of a cold
/// epoch).
#[derive(Debug)]
struct Claim {
    file: File,
    path: PathBuf,
    committed: bool,
}

/// What [`Claim::take`] found.
enum Taken {
    /// This process holds the claim.
    Claim(Claim),
    /// The entry was committed (by whoever held the claim) while this one waited.
    Committed,
    /// `stopped` was set while waiting.
    Stopped,
}

impl Claim {
    /// Claims `tmp` unless another open file holds it (`None`).
    fn try_take(tmp: &Path) -> io::Result<Option<Self>> {
        loop {
            let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(tmp)?;
            match flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {}
                Err(e) if e == rustix::io::Errno::WOULDBLOCK => return Ok(None),
                Err(e) => return Err(e.into()),
            }
            // The previous holder renamed or removed the file before unlocking it: a lock on
            // that file excludes nobody, so hold it only if the path still names this file.
            let ours = file.metadata()?;
            match fs::metadata(tmp) {
                Ok(m) if m.ino() == ours.ino() && m.dev() == ours.dev() => {
                    return Ok(Some(Self { file, path: tmp.to_path_buf(), committed: false }));
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits for the claim on `tmp`, or for `entry` to be committed (when given: checked
    /// before each try, so that waiting on a download that succeeds creates no file).
    async fn take(tmp: &Path, entry: Option<&Path>, stopped: &AtomicBool) -> io::Result<Taken> {
        let mut wait = LOCK_POLL_FIRST;
        loop {
            if entry.is_some_and(Path::exists) {
                return Ok(Taken::Committed);
            }
            if let Some(claim) = Self::try_take(tmp)? {
                return Ok(Taken::Claim(claim));
            }
            if stopped.load(Ordering::Acquire) {
                return Ok(Taken::Stopped);
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(LOCK_POLL_MAX);
        }
    }

    /// Renames the claimed file to `path` (while still holding it): the entry is committed
    /// and stays when the claim drops.
    fn commit(&mut self, path: &Path) -> io::Result<()> {
        fs::rename(&self.path, path)?;
        self.committed = true;
        Ok(())
    }

    /// The claimed file emptied, as a writer collecting the body in `buf` (a dead process's
    /// download may have left bytes; the handle shares the open file, and with it the lock).
    fn writer(&self, buf: Vec<u8>) -> io::Result<EntryWriter> {
        self.file.set_len(0)?;
        Ok(EntryWriter { file: self.file.try_clone()?, buf, at: 0 })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.committed {
            // Removed while held; `file` closes (unlocks) after this.
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// An entry this process has open, with its checked header.
#[derive(Debug)]
struct OpenEntry {
    file: File,
    header: Header,
    touched: Mutex<Instant>,
}

/// Outcome of looking an entry up.
enum Looked {
    Hit,
    Miss,
    Corrupt,
}

/// The pieces of the batch's destinations that one cache block serves.
struct BlockJob<'r> {
    key: &'r str,
    block: u64,
    /// Drop the entry and fetch the block again (its bytes failed the format's checksum).
    force: bool,
    /// Per piece, the destination it belongs to (numbered over the cached requests' dests).
    ids: Vec<usize>,
    /// Offsets relative to the block, ascending; `check` only on a piece that is a whole
    /// destination.
    pieces: Vec<Dest<'r>>,
    /// Served from the cache (not fetched).
    from_cache: bool,
}

/// While alive, the thread that made it fills its epoch's first batch: a miss there reads
/// only the bytes it wants (one range GET over its pieces), not its whole block, and the
/// block is fetched whole by a later batch. A cold first batch of 64 random rows would
/// otherwise wait for 64 blocks (64 MiB, and as much written to disk) instead of its rows.
/// A thread-local, not a parameter: the cache's reads run as futures polled on the filling
/// thread itself (`Runtime::block_on`), below several layers that know nothing of batches.
#[derive(Debug)]
pub(crate) struct FirstBatch(());

impl FirstBatch {
    pub(crate) fn enter() -> Self {
        FIRST_BATCH.set(true);
        Self(())
    }

    fn active() -> bool {
        FIRST_BATCH.get()
    }
}

impl Drop for FirstBatch {
    fn drop(&mut self) {
        FIRST_BATCH.set(false);
    }
}

thread_local! {
    static FIRST_BATCH: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Chunk bytes around what a read wants, read to check the chunks' CRCs.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The node-local disk cache (see the module docs).
#[derive(Debug)]
pub(crate) struct DiskCache {
    root: PathBuf,
    /// This dataset's entries.
    dir: PathBuf,
    bound: u64,
    /// `root/usage`; the mutex orders this process's threads, `flock` the processes.
    ledger: Mutex<File>,
    open: Mutex<lru::LruCache<String, Arc<OpenEntry>>>,
    /// Per entry some thread of this process is fetching (or waiting to), its queue.
    fetching: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    counters: Counters,
    warned: AtomicBool,
    /// Blocks whose pieces were read directly, to be fetched whole by later reads.
    deferred: Mutex<Vec<(String, u64)>>,
    /// Whole-block body buffers not in use, and how many exist (at most
    /// [`WHOLE_BLOCK_BUFFERS`]).
    spare: Mutex<(Vec<Vec<u8>>, usize)>,
}

/// This thread's turn at fetching an entry within the process ([`DiskCache::turn`]).
struct Turn<'c> {
    cache: &'c DiskCache,
    name: String,
    queue: Arc<tokio::sync::Mutex<()>>,
    held: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.held = None;
        let mut fetching = self.cache.fetching.lock().unwrap_or_else(PoisonError::into_inner);
        // The map's reference and ours: nobody else queues (they clone under this lock).
        if Arc::strong_count(&self.queue) == 2 {
            fetching.remove(&self.name);
        }
    }
}

impl DiskCache {
    /// Opens (creating it if needed) the cache at `root` with a bound of `bound` bytes, for
    /// the dataset at `location` (its entries live in a directory of their own).
    ///
    /// # Errors
    /// [`LoaderError::Config`] when the directory cannot be created or written, or does not
    /// support `flock`.
    pub(crate) fn open(root: &Path, bound: u64, location: &str) -> Result<Self> {
        let bad = |what: &str, e: &dyn std::fmt::Display| {
            LoaderError::config(format!("cache_dir {}: {what}: {e}", root.display()))
        };
        if bound < MIN_CACHE_BYTES {
            return Err(bad("cache_bytes is too small", &format!("{bound} < {MIN_CACHE_BYTES} (four cache blocks)")));
        }
        let dir = root.join(format!("{:016x}", fnv1a(location.as_bytes())));
        fs::create_dir_all(&dir).map_err(|e| bad("cannot create the directory", &e))?;
        let probe = dir.join(format!(".probe-{}{TMP_SUFFIX}", std::process::id()));
        File::create(&probe).and_then(|_| fs::remove_file(&probe)).map_err(|e| bad("cannot write to it", &e))?;
        let ledger = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(root.join(LEDGER))
            .map_err(|e| bad("cannot open its usage file", &e))?;
        flock(&ledger, FlockOperation::LockExclusive)
            .and_then(|()| flock(&ledger, FlockOperation::Unlock))
            .map_err(|e| bad("file locks (flock) do not work there", &e))?;
        let open = lru::LruCache::new(open_entries());
        Ok(Self {
            root: root.to_path_buf(),
            dir,
            bound,
            ledger: Mutex::new(ledger),
            open: Mutex::new(open),
            fetching: Mutex::new(HashMap::new()),
            counters: Counters::default(),
            warned: AtomicBool::new(false),
            deferred: Mutex::new(Vec::new()),
            spare: Mutex::new((Vec::new(), 0)),
        })
    }

    /// An empty body buffer for a download: a whole-block one while there are (spare, or
    /// new within [`WHOLE_BLOCK_BUFFERS`]), else a streaming one.
    fn body_buffer(&self) -> Vec<u8> {
        let mut spare = self.spare.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(buf) = spare.0.pop() {
            return buf;
        }
        if spare.1 < WHOLE_BLOCK_BUFFERS {
            let mut buf = Vec::new();
            if buf.try_reserve_exact(BLOCK_BYTES as usize).is_ok() {
                spare.1 += 1;
                return buf;
            }
        }
        Vec::with_capacity(STREAM_BUFFER)
    }

    /// Takes back a whole-block buffer for the next download (a streaming one is dropped).
    fn recycle(&self, mut buf: Vec<u8>) {
        if buf.capacity() >= BLOCK_BYTES as usize {
            buf.clear();
            self.spare.lock().unwrap_or_else(PoisonError::into_inner).0.push(buf);
        }
    }

    /// Whether the cache keeps object `key` (data files: immutable).
    pub(crate) fn caches(key: &str) -> bool {
        key.starts_with("data/")
    }

    pub(crate) fn stats(&self) -> CacheStats {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CacheStats {
            hits: l(&c.hits),
            misses: l(&c.misses),
            direct: l(&c.direct),
            read_bytes: l(&c.read_bytes),
            written_bytes: l(&c.written_bytes),
            evictions: l(&c.evictions),
            corrupt: l(&c.corrupt),
            errors: l(&c.errors),
        }
    }

    /// Counts a failure of the cache itself (the caller goes on without it); the first is
    /// printed.
    fn failed(&self, what: &str, e: &io::Error) {
        bump(&self.counters.errors, 1);
        if !self.warned.swap(true, Ordering::Relaxed) {
            eprintln!(
                "tessera-loader: disk cache {}: {what}: {e}; reading from the store instead where it fails \
                 (IoStats::cache.errors counts these)",
                self.root.display()
            );
        }
    }

    /// Runs `requests` (as [`Fetcher::run_requests`]) through the cache: each destination's
    /// bytes come from the cache blocks they fall in, hits read from disk and misses fetched
    /// whole (one range GET per block), at most `concurrency` blocks at a time. A destination
    /// with a checksum is verified here; one whose bytes came from the cache and fail is
    /// fetched again from the store.
    ///
    /// # Errors
    /// As [`Fetcher::run_requests`].
    pub(crate) async fn run(
        &self,
        f: &Fetcher,
        store: &tessera::Store,
        requests: &mut [RangeRequest<'_>],
        concurrency: usize,
        stopped: &AtomicBool,
    ) -> Result<()> {
        for req in requests.iter_mut().filter(|r| !Self::caches(r.key)) {
            f.run_direct(store, std::slice::from_mut(req), 1, stopped).await?;
        }
        let n: usize = requests.iter().filter(|r| Self::caches(r.key)).map(|r| r.dests.len()).sum();
        // Per destination: served from the cache (in part), and verified as a whole piece.
        let mut cached = vec![false; n];
        let mut verified = vec![false; n];
        let mut refetch = Vec::new();
        // Blocks read in part before the epoch's first batch, fetched whole now (at most as
        // many again as this read's own blocks, so no batch takes them all).
        let deferred = self.take_deferred(requests.len());
        for round in 0..2 {
            let only = (round == 1).then_some(refetch.as_slice());
            {
                let mut jobs = Self::jobs(requests, only);
                if only.is_none() {
                    Self::add_deferred(&mut jobs, &deferred);
                }
                self.drive(f, store, &mut jobs, concurrency, stopped).await?;
                for job in &jobs {
                    for (&id, piece) in job.ids.iter().zip(&job.pieces) {
                        cached[id] = job.from_cache;
                        verified[id] = piece.check.is_some() && piece.verified;
                    }
                }
            }
            let mut again = Vec::new();
            let dests = requests.iter_mut().filter(|r| Self::caches(r.key)).flat_map(|r| r.dests.iter_mut());
            for (id, d) in dests.enumerate() {
                if only.is_some_and(|o| o.binary_search(&id).is_err()) {
                    continue;
                }
                if verified[id] {
                    d.verified = true;
                } else if d.check.is_some() {
                    d.landed();
                    if !d.verified && cached[id] {
                        again.push(id);
                    }
                }
            }
            if again.is_empty() {
                break;
            }
            refetch = again;
        }
        Ok(())
    }

    /// Serves `requests` from committed entries alone, on the calling thread, when every
    /// block they touch is one (the warm epochs' case): no runtime, no futures, no queue for
    /// a block. `Ok(false)`, with nothing promised about the destinations, when any block
    /// is missing, unreadable or fails a checksum, when a request is not cached, or while
    /// deferred blocks wait to be fetched: then [`DiskCache::run`] serves them (again).
    ///
    /// # Errors
    /// A fatal error of a read (a wanted byte past the file's end).
    pub(crate) fn serve_hits(&self, requests: &mut [RangeRequest<'_>]) -> Result<bool> {
        if requests.iter().any(|r| !Self::caches(r.key))
            || !self.deferred.lock().unwrap_or_else(PoisonError::into_inner).is_empty()
        {
            return Ok(false);
        }
        let n: usize = requests.iter().map(|r| r.dests.len()).sum();
        let mut verified = vec![false; n];
        let hits: Vec<(u64, u64)>;
        {
            let mut jobs = Self::jobs(requests, None);
            // Every entry there before any is read: in a cold epoch most waves miss some
            // block, and their hits would be read twice.
            let mut found = Vec::with_capacity(jobs.len());
            for job in &jobs {
                let name = entry_name(job.key, job.block);
                match self.entry(&name, job.key, job.block) {
                    Ok(Some(entry)) => found.push((name, entry)),
                    Ok(None) | Err(()) => return Ok(false),
                }
            }
            for (job, (name, entry)) in jobs.iter_mut().zip(&found) {
                match self.read_from(name, entry, job) {
                    Ok(Looked::Hit) => {}
                    Ok(Looked::Miss | Looked::Corrupt) | Err(Attempt::Transient(_)) => return Ok(false),
                    Err(Attempt::Fatal(e)) => return Err(e),
                }
                for (&id, piece) in job.ids.iter().zip(&job.pieces) {
                    verified[id] = piece.check.is_some() && piece.verified;
                }
            }
            // Counted only once every block hit: otherwise the async path serves (and counts)
            // them all.
            hits = jobs.iter().map(|j| (1, j.pieces.iter().map(|p| p.buf.len() as u64).sum::<u64>())).collect();
        }
        for (d, &v) in requests.iter_mut().flat_map(|r| r.dests.iter_mut()).zip(&verified) {
            if v {
                d.verified = true;
            } else if d.check.is_some() {
                // A page split between two blocks: checked whole now that both landed.
                d.landed();
                if !d.verified {
                    return Ok(false); // the async path refetches it
                }
            }
        }
        for (n, bytes) in hits {
            bump(&self.counters.hits, n);
            bump(&self.counters.read_bytes, bytes);
        }
        Ok(true)
    }

    /// Up to `max(16, 2 × wanted)` deferred blocks, unless this thread fills its epoch's
    /// first batch.
    fn take_deferred(&self, wanted: usize) -> Vec<(String, u64)> {
        if FirstBatch::active() {
            return Vec::new();
        }
        let mut deferred = self.deferred.lock().unwrap_or_else(PoisonError::into_inner);
        let n = deferred.len().min(wanted.saturating_mul(2).max(16));
        let at = deferred.len() - n;
        deferred.split_off(at)
    }

    /// Adds a job without pieces (fetch and keep the block) for each of `deferred` that no
    /// job of this read covers.
    fn add_deferred<'r>(jobs: &mut Vec<BlockJob<'r>>, deferred: &'r [(String, u64)]) {
        for (key, block) in deferred {
            if !jobs.iter().any(|j| j.key == key && j.block == *block) {
                jobs.push(BlockJob {
                    key,
                    block: *block,
                    force: false,
                    ids: Vec::new(),
                    pieces: Vec::new(),
                    from_cache: false,
                });
            }
        }
    }

    /// Reads only the wanted bytes of a block that missed (one range GET over its pieces),
    /// and notes the block to be fetched whole later.
    async fn serve_direct(
        &self,
        f: &Fetcher,
        store: &tessera::Store,
        job: &mut BlockJob<'_>,
    ) -> std::result::Result<(), Attempt> {
        let base = job.block * BLOCK_BYTES;
        let first = job.pieces.iter().map(|p| p.off).min().unwrap_or(0);
        let last = job.pieces.iter().map(Dest::end).max().unwrap_or(first);
        let mut pieces = std::mem::take(&mut job.pieces);
        for p in &mut pieces {
            p.off -= first;
        }
        let mut req = RangeRequest { key: job.key, range: base + first..base + last, dests: pieces };
        let got = f.get_into(store, &mut req).await;
        job.pieces = req.dests;
        for p in &mut job.pieces {
            p.off += first;
        }
        got?;
        bump(&self.counters.direct, 1);
        self.deferred.lock().unwrap_or_else(PoisonError::into_inner).push((job.key.to_string(), job.block));
        Ok(())
    }

    /// The cache blocks the destinations of `requests` fall in (only those numbered in
    /// `only`, then fetched again whatever the cache holds), each with its pieces.
    fn jobs<'r>(requests: &'r mut [RangeRequest<'_>], only: Option<&[usize]>) -> Vec<BlockJob<'r>> {
        let mut jobs: Vec<BlockJob<'r>> = Vec::new();
        let mut index: HashMap<(&'r str, u64), usize> = HashMap::new();
        let mut id = 0usize;
        for req in requests.iter_mut().filter(|r| Self::caches(r.key)) {
            let key: &'r str = req.key;
            let base = req.range.start;
            for d in &mut req.dests {
                let this = id;
                id += 1;
                if d.buf.is_empty() || only.is_some_and(|o| o.binary_search(&this).is_err()) {
                    continue;
                }
                let (start, check) = (base + d.off, d.check);
                let end = start + d.buf.len() as u64;
                let mut rest: &'r mut [u8] = &mut *d.buf;
                let mut at = start;
                while at < end {
                    let block = at / BLOCK_BYTES;
                    let cut = ((block + 1) * BLOCK_BYTES).min(end);
                    let (piece, tail) = std::mem::take(&mut rest).split_at_mut((cut - at) as usize);
                    rest = tail;
                    let whole = at == start && cut == end;
                    let j = *index.entry((key, block)).or_insert_with(|| {
                        jobs.push(BlockJob {
                            key,
                            block,
                            force: only.is_some(),
                            ids: Vec::new(),
                            pieces: Vec::new(),
                            from_cache: false,
                        });
                        jobs.len() - 1
                    });
                    let piece =
                        Dest { check: if whole { check } else { None }, ..Dest::new(at - block * BLOCK_BYTES, piece) };
                    jobs[j].ids.push(this);
                    jobs[j].pieces.push(piece);
                    at = cut;
                }
            }
        }
        for job in &mut jobs {
            let mut pairs: Vec<(usize, Dest<'r>)> = job.ids.drain(..).zip(job.pieces.drain(..)).collect();
            pairs.sort_by_key(|(_, d)| d.off);
            (job.ids, job.pieces) = pairs.into_iter().unzip();
        }
        jobs
    }

    /// Serves every job, at most `concurrency` at once, repeating those that failed
    /// transiently after a backoff (as [`Fetcher::run_direct`]).
    async fn drive(
        &self,
        f: &Fetcher,
        store: &tessera::Store,
        jobs: &mut [BlockJob<'_>],
        concurrency: usize,
        stopped: &AtomicBool,
    ) -> Result<()> {
        let mut rounds = Rounds::new(jobs.len());
        loop {
            if stopped.load(Ordering::Acquire) {
                return Err(LoaderError::Stopped);
            }
            let pending = jobs.iter_mut().enumerate().filter(|(i, _)| !rounds.done[*i]);
            let futs = pending.map(|(i, job)| async move { (i, self.serve(f, store, job, stopped).await) });
            let results: Vec<(usize, std::result::Result<(), Attempt>)> =
                futures::stream::iter(futs).buffer_unordered(concurrency.max(1)).collect().await;
            match rounds.settle(f, results, &|i| jobs[i].key.to_string())? {
                None => return Ok(()),
                Some(backoff) => backoff_wait(backoff, stopped).await?,
            }
        }
    }

    /// One attempt at one block: from the cache, or fetched (by this process, holding the
    /// entry's lock, or by another one it waits for) and then kept.
    async fn serve(
        &self,
        f: &Fetcher,
        store: &tessera::Store,
        job: &mut BlockJob<'_>,
        stopped: &AtomicBool,
    ) -> std::result::Result<(), Attempt> {
        let name = entry_name(job.key, job.block);
        let path = self.dir.join(&name);
        job.from_cache = false;
        for p in &mut job.pieces {
            p.verified = false; // a repeated attempt lands (and verifies) its bytes again
        }
        if !job.force && matches!(self.read(&name, job, false)?, Looked::Hit) {
            self.count_hit(job);
            return Ok(());
        }
        if !job.force && !job.pieces.is_empty() && FirstBatch::active() {
            return self.serve_direct(f, store, job).await;
        }
        // This process's threads queue for the block without polling; the claim on the
        // temporary file then orders the processes.
        let _turn = self.turn(&name).await;
        let tmp = self.dir.join(format!("{name}{TMP_SUFFIX}"));
        let mut unreadable = 0;
        let mut claim = loop {
            // Forced: the entry is replaced whatever it holds.
            let entry = (!job.force && unreadable < 2).then_some(path.as_path());
            match Claim::take(&tmp, entry, stopped).await {
                Ok(Taken::Claim(claim)) => break Some(claim),
                Ok(Taken::Stopped) => return Err(Attempt::Fatal(LoaderError::Stopped)),
                Ok(Taken::Committed) => match self.read(&name, job, true)? {
                    Looked::Hit => {
                        self.count_hit(job);
                        return Ok(());
                    }
                    // Evicted since, or there but not openable: claim it (at most twice).
                    Looked::Miss => unreadable += 1,
                    Looked::Corrupt => self.drop_corrupt(&name, &path),
                },
                Err(e) => {
                    self.failed("claiming an entry", &e);
                    break None;
                }
            }
        };
        if claim.is_some() {
            // Whoever held the claim may have committed the block between the last look and
            // ours (read afresh: a file this process has open may be one since replaced).
            let looked = if job.force { Looked::Corrupt } else { self.read(&name, job, true)? };
            match looked {
                Looked::Hit => {
                    self.count_hit(job);
                    return Ok(());
                }
                Looked::Miss => {}
                Looked::Corrupt => self.drop_corrupt(&name, &path),
            }
        }
        let out = match &claim {
            Some(c) => match c.writer(self.body_buffer()) {
                Ok(w) => Some(w),
                Err(e) => {
                    self.failed("creating an entry", &e);
                    None
                }
            },
            None => None,
        };
        let mut sink =
            Download { key: job.key, out, error: None, crcs: Crcs::default(), pieces: &mut job.pieces, first: 0 };
        let range = job.block * BLOCK_BYTES..(job.block + 1) * BLOCK_BYTES;
        let got = f.get_body(store, job.key, range, &mut sink).await;
        let Download { out, error, crcs, .. } = sink;
        // A failed download's claim removes its temporary file as it drops.
        let len = match got {
            Ok(len) => len,
            Err(e) => {
                if let Some(out) = out {
                    self.recycle(out.buf);
                }
                return Err(e);
            }
        };
        bump(&self.counters.misses, 1);
        // Keep the block only if every page wanted whole passed its checksum as it landed.
        let sound = job.pieces.iter().all(|p| p.check.is_none() || p.verified);
        match (out, claim.as_mut()) {
            (Some(out), Some(claim)) => {
                let header = encode_header(job.key, job.block, len, &crcs.finish());
                if let Some(size) = self.keep(out, error, sound, &header, claim, &path) {
                    bump(&self.counters.written_bytes, size);
                }
            }
            (Some(out), None) => self.recycle(out.buf), // a writer comes only with a claim
            (None, _) => {
                if let Some(e) = error {
                    self.failed("writing an entry", &e);
                }
            }
        }
        drop(claim);
        Ok(())
    }

    /// Counts `job`, served from its entry, in the statistics.
    fn count_hit(&self, job: &BlockJob<'_>) {
        bump(&self.counters.hits, 1);
        bump(&self.counters.read_bytes, job.pieces.iter().map(|p| p.buf.len() as u64).sum());
    }

    /// Finishes a download's temporary entry `out`: its body and `header` written and the
    /// entry committed (see [`DiskCache::commit`]) when the download wrote without `error`
    /// and its pages were `sound`; the entry's size when kept. The body buffer is recycled.
    fn keep(
        &self,
        out: EntryWriter,
        error: Option<io::Error>,
        sound: bool,
        header: &[u8],
        claim: &mut Claim,
        path: &Path,
    ) -> Option<u64> {
        let mut out = out;
        let r = match error {
            Some(e) => Err(e),
            None if !sound => Ok(false),
            None => out.flush().and_then(|()| out.file.write_all_at(header, 0)).and_then(|()| {
                // The body ends where the writer stopped: after the header's room.
                self.commit(claim, path, out.at)
            }),
        };
        let size = out.at;
        self.recycle(out.buf);
        match r {
            Ok(kept) => kept.then_some(size),
            Err(e) => {
                self.failed("writing an entry", &e);
                None
            }
        }
    }

    /// Removes entry `name`, found corrupt.
    fn drop_corrupt(&self, name: &str, path: &Path) {
        self.forget(name);
        match fs::remove_file(path) {
            Ok(()) => bump(&self.counters.corrupt, 1),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => self.failed("removing a corrupt entry", &e),
        }
    }

    /// Serves `job` from its entry if there is a sound one (`fresh`: opened again, not the
    /// file this process may have open).
    fn read(&self, name: &str, job: &mut BlockJob<'_>, fresh: bool) -> std::result::Result<Looked, Attempt> {
        if fresh {
            self.forget(name);
        }
        match self.entry(name, job.key, job.block) {
            Ok(Some(entry)) => self.read_from(name, &entry, job),
            Ok(None) => Ok(Looked::Miss),
            Err(()) => Ok(Looked::Corrupt),
        }
    }

    /// Serves `job` from `entry`, the open entry `name`.
    fn read_from(&self, name: &str, entry: &OpenEntry, job: &mut BlockJob<'_>) -> std::result::Result<Looked, Attempt> {
        if job.pieces.iter().any(|p| p.end() > entry.header.data_len) {
            // The entry holds the block up to the file's end (checked): wanted bytes past it
            // are past the end of the file.
            return Err(Attempt::Fatal(LoaderError::corrupt(job.key, "file is shorter than its footer says")));
        }
        // A checksum mismatch, or a read error (a file cut short since it was opened).
        if !read_pieces(entry, &mut job.pieces).unwrap_or(false) {
            self.forget(name);
            return Ok(Looked::Corrupt);
        }
        let mut touched = entry.touched.lock().unwrap_or_else(PoisonError::into_inner);
        if touched.elapsed() >= TOUCH_EVERY {
            // The LRU age; failing to set it (another user's entry) only ages the entry.
            let _ = entry.file.set_modified(SystemTime::now());
            *touched = Instant::now();
        }
        drop(touched);
        job.from_cache = true;
        Ok(Looked::Hit)
    }

    /// The open entry `name`: kept open, or opened and its header checked (`Ok(None)`: no
    /// entry; `Err(())`: a corrupt one).
    fn entry(&self, name: &str, key: &str, block: u64) -> std::result::Result<Option<Arc<OpenEntry>>, ()> {
        if let Some(e) = self.open.lock().unwrap_or_else(PoisonError::into_inner).get(name) {
            return Ok(Some(e.clone()));
        }
        let file = match File::open(self.dir.join(name)) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                self.failed("opening an entry", &e);
                return Ok(None);
            }
        };
        let meta = file.metadata().map_err(drop)?;
        let max = (HEADER_FIXED + key.len() + 4 * CHUNKS_PER_BLOCK) as u64;
        let mut head = vec![0u8; meta.len().min(max) as usize];
        file.read_exact_at(&mut head, 0).map_err(drop)?;
        let header = decode_header(&head, key, block, meta.len()).ok_or(())?;
        // When the entry was last touched, as far as the next touch is concerned.
        let age = meta.modified().ok().and_then(|m| m.elapsed().ok()).unwrap_or(TOUCH_EVERY);
        let touched = Instant::now().checked_sub(age.min(TOUCH_EVERY)).unwrap_or_else(Instant::now);
        let entry = Arc::new(OpenEntry { file, header, touched: Mutex::new(touched) });
        self.open.lock().unwrap_or_else(PoisonError::into_inner).put(name.to_string(), entry.clone());
        Ok(Some(entry))
    }

    /// Waits until no other thread of this process is fetching entry `name`, and holds that
    /// turn until dropped.
    async fn turn(&self, name: &str) -> Turn<'_> {
        let queue = {
            let mut fetching = self.fetching.lock().unwrap_or_else(PoisonError::into_inner);
            fetching.entry(name.to_string()).or_default().clone()
        };
        let held = Some(queue.clone().lock_owned().await);
        Turn { cache: self, name: name.to_string(), queue, held }
    }

    /// Closes entry `name` if this process has it open.
    fn forget(&self, name: &str) {
        self.open.lock().unwrap_or_else(PoisonError::into_inner).pop(name);
    }

    /// Renames a complete temporary entry (`claim`) of `size` bytes into place, first adding it to the
    /// ledger and, when that passes the bound, evicting (see the module docs). `false` when
    /// the entry does not fit the bound at all.
    fn commit(&self, claim: &mut Claim, path: &Path, size: u64) -> io::Result<bool> {
        if size > self.bound {
            return Ok(false);
        }
        let ledger = self.ledger.lock().unwrap_or_else(PoisonError::into_inner);
        flock(&*ledger, FlockOperation::LockExclusive)?;
        let r = (|| {
            let mut used = read_ledger(&ledger);
            if used.is_none_or(|u| u.saturating_add(size) > self.bound) {
                let target = self.bound.saturating_sub(size).saturating_sub(self.bound / 8);
                used = Some(self.evict(target)?);
            }
            write_ledger(&ledger, used.unwrap_or(0) + size)?;
            claim.commit(path)
        })();
        let _ = flock(&*ledger, FlockOperation::Unlock);
        r.map(|()| true)
    }

    /// Scans every dataset's entries, deletes the least recently used ones until the rest
    /// sum to at most `target` bytes, and returns that sum. Temporary files of downloads
    /// nobody holds the lock of any more (a process that died) are removed on the way.
    fn evict(&self, target: u64) -> io::Result<u64> {
        let mut entries: Vec<(SystemTime, u64, PathBuf, String)> = Vec::new();
        for ns in fs::read_dir(&self.root)? {
            let ns = ns?;
            if !ns.file_type()?.is_dir() {
                continue;
            }
            let listing = match fs::read_dir(ns.path()) {
                Ok(l) => l,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            for e in listing {
                let e = e?;
                let Ok(name) = e.file_name().into_string() else { continue };
                if let Some(entry) = name.strip_suffix(TMP_SUFFIX) {
                    if entry.ends_with(ENTRY_SUFFIX) {
                        reap(&e.path());
                    }
                    continue;
                }
                if !name.ends_with(ENTRY_SUFFIX) {
                    continue;
                }
                let meta = match e.metadata() {
                    Ok(m) => m,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                };
                if meta.is_file() {
                    entries.push((meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.len(), e.path(), name));
                }
            }
        }
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        entries.sort_by_key(|e| e.0);
        for (_, len, path, name) in entries {
            if total <= target {
                break;
            }
            match fs::remove_file(&path) {
                Ok(()) => bump(&self.counters.evictions, 1),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            self.forget(&name);
            total -= len;
        }
        Ok(total)
    }
}

/// How many entries a process keeps open ([`OPEN_ENTRIES_MIN`]).
fn open_entries() -> NonZeroUsize {
    use rustix::process::{Resource, getrlimit};
    let limit = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    let n = usize::try_from(limit / 4).unwrap_or(usize::MAX).clamp(OPEN_ENTRIES_MIN, OPEN_ENTRIES_MAX);
    NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN)
}

/// Removes `tmp`, the temporary file of an entry, unless a live download holds its claim
/// (the claim, taken here, removes the file as it drops).
fn reap(tmp: &Path) {
    let _ = Claim::try_take(tmp);
}

/// The ledger's byte count, if it holds a sound one.
fn read_ledger(file: &File) -> Option<u64> {
    let mut b = [0u8; 16];
    file.read_exact_at(&mut b, 0).ok()?;
    let used = u64::from_le_bytes(b[..8].try_into().ok()?);
    let check = u64::from_le_bytes(b[8..].try_into().ok()?);
    (check == !used).then_some(used)
}

fn write_ledger(file: &File, used: u64) -> io::Result<()> {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&used.to_le_bytes());
    b[8..].copy_from_slice(&(!used).to_le_bytes());
    file.write_all_at(&b, 0)
}

/// Reads the pieces of a block from its entry and checks them: a whole stored page by its
/// own CRC-32 from the data file's footer (one pass, end to end; the piece is then
/// `verified`), anything else by the entry's CRCs of every chunk it touches. `Ok(false)` on
/// a mismatch.
fn read_pieces(entry: &OpenEntry, pieces: &mut [Dest<'_>]) -> io::Result<bool> {
    let h = &entry.header;
    for p in pieces.iter_mut().filter(|p| p.check.is_some()) {
        entry.file.read_exact_at(p.buf, h.len + p.off)?;
        p.landed();
        if !p.verified {
            return Ok(false);
        }
    }
    let mut pieces: Vec<&mut Dest<'_>> = pieces.iter_mut().filter(|p| p.check.is_none()).collect();
    let mut i = 0;
    while i < pieces.len() {
        // A run: pieces that share chunks, read and checked together.
        let first = pieces[i].off / CHUNK_BYTES;
        let mut end = pieces[i].end().div_ceil(CHUNK_BYTES);
        let mut j = i + 1;
        while j < pieces.len() && pieces[j].off / CHUNK_BYTES < end {
            end = end.max(pieces[j].end().div_ceil(CHUNK_BYTES));
            j += 1;
        }
        let span = first * CHUNK_BYTES..(end * CHUNK_BYTES).min(h.data_len);
        let want =
            h.crcs.get(first as usize..end as usize).ok_or_else(|| io::Error::other("chunk outside the entry"))?;
        let sound = if j == i + 1 {
            read_one(entry, &span, pieces[i], want)?
        } else {
            read_run(entry, &span, &mut pieces[i..j], want)?
        };
        if !sound {
            return Ok(false);
        }
        i = j;
    }
    Ok(true)
}

/// One piece read straight into its buffer, with the rest of its chunks beside it.
fn read_one(entry: &OpenEntry, span: &std::ops::Range<u64>, piece: &mut Dest<'_>, want: &[u32]) -> io::Result<bool> {
    let at = entry.header.len;
    let before = (piece.off - span.start) as usize;
    let after = (span.end - piece.end()) as usize;
    SCRATCH.with(|s| {
        let mut edges = s.borrow_mut();
        edges.resize(before + after, 0);
        let (pre, post) = edges.split_at_mut(before);
        entry.file.read_exact_at(pre, at + span.start)?;
        entry.file.read_exact_at(piece.buf, at + piece.off)?;
        entry.file.read_exact_at(post, at + piece.end())?;
        let mut crcs = Crcs::default();
        crcs.update(pre);
        crcs.update(piece.buf);
        crcs.update(post);
        Ok(crcs.finish() == want)
    })
}

/// Pieces sharing chunks: their span read once, checked, and copied out.
fn read_run(
    entry: &OpenEntry,
    span: &std::ops::Range<u64>,
    pieces: &mut [&mut Dest<'_>],
    want: &[u32],
) -> io::Result<bool> {
    SCRATCH.with(|s| {
        let mut bytes = s.borrow_mut();
        bytes.resize((span.end - span.start) as usize, 0);
        entry.file.read_exact_at(&mut bytes, entry.header.len + span.start)?;
        let mut crcs = Crcs::default();
        crcs.update(&bytes);
        if crcs.finish() != want {
            return Ok(false);
        }
        for p in pieces {
            let from = (p.off - span.start) as usize;
            p.buf.copy_from_slice(&bytes[from..from + p.buf.len()]);
        }
        Ok(true)
    })
}

/// A block's body on its way from the store: into the temporary entry (when this process
/// keeps it) and the pieces that want it, CRC'd per chunk as it passes.
/// A temporary entry being written: the body collects in `buf` and is written once, at `at`
/// (after the header's room), when the download ends.
struct EntryWriter {
    file: File,
    buf: Vec<u8>,
    at: u64,
}

impl Write for EntryWriter {
    /// Collects `bytes`; what would not fit the buffer's capacity goes to the file first (a
    /// whole-block buffer never fills: a body is at most one block).
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.buf.len() + bytes.len() > self.buf.capacity() {
            self.flush()?;
        }
        if bytes.len() > self.buf.capacity() {
            self.file.write_all_at(bytes, self.at)?;
            self.at += bytes.len() as u64;
        } else {
            self.buf.extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }

    /// Writes the collected bytes at `at`, which moves past them.
    fn flush(&mut self) -> io::Result<()> {
        self.file.write_all_at(&self.buf, self.at)?;
        self.at += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }
}

struct Download<'j, 'r> {
    key: &'j str,
    out: Option<EntryWriter>,
    error: Option<io::Error>,
    crcs: Crcs,
    pieces: &'j mut [Dest<'r>],
    /// The first piece not complete yet.
    first: usize,
}

impl Download<'_, '_> {
    fn write(&mut self, r: impl FnOnce(&mut EntryWriter) -> io::Result<()>) {
        if let Some(out) = &mut self.out
            && let Err(e) = r(out)
        {
            self.error = Some(e);
            self.out = None;
        }
    }
}

impl BodySink for Download<'_, '_> {
    fn start(&mut self, len: u64) -> std::result::Result<(), Attempt> {
        if self.pieces.iter().any(|p| p.end() > len) {
            return Err(Attempt::Fatal(LoaderError::corrupt(self.key, "file is shorter than its footer says")));
        }
        let at = header_len(self.key, len);
        self.write(|out| {
            out.at = at;
            Ok(())
        });
        Ok(())
    }

    fn chunk(&mut self, pos: u64, bytes: &[u8]) {
        self.write(|out| out.write_all(bytes));
        self.crcs.update(bytes);
        scatter(&mut self.pieces[self.first..], pos, bytes);
        let end = pos + bytes.len() as u64;
        while self.first < self.pieces.len() && self.pieces[self.first].end() <= end {
            self.pieces[self.first].landed();
            self.first += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_every_field_is_checked() {
        let key = "data/0123.tsd";
        let crcs = [1u32, 2, 3];
        let data_len = 2 * CHUNK_BYTES + 5;
        let h = encode_header(key, 7, data_len, &crcs);
        assert_eq!(h.len() as u64, header_len(key, data_len));
        let file_len = h.len() as u64 + data_len;
        let got = decode_header(&h, key, 7, file_len).unwrap();
        assert_eq!((got.len, got.data_len, got.crcs.as_slice()), (h.len() as u64, data_len, &crcs[..]));
        // Longer input (the header is read with room to spare) is fine.
        let mut long = h.clone();
        long.extend_from_slice(&[9; 40]);
        assert!(decode_header(&long, key, 7, file_len).is_some());
        assert!(decode_header(&h, "data/0124.tsd", 7, file_len).is_none(), "another key");
        assert!(decode_header(&h, key, 8, file_len).is_none(), "another block");
        assert!(decode_header(&h, key, 7, file_len - 1).is_none(), "a truncated file");
        assert!(decode_header(&h[..h.len() - 1], key, 7, file_len).is_none(), "a truncated header");
        for i in 0..h.len() {
            let mut bad = h.clone();
            bad[i] ^= 0x10;
            assert!(decode_header(&bad, key, 7, file_len).is_none(), "byte {i} flipped");
        }
    }

    #[test]
    fn chunk_crcs_do_not_depend_on_how_the_bytes_arrive() {
        let bytes: Vec<u8> = (0..3 * CHUNK_BYTES as usize + 100).map(|i| (i * 7) as u8).collect();
        let whole: Vec<u32> = bytes.chunks(CHUNK_BYTES as usize).map(crc32fast::hash).collect();
        for step in [1usize, 999, CHUNK_BYTES as usize, 100_000] {
            let mut c = Crcs::default();
            for piece in bytes.chunks(step) {
                c.update(piece);
            }
            assert_eq!(c.finish(), whole, "step {step}");
        }
    }

    #[test]
    fn entry_names_are_safe_file_names() {
        let n = entry_name("data/../x y/é.tsd", 3);
        assert!(n.ends_with(".3.tc") && !n.contains('/') && n.is_ascii(), "{n}");
        assert_ne!(entry_name("data/a.tsd", 0), entry_name("data/a.tsd", 1));
        assert_ne!(entry_name("data/a.tsd", 0), entry_name("other/a.tsd", 0));
    }

    #[test]
    fn a_claim_excludes_other_holders_and_is_removed_with_its_owner_unless_committed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.tc.tmp");
        let held = Claim::try_take(&path).unwrap().expect("free");
        assert!(Claim::try_take(&path).unwrap().is_none(), "held by another open file");
        drop(held);
        assert!(!path.exists(), "the owner removes its temporary file");
        // A claim's file renamed into place (committed) stays, and frees the path: a waiter
        // that opened the old file before the rename does not hold a claim on it.
        let mut held = Claim::try_take(&path).unwrap().expect("free");
        let mut w = held.writer(Vec::with_capacity(2)).unwrap();
        w.write_all(b"block").unwrap();
        w.flush().unwrap();
        drop(w);
        let waiter = OpenOptions::new().read(true).write(true).open(&path).unwrap();
        let entry = dir.path().join("e.tc");
        held.commit(&entry).unwrap();
        drop(held);
        assert_eq!(fs::read(&entry).unwrap(), b"block");
        flock(&waiter, FlockOperation::NonBlockingLockExclusive).expect("the committed file is unlocked");
        let again = Claim::try_take(&path).unwrap().expect("a new temporary file");
        assert_eq!(fs::metadata(&path).unwrap().len(), 0);
        drop(again);
        assert!(!path.exists());
    }

    #[test]
    fn an_unusable_directory_is_a_config_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let e = DiskCache::open(&file.join("cache"), 64 << 20, "s3://b/ds").unwrap_err();
        assert!(matches!(e, LoaderError::Config(_)), "{e}");
        let e = DiskCache::open(dir.path(), 1 << 20, "s3://b/ds").unwrap_err();
        assert!(matches!(e, LoaderError::Config(_)) && e.to_string().contains("too small"), "{e}");
        assert!(DiskCache::open(&dir.path().join("cache"), 64 << 20, "s3://b/ds").is_ok());
    }
}
