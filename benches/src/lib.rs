//! Benchmarks for Tessera: bench binaries under `src/bin/` and shared helpers here.

/// The request-counting store lives in the test kit; re-exported under its old path.
pub use tessera_testkit::counting;
pub mod codecs;
pub mod link;
pub mod mm224;
pub mod photos;
pub mod procfs;
pub mod varshape;
