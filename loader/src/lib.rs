//! # The Tessera training loader, framework-free
//!
//! Streams a pinned version of a Tessera dataset (from a local directory or any object store)
//! into batches of plain host buffers, in an order that is a pure function of (dataset
//! version, seed, epoch, shuffle settings) — never of the number of ranks or worker threads —
//! with exact mid-epoch resume. Framework adapters wrap the buffers as their own tensors
//! without copying: `tessera-loader-tch` (tch/libtorch) and the Python package. Nothing here
//! depends on a framework: batches hold the stored element types ([`Elem`]) in a
//! [`HostLayout`] (fixed, padded or packed); an adapter whose framework lacks unsigned types
//! asks for them widened when it opens the loader ([`BufferAllocator::unsigned`]), and
//! where batches go (a GPU) is the adapter's business.
//!
//! ```
//! use tessera::{Batch as Rows, Column, ColumnData, DType, Dataset, Schema, WriteOptions};
//! use tessera_loader::{AlignedBuffer, Elem, Loader, LoaderConfig, ShuffleMode};
//!
//! let dir = tempfile::tempdir()?;
//! let root = dir.path().to_str().unwrap();
//! let schema = Schema::new([Column::new("label", DType::I64, &[])])?;
//! let labels: Vec<i64> = (0..10).collect();
//! Dataset::create(root, schema, &WriteOptions::default())?.append(
//!     &Rows::new().with("label", ColumnData::from_scalars(&labels))?,
//!     "ten rows",
//!     WriteOptions::default(),
//! )?;
//! let loader = Loader::open(LoaderConfig::new(root).with_batch_size(5).with_shuffle(ShuffleMode::Global))?;
//! let mut seen = Vec::new();
//! for batch in loader.epoch(0)? {
//!     let batch = batch?;
//!     let col = &batch.columns[0];
//!     assert_eq!((col.elem, col.shape.as_slice()), (Elem::I64, &[5i64][..]));
//!     // The loader's own buffers (`Loader::open`): typed `AlignedBuffer`s.
//!     let bytes = batch.with_buffer(0, |b: &AlignedBuffer| b.bytes()[..col.byte_len].to_vec());
//!     let values: Vec<i64> =
//!         bytes.unwrap().chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
//!     assert_eq!(values, batch.rows.iter().map(|&r| r as i64).collect::<Vec<_>>());
//!     seen.extend(values);
//! }
//! seen.sort_unstable();
//! assert_eq!(seen, labels);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Order, sharding and resume ([`sampler`])
//! The epoch's global order G comes from the frozen sampler. Rank `r` of `W` takes the
//! `r`-th block of `batch_size` rows of each global batch of `batch_size × W` rows, so ranks
//! are disjoint and every rank yields the same number of batches. By default the last global
//! batch is **padded by repeating rows from the start of G** (every row is seen at least once,
//! at most `batch_size × W − 1` rows twice); `drop_last = true` drops it instead.
//! Rank and world size come from [`LoaderConfig::dist`] or torchrun's `RANK`/`WORLD_SIZE`/
//! `LOCAL_RANK` ([`LoaderConfig::with_torchrun_env`]).
//!
//! [`EpochIter::state`] is a 62-byte [`LoaderState`]; [`Loader::resume`] yields exactly the
//! remaining batches, also with another world size when the global batch is unchanged, and
//! refuses a state from another dataset version, seed or order settings.
//!
//! A **view** ([`LoaderConfig::with_view`], SPEC.md §"Views") is read exactly like a version:
//! the order is over the view's positions, each mapped to its row of the pinned version
//! ([`HostBatch::rows`] are the version's row ids), and the resume state binds to the view
//! ([`view_id`]), so a state from another view or from the bare version is refused.
//!
//! ## Shuffle modes and their quality
//! * Global ([`ShuffleMode::Global`]): a pseudo-random permutation of all rows, a keyed
//!   bijection evaluated per position (no memory per row, whatever N).
//!   Adjacent-pair retention ≈ 1/N, mean normalised displacement ≈ 1/3 — the reference
//!   quality. Reads are random: each batch touches up to `batch_size` pages anywhere.
//! * Block ([`ShuffleMode::Block`]): the rows are cut into blocks of a mean fragment's rows
//!   (a whole fragment each where fragments hold equal row counts), the blocks are permuted,
//!   taken `window_fragments` at a time, and each window's rows are permuted. The order is
//!   arithmetic (no table per fragment), so block shuffle opens a fragment tree lazily like the
//!   other modes. On an object store every block is read once per epoch, with ranged reads of
//!   up to 4 MiB into window buffers reused from unit to unit and epoch to epoch (idle ones
//!   stay counted as `Shuffle` memory), the window's units worked out a window at a time as
//!   batches reach it, and about two windows are resident. On local files rows are read straight into the batch, as in a
//!   global shuffle: the kernel's page cache is the window, and each byte is copied once. Displacement is still ≈ 1/3 (fragments move anywhere), but a batch
//!   only mixes rows of one or two windows: adjacent-pair retention ≈ 1/(rows per window), and
//!   rows of the same fragment are correlated in time. Use windows of many fragments when
//!   fragments are internally sorted (by label, source, time).
//! * None ([`ShuffleMode::None`]): sequential.
//!
//! [`sampler::adjacent_pair_retention`] and [`sampler::displacement_stats`] measure an order;
//! the `shuffle_quality` test prints them for both modes.
//!
//! ## Pipeline
//! Worker threads (count does not affect output) assemble batches: rows are grouped by data
//! file and the pages each file contributes are read in offset order, neighbouring ranges
//! coalesced when the gap costs less than a round trip (the idle round trip × the rate one
//! request in flight gets, or [`LoaderConfig::coalesce_gap_bytes`]): positioned reads (`pread`) from a
//! local directory, concurrent range GETs from an object store, in both cases straight into
//! the batch buffer where the stored bytes need no decoding. Pages are CRC-checked when
//! [`LoaderConfig::verify_checksums`] is on (the default), which requires reading a page
//! whole. Writers aim at 256 KiB pages (DF-20), so a 150 KB image is a page of its own and a
//! verified global shuffle reads no more than the samples; for mid-sized rows several share a
//! page, and turning verification off reads only the sample's bytes. Decoded pages that hold
//! rows a batch did not take are cached for every worker of the epoch. Opening a data file
//! costs one tail read (trailer and footer) and one read of the projected columns' index
//! blocks; the indexes stay cached from epoch to epoch within the `Metadata` share.
//!
//! **Depth.** On local files `workers` threads fill at most `prefetch_batches` batches. On an
//! object store a fill mostly waits for round trips, so the depth tunes itself: the epoch
//! starts as many filling threads as the budget holds batch buffers (at most 128) and admits
//! `workers × fill time / CPU time` batches in flight (with headroom), measured per fill —
//! the bandwidth-delay product counted in batches, capped by the memory budget. The defaults
//! (2 workers, 1 GiB) need no tuning for latency; the knobs that remain are `workers` (CPU
//! threads' worth of decode and copy), `memory_budget` (the cap on everything, depth
//! included), `max_requests_in_flight` and `max_fetch_bytes` (per request wave), and
//! [`IoStats::depth`] reports the depth an epoch ran at. Requests with streamed bodies (HTTP
//! stores) share one in-flight limit that adapts to the server like TCP's congestion window
//! (`flight.rs`): more requests than the server serves at once only queue there, and their
//! bodies would wait in the HTTP client's buffers, outside the budget. In a global shuffle,
//! claims start spaced over the idle round trip (`pipeline::Pacer`), so the batches in
//! flight do not move as one convoy whose CPU work never overlaps its waiting. Checksums of
//! fetched pages are verified as each page lands, while its bytes are in cache.
//!
//! Every batch buffer is allocated once (from the loader's `pool`, through the adapter's
//! [`BufferAllocator`]) and filled in place, epoch after epoch: idle buffer sets (and
//! object-store staging buffers) serve the next epoch, counted in
//! [`MemoryStats::idle_buffers`] and [`MemoryStats::staging_buffers`]. A buffer is refilled only when it reports itself
//! exclusive ([`HostBuffer::is_exclusive`]): the tch adapter asks libtorch whether any tensor
//! still shares its storage, so a tensor the training loop keeps never changes under it.
//!
//! ## Mixtures and token packing
//! [`LoaderConfig::for_mixture`] reads a [`Mixture`] of sources (versions and views, on any
//! stores) through one pipeline, one budget and one set of buffers: each source takes exactly
//! its count per mixture epoch (from weights or "choose n"), spread evenly over the epoch, and
//! is read in its own global-shuffle order epoch after epoch of the source; batches report
//! each sample's source ([`HostBatch::sources`]). Ranks, padding and resume work as for one
//! dataset, and a [`Mixture::change_at`] a resume point continues every source where it was
//! ([`mixture`] has the frozen algorithm). [`Packer`] packs a ragged token column's documents
//! into fixed `[windows, context]` batches with segment and position ids, resumable inside a
//! document ([`packing`]).
//!
//! ## Memory
//! One budget ([`LoaderConfig::memory_budget`]) covers batch buffers, in-flight fetches and
//! decoded pages, the block-shuffle window and per-file indexes; [`Loader::memory_stats`]
//! reports use and the high-water mark per [`MemoryUse`]. Backpressure: a bounded pool of
//! batch buffers and a bounded channel.
//!
//! ## Node-local disk cache
//! [`LoaderConfig::with_cache_dir`] keeps the data-file bytes read from an object store in a
//! local directory within a byte bound, in 1 MiB blocks of each file, so epoch 2 onwards
//! reads local disk; the ranks of a node share the directory (one download per block, no
//! partial entry ever read, a corrupt entry dropped and fetched again, least recently used
//! entries evicted). [`IoStats::cache`] counts hits, misses, bytes and evictions. Local
//! dataset directories do not use it.
//!
//! ## Failures
//! Transient storage errors are retried with exponential backoff and jitter
//! ([`RetryPolicy`]). A checksum or decode failure is an error, unless
//! [`LoaderConfig::skip_bad_samples`] is set: the sample is then replaced by the next
//! readable row of G, batch counts stay equal, and [`Loader::skipped`] reports it. Errors
//! reach the loop as `Err` items; dropping the iterator stops the workers.
//!
//! ## Modules
//! `config` (settings, torchrun env), [`sampler`] (order), [`mixture`] (a mixture's order),
//! [`packing`] (token windows), `source` (local/object reads,
//! retries), `disk_cache` (the node-local cache of object-store data-file blocks), `pipeline` (an epoch's worker threads, batch claims, in-order hand-over, memory
//! shares), `fill` (one batch's buffers from pages: local and object-store reads, the
//! block-shuffle window, the page cache), `window` (block-shuffle cache), `catalog` (row →
//! page index, through the reference's `ChunkIndex`), `assemble` (layout, padding), `pool`
//! (buffer reuse), [`buffer`] (the allocator hook), `batch` (what adapters receive), `memory`
//! (budget), `error`.

