//! # Tessera conformance suite
//!
//! The golden fixtures under `fixtures/cases` and the code that makes, loads and runs them.
//!
//! | module | job |
//! |---|---|
//! | [`case`] | the `case.toml` model and the loader that walks `fixtures/cases` |
//! | [`reference_impl`] | runs one case in process against the reference crate, catching panics |
//! | [`compare`] | structural JSON comparison with a readable path diff |
//! | [`canonical_json`] | the byte-stable pretty printer used for `expected.json` |
//! | [`crc32`] | an independent CRC-32/ISO-HDLC, for re-sealing mutated objects |
//! | [`generate`] | the deterministic generator behind the `tessera-fixtures` binary |
//! | [`logical`] | the `tessera-logical/1` description writer cases write, and its dumps |
//! | [`writer_lint`] | writer obligations checked on the bytes of a written dataset |
//! | [`adapter`] | the adapter protocol: an implementation in process or behind a command |
//! | [`runner`] | runs the cases against an implementation and reports per case |
//! | [`requirements`] | the requirement ids of SPEC.md and the coverage allow-list |
//!
//! The fixtures are golden: `tests/fixtures_reproducible.rs` regenerates them into a
//! temporary directory and fails on any byte that differs from the checked-in tree, and
//! `tests/reference_conformance.rs` checks that the reference reads every valid case to its
//! expected dump and rejects every other case with a listed error class.

// Fixture generation and checking need no unsafe code.
#![forbid(unsafe_code)]
#![deny(rustdoc::broken_intra_doc_links)]

pub mod adapter;
pub mod canonical_json;
pub mod case;
pub mod compare;
pub mod crc32;
pub mod generate;
pub mod logical;
pub mod reference_impl;
pub mod requirements;
pub mod runner;
pub mod writer_lint;

use std::path::PathBuf;

/// The checked-in `fixtures/` directory of this repository (its `cases/` subdirectory holds
/// the cases).
#[must_use]
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("fixtures")
}
