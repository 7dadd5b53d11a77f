//! # Tessera → tch training data loader
//!
//! Streams a pinned version of a Tessera dataset (from a local directory or any object store)
//! into batches of [`tch::Tensor`]s by column name, in an order that is a pure function of
//! (dataset version, seed, epoch, shuffle settings) — never of the number of ranks or worker
//! threads — with exact mid-epoch resume.
//!
//! ```
//! use tessera::{Batch as Rows, Column, ColumnData, DType, Dataset, Dim, Schema, WriteOptions};
//! use tessera_loader_tch::{Loader, LoaderConfig, ShuffleMode};
//!
//! // A tiny dataset: 10 rows of a 2x2 f32 "image", a label and a text caption.
//! let dir = tempfile::tempdir()?;
//! let root = dir.path().to_str().unwrap();
//! let schema = Schema::new([
//!     Column::new("image", DType::F32, &[Dim::Fixed(2), Dim::Fixed(2)]),
//!     Column::new("label", DType::I64, &[]),
//!     Column::new("caption", DType::Utf8, &[]),
//! ])?;
//! let ds = Dataset::create(root, schema, &WriteOptions::default())?;
//! let images: Vec<f32> = (0..40).map(|i| i as f32).collect();
//! let labels: Vec<i64> = (0..10).collect();
//! let captions: Vec<String> = (0..10).map(|i| format!("sample {i}")).collect();
//! ds.append(
//!     &Rows::new()
//!         .with("image", ColumnData::from_fixed(&[2, 2], &images)?)?
//!         .with("label", ColumnData::from_scalars(&labels))?
//!         .with("caption", ColumnData::from_strings(&captions))?,
//!     "ten rows",
//!     WriteOptions::default(),
//! )?;
//!
//! let config = LoaderConfig::new(root)
//!     .with_batch_size(4)
//!     .with_shuffle(ShuffleMode::Global)
//!     .with_seed(7)
//!     .with_columns(&["image", "label", "caption"]);
//! let loader = Loader::open(config)?;
//! let mut seen = Vec::new();
//! let mut epoch = loader.epoch(0)?;
//! while let Some(batch) = epoch.next() {
//!     let batch = batch?;
//!     assert_eq!(batch.tensor("image")?.size(), [4, 2, 2]);
//!     let labels: Vec<i64> = Vec::try_from(batch.tensor("label")?)?;
//!     assert_eq!(labels, batch.rows().iter().map(|&r| r as i64).collect::<Vec<_>>());
//!     assert_eq!(batch.strings("caption")?[0], format!("sample {}", labels[0]));
//!     seen.extend(labels);
//!     let _checkpoint = epoch.state(); // save this to resume mid-epoch
//! }
//! // 10 rows in batches of 4: the last batch is padded with the epoch's first 2 rows.
//! assert_eq!(seen.len(), 12);
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
//! ## Shuffle modes and their quality
//! * Global ([`ShuffleMode::Global`]): an exact uniform permutation of all rows (8 bytes per row).
//!   Adjacent-pair retention ≈ 1/N, mean normalised displacement ≈ 1/3 — the reference
//!   quality. Reads are random: each batch touches up to `batch_size` pages anywhere.
//! * Block ([`ShuffleMode::Block`]): fragments are permuted, taken `window_fragments` at a time, and
//!   each window's rows are permuted. Every data file is read once per epoch and at most two
//!   windows are resident. Displacement is still ≈ 1/3 (fragments move anywhere), but a batch
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
//! file; the pages (or, with checksums off, the rows) each file contributes are fetched in
//! one `get_ranges` call per file from object stores, or with positioned reads from a local
//! directory straight into the batch tensor's memory. Pages are CRC-checked when
//! [`LoaderConfig::verify_checksums`] is on (the default), which requires reading a page
//! whole. Writers aim at 256 KiB pages (DF-20), so a 150 KB image is a page of its own and a
//! verified global shuffle reads no more than the samples; for mid-sized rows several share a
//! page, and turning verification off reads only the sample's bytes. Decoded pages
//! are cached per worker while consecutive rows hit them.
//!
//! Every batch tensor is allocated once (from a `pool` of buffers, pinned when the device is
//! CUDA and CUDA is available) and filled in place; the only `unsafe` code is the slice over a
//! tensor's storage in `slots.rs`. Batches on CUDA are copied with `non_blocking = true`.
//!
//! **Buffer reuse cannot be observed:** on the CPU, a batch's tensors are views of a pooled
//! buffer. The buffer is refilled only when libtorch reports that no tensor shares its storage
//! any more, so a view, `shallow_clone()`, CPU `to_device` or autograd graph that the loop
//! keeps beyond the batch keeps its values; the pool lets that buffer go and allocates a new
//! one (at the cost of that allocation, so keep aliases only when you mean to).
//!
//! ## Memory
//! One budget ([`LoaderConfig::memory_budget`]) covers batch buffers, in-flight fetches and
//! decoded pages, the block-shuffle window and per-file indexes; [`Loader::memory_stats`]
//! reports use and the high-water mark per [`MemoryUse`]. Backpressure: a bounded pool of
//! batch buffers and a bounded channel.
//!
//! ## Failures
//! Transient storage errors are retried with exponential backoff and jitter
//! ([`RetryPolicy`]). A checksum or decode failure is an error, unless
//! [`LoaderConfig::skip_bad_samples`] is set: the sample is then replaced by the next
//! readable row of G, batch counts stay equal, and [`Loader::skipped`] reports it. Errors
//! reach the loop as `Err` items; dropping the iterator stops the workers.
//!
//! ## Modules
//! `config` (settings, torchrun env), [`sampler`] (order), `source` (local/object reads,
//! retries), `fetch` (the pipeline), `window` (block-shuffle cache), `catalog` (row → page
//! index), `assemble` (tensor layout, padding), `pool` (buffer reuse), `slots` (the unsafe
//! slice), [`transform`], `memory` (budget), `error`,
//! [`throughput`] (epoch timing and the raw read limit, for `tessera bench` and `benches/`).

#![deny(rustdoc::broken_intra_doc_links)]

mod assemble;
mod batch;
mod catalog;
mod config;
mod error;
mod fetch;
mod loader;
mod memory;
mod pool;
pub mod sampler;
mod slots;
mod source;
pub mod throughput;
pub mod transform;
mod window;

pub use batch::{Batch, ColumnTensors, SkippedSample};
pub use catalog::version_id;
pub use config::{DistEnv, LoaderConfig, RaggedOptions, RetryPolicy};
pub use error::{LoaderError, Result};
pub use loader::{EpochIter, Loader};
pub use memory::{MemoryStats, MemoryUse, UseStats};
pub use sampler::{LoaderState, Plan, PlanConfig, ShuffleMode};
pub use source::IoStats;
pub use transform::BatchTransform;
