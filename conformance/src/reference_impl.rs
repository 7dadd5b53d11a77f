//! Runs a case against the reference implementation, in process.
//!
//! A read opens the dataset root with [`tessera::Store::open`], resolves the version the
//! case's [`Args`] name, and produces the canonical dump with [`tessera::dump::dump`]. Errors
//! are reported by their spec class; a panic anywhere is caught and reported as a crash, which
//! fails every kind of case.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use serde_json::Value;
use tessera::{At, Dataset, Limits, Store, View};

use crate::case::Args;

/// What a read did.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The read succeeded with this canonical dump.
    Accepted(Value),
    /// The read failed.
    Rejected {
        /// The error class (`malformed`, `invalid`, …, or a caller-side class).
        class: String,
        /// The error message.
        message: String,
    },
    /// The implementation panicked; the payload's text.
    Crashed(String),
}

impl Outcome {
    /// A one-line summary for failure messages.
    #[must_use]
    pub fn summary(&self) -> String {
        match self {
            Self::Accepted(_) => "accepted".into(),
            Self::Rejected { class, message } => format!("rejected [{class}]: {message}"),
            Self::Crashed(msg) => format!("CRASHED: {msg}"),
        }
    }
}

/// The version a read opens, for the arguments of a case (a view names its own: see `open`).
#[must_use]
pub fn at_for(args: Option<&Args>) -> At {
    match args {
        Some(Args { tag: Some(t), .. }) => At::Tag(t.clone()),
        Some(Args { branch: Some(b), version: Some(v), .. }) => At::BranchVersion(b.clone(), *v),
        Some(Args { branch: Some(b), version: None, .. }) => At::Branch(b.clone()),
        Some(Args { version: Some(v), .. }) => At::Version(*v),
        _ => At::Latest,
    }
}

/// Opens what a case's `args` name: a version, a tag's version (through `open_tag`, which
/// also checks the manifest CRC the tag recorded), or a view with its pinned version
/// (`open_view`, VAL-18).
fn open(location: &str, args: Option<&Args>, limits: &Limits) -> tessera::Result<(Dataset, Option<View>)> {
    let store = Store::open(location)?;
    if let Some(name) = args.and_then(|a| a.view.as_ref()) {
        return Dataset::open_view(&store, name, limits.clone()).map(|(ds, v)| (ds, Some(v)));
    }
    let ds = match at_for(args) {
        At::Tag(t) => Dataset::open_tag(&store, &t, limits.clone())?,
        at => Dataset::open_at(&store, &at, limits.clone())?,
    };
    Ok((ds, None))
}

/// The canonical dump of what `args` name: a version, or a view's rows.
fn dump(location: &str, args: Option<&Args>, limits: &Limits) -> tessera::Result<Value> {
    match open(location, args, limits)? {
        (ds, Some(view)) => tessera::dump::dump_view(&ds, &view),
        (ds, None) => tessera::dump::dump(&ds),
    }
}

/// Reads the dataset at `input` as a case with `args` asks, catching panics.
#[must_use]
pub fn read(input: &Path, args: Option<&Args>) -> Outcome {
    let Some(location) = input.to_str() else {
        return Outcome::Crashed(format!("input path {} is not UTF-8", input.display()));
    };
    let run = || -> tessera::Result<Value> { dump(location, args, &Limits::default()) };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(Ok(v)) => Outcome::Accepted(v),
        Ok(Err(e)) => Outcome::Rejected { class: e.class().as_str().to_string(), message: e.to_string() },
        Err(payload) => Outcome::Crashed(panic_text(payload.as_ref())),
    }
}

/// The text of a panic payload.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".into()
    }
}

/// Runs the reference's full verification (VAL-14) of version `args` of the dataset at
/// `input`, catching panics.
///
/// # Errors
/// The first fault, as `[class] message`, or the panic's text.
pub fn verify(input: &Path, args: Option<&Args>) -> Result<(), String> {
    let location = input.to_str().ok_or_else(|| format!("input path {} is not UTF-8", input.display()))?;
    let run = || -> tessera::Result<()> { open(location, args, &Limits::default())?.0.verify().map(drop) };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("[{}] {e}", e.class().as_str())),
        Err(payload) => Err(format!("panic: {}", panic_text(payload.as_ref()))),
    }
}

/// Reads as [`read`] does, with the given reader limits.
#[must_use]
pub fn read_with_limits(input: &Path, args: Option<&Args>, limits: &Limits) -> Outcome {
    let Some(location) = input.to_str() else {
        return Outcome::Crashed(format!("input path {} is not UTF-8", input.display()));
    };
    let run = || -> tessera::Result<Value> { dump(location, args, limits) };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(Ok(v)) => Outcome::Accepted(v),
        Ok(Err(e)) => Outcome::Rejected { class: e.class().as_str().to_string(), message: e.to_string() },
        Err(payload) => Outcome::Crashed(panic_text(payload.as_ref())),
    }
}
