//! # Tessera reference implementation
//!
//! Tessera stores deep-learning training data as a versioned table: one row per sample,
//! one typed tensor column per modality (images, audio, token ids, embeddings, labels, boxes,
//! JSON), already decoded to its final shape and dtype. This crate is the executable meaning
//! of `SPEC.md`: small, strict and readable rather than clever.
//!
//! | concept | module | on disk |
//! |---|---|---|
//! | dtypes, shapes, kinds | [`dtype`], [`schema`] | in the manifest |
//! | the schema's words printed and parsed (`zstd:3`, `image(hwc)`) | [`words`] | |
//! | chunk codec (none, lz4, zstd) | [`codec`] | per page |
//! | data file (row group, columnar) | [`datafile`] | `data/<hash>.tsd` |
//! | manifest, index segment, tag | [`manifest`], [`envelope`] | `branches/<b>/<v>.tsm`, `index/<hash>.tsi`, `tags/<t>.tst` |
//! | commit protocol, branches, tags | [`commit`] | create-if-absent of the next manifest |
//! | reading and validation | [`dataset`] | |
//! | views: saved query answers | [`view`] | `views/<name>.tsview` |
//! | vector indexes (IVF-Flat) for approximate search and curation | [`ann`] | `ann/<name>.tsann`, `ann/lists/<hash>.tsal` |
//! | vector distances, the same bits on every CPU | [`distance`] | |
//! | numbers into a column's element type, checked | [`cast`] | |
//! | storage backends | [`store`] | local files, memory, S3, GCS, Azure, HTTP |
//! | canonical dump (conformance) | [`dump`] | |
//!
//! Every read verifies the CRC-32 of what it touches; every size read from storage is checked
//! against [`Limits`] before memory is allocated for it; every error carries a spec
//! [`ErrorClass`].
//!
//! ## Example
//! ```
//! use tessera::{At, Batch, Column, ColumnData, Compression, DType, Dataset, Dim, ImageLayout,
//!               Kind, Limits, Schema, Store, WriteOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let root = dir.path().to_str().unwrap();
//! let schema = Schema::new([
//!     Column::new("image", DType::U8, &[Dim::Fixed(8), Dim::Fixed(8), Dim::Fixed(3)])
//!         .with_kind(Kind::Image { layout: ImageLayout::Hwc })
//!         .with_compression(Compression::Lz4),
//!     Column::new("label", DType::I64, &[])
//!         .with_kind(Kind::ClassLabel { names: vec!["cat".into(), "dog".into()] }),
//!     Column::new("tokens", DType::I32, &[Dim::Ragged]),
//! ])?;
//! let ds = Dataset::create(root, schema, &WriteOptions::default())?;
//!
//! let images = vec![7u8; 2 * 8 * 8 * 3];
//! let batch = Batch::new()
//!     .with("image", ColumnData::from_fixed(&[8, 8, 3], &images)?)?
//!     .with("label", ColumnData::from_scalars(&[0i64, 1]))?
//!     .with("tokens", ColumnData::from_sequences::<i32>(&[&[1, 2, 3], &[4]]))?;
//! let v2 = ds.append(&batch, "two samples", WriteOptions::default())?;
//! v2.create_tag("first-two", "for the paper", &WriteOptions::default())?;
//!
//! // Later, anywhere: time travel by tag, read a projection.
//! let store = Store::open(root)?;
//! let pinned = Dataset::open_at(&store, &At::Tag("first-two".into()), Limits::default())?;
//! let rows = pinned.read_rows(0..2, Some(&["tokens"]))?;
//! assert_eq!(rows.get("tokens").unwrap().row_shape(0), vec![3]);
//! assert_eq!(pinned.verify()?.rows, 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Storage URLs and their environment variables are listed in [`store`].

// The format code needs no unsafe; the loader's zero-copy paths live in `tessera-loader-tch`.
// The one exception is the run-time choice of a vector-distance compilation (`distance`), whose
// call is allowed in that one function, with its argument.
#![deny(unsafe_code)]
#![deny(rustdoc::broken_intra_doc_links)]

pub mod ann;
pub mod batch;
pub mod blocking;
mod cache;
pub mod cast;
pub mod codec;
pub mod column;
pub mod commit;
pub mod datafile;
pub mod dataset;
pub mod diff;
pub mod distance;
pub mod dtype;
pub mod dump;
pub mod envelope;
pub mod error;
pub mod evolve;
pub mod fragments;
pub mod gc;
#[cfg(feature = "images")]
pub mod image_codec;
mod kinds;
pub mod limits;
pub mod manifest;
pub mod merge;
pub mod paths;
mod refs;
pub mod schema;
mod segment_log;
pub mod simd;
pub(crate) mod stats;
pub mod store;
pub mod tree;
pub mod verify;
pub mod view;
pub mod words;
mod writer;

pub use batch::Batch;
pub use cache::{CacheStats, DEFAULT_CACHE_BYTES};
pub use column::ColumnData;
pub use commit::{DEFAULT_TARGET_FILE_BYTES, DatasetWriter, IndexLayout, WriteOptions};
pub use dataset::{At, Dataset, FragmentInfo, VerifyReport};
pub use dtype::{DType, Element};
pub use error::{Error, ErrorClass, Result};
pub use fragments::{CommitMode, FragmentRecord};
pub use limits::Limits;
pub use schema::{BBoxFormat, Codec, Column, Compression, Dim, ImageLayout, Kind, Metric, Schema};
pub use store::Store;
pub use view::{RowRuns, Run, View, ViewRows, ViewRowsBuilder};
pub use words::{DEFAULT_ZSTD_LEVEL, ParseWordError, ShapeDisplay};
