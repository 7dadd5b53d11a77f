//! Benchmarks for Tessera: bench binaries under `src/bin/` and shared helpers here.

pub mod counting;
pub mod mm224;