#![deny(rustdoc::broken_intra_doc_links)]

mod assemble;
mod batch;
pub mod buffer;
mod catalog;
mod config;
mod depth;
mod disk_cache;
mod error;
mod fill;
mod flight;
mod io;
pub mod lineage;
mod loader;
mod memory;
pub mod mixture;
pub mod packing;
mod pipeline;
mod pool;
pub mod sampler;
mod source;
pub mod transform;
mod window;

pub use assemble::{Elem, Unsigned};
pub use batch::{HostBatch, HostColumn, HostLayout, SkippedSample};
pub use buffer::{AlignedAllocator, AlignedBuffer, BUFFER_ALIGN, BufferAllocator, HostBuffer};
pub use catalog::{version_id, view_id};
pub use config::{DiskCacheConfig, DistEnv, LoaderConfig, RaggedLayout, RaggedOptions, RetryPolicy};
pub use disk_cache::CacheStats;
pub use error::{LoaderError, Result};
pub use lineage::LineageRecord;
pub use loader::{EpochIter, Loader};
pub use memory::{MemoryStats, MemoryUse, UseStats, WindowBufferStats};
pub use mixture::{Fill, MixSource, MixStep, Mixture, Share};
pub use packing::{PackConfig, PackState, PackedBatch, Packer, Piece};
pub use pool::Lease;
pub use sampler::{LoaderState, Plan, PlanConfig, ShuffleMode};
pub use source::IoStats;
pub use transform::{ChannelOrder, ColumnTransform, ResizeTo, Transform};
