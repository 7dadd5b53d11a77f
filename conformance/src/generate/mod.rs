//! The deterministic generator of the golden fixtures (`tessera-fixtures`).
//!
//! Every dataset is written by the reference writer with fixed commit times and writer ids
//! (`options::Clock`) and data from a seeded generator (`prng::Prng`); every must-reject
//! case starts from such a dataset and changes exactly one thing, re-sealing checksums and
//! references around the change so that the fault under test is the only one
//! (`mutate::Ds`). Running the generator twice gives identical bytes, which
//! `tests/fixtures_reproducible.rs` checks against the checked-in tree.
//!
//! While it writes, the generator runs the reference on every case: a valid case must read
//! and verify, and its dump becomes `expected.json`; a reject case must fail with the class it
//! declares and a message containing its hint, so a case never records a fault other than the
//! one it was built for.

mod data;
mod emit;
mod history;
mod mutate;
mod options;
mod prng;
mod reject;
mod reject_log;
mod valid;
mod writer;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use crate::case::CaseClass;

pub use emit::PROVENANCE;

/// A generator failure: which case, and what went wrong.
#[derive(Debug)]
pub struct GenError(pub String);

impl fmt::Display for GenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GenError {}

impl From<tessera::Error> for GenError {
    fn from(e: tessera::Error) -> Self {
        Self(format!("tessera: {e}"))
    }
}

impl From<std::io::Error> for GenError {
    fn from(e: std::io::Error) -> Self {
        Self(format!("io: {e}"))
    }
}

/// Generator result.
pub type Result<T, E = GenError> = std::result::Result<T, E>;

/// Returns early with a [`GenError`] built like `format!`.
macro_rules! bail {
    ($($t:tt)*) => { return Err($crate::generate::GenError(format!($($t)*))) };
}
pub(crate) use bail;

/// What a run wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Number of cases per (class, area).
    pub counts: BTreeMap<(CaseClass, String), usize>,
}

impl Summary {
    /// Cases of a class.
    #[must_use]
    pub fn total(&self, class: CaseClass) -> usize {
        self.counts.iter().filter(|((c, _), _)| *c == class).map(|(_, n)| n).sum()
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for class in CaseClass::ALL {
            let areas: Vec<String> = self
                .counts
                .iter()
                .filter(|((c, _), _)| *c == class)
                .map(|((_, area), n)| format!("{area} {n}"))
                .collect();
            writeln!(f, "{class}: {} ({})", self.total(class), areas.join(", "))?;
        }
        Ok(())
    }
}

/// Writes the whole case tree into `<out_dir>/cases`, replacing what was there.
///
/// # Errors
/// The first case that cannot be built or does not behave as declared.
pub fn generate(out_dir: &Path) -> Result<Summary> {
    let cases = out_dir.join("cases");
    if cases.exists() {
        std::fs::remove_dir_all(&cases)?;
    }
    std::fs::create_dir_all(&cases)?;
    let mut em = emit::Emitter::new(&cases);
    valid::all(&mut em)?;
    history::all(&mut em)?;
    reject::all(&mut em)?;
    reject_log::all(&mut em)?;
    writer::all(&mut em)?;
    Ok(em.finish())
}
