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
//! This crate is the tch adapter of the framework-free loader [`tessera_loader`]: the core
//! decides the order, shards, prefetches within one memory budget and fills host buffers;
//! here those buffers are libtorch tensors (pinned when the device is CUDA), handed out as
//! zero-copy views, moved with `non_blocking` copies, and transformed. The adapter's own
//! settings ([`TchOptions`]: the device, and how `u64` becomes `i64`, as tch has no unsigned
//! kinds wider than a byte) sit next to the core's [`LoaderConfig`]. The core's crate docs
//! describe order, sharding, resume, shuffle quality, the pipeline, memory and failures.
//!
//! **Buffer reuse cannot be observed:** on the CPU, a batch's tensors are views of a pooled
//! buffer. The buffer is refilled only when libtorch reports that no tensor shares its storage
//! any more, so a view, `shallow_clone()`, CPU `to_device` or autograd graph that the loop
//! keeps beyond the batch keeps its values; the pool lets that buffer go and allocates a new
//! one (at the cost of that allocation, so keep aliases only when you mean to).
//!
//! ## Modules
//! `loader` (the tch `Loader` and `EpochIter` over the core's), `batch` (tensors over the
//! core's host batches), `slots` (libtorch-owned buffers and the allocator hook; the crate's
//! `unsafe` code), [`transform`], [`throughput`] (epoch timing and the raw read limit, for
//! `tessera bench` and `benches/`).

#![deny(rustdoc::broken_intra_doc_links)]

mod batch;
mod error;
mod loader;
mod slots;
pub mod throughput;
pub mod transform;

pub use batch::{Batch, ColumnTensors};
pub use error::{LoaderError, Result};
pub use loader::{EpochIter, Loader, TchOptions};
pub use slots::TensorBuffer;
pub use tessera_loader::{CacheStats, DiskCacheConfig, IoStats};
/// Host-side augmentation by the loader's own threads (`LoaderConfig::with_transform`),
/// before a batch becomes tensors; [`transform`] holds the tensor ops that run on the
/// batch's device after delivery.
pub use tessera_loader::{ChannelOrder, Elem, ResizeTo, Transform};
pub use tessera_loader::{
    DistEnv, LoaderConfig, LoaderState, MemoryStats, MemoryUse, Plan, PlanConfig, RaggedLayout, RaggedOptions,
    RetryPolicy, ShuffleMode, SkippedSample, UseStats, sampler, version_id,
};
/// Mixtures of sources (`LoaderConfig::for_mixture`).
pub use tessera_loader::{MixSource, MixStep, Mixture, Share};
pub use transform::BatchTransform;

/// The Rust blocks of the workspace README, compiled as doc tests so that they cannot drift
/// from the API (they use this crate and the reference crate `tessera`).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
