//! Property across the language boundary, with the independent Python implementation
//! (`conformance/python`, written from SPEC.md alone) driven through the adapter protocol.
//! For random descriptions (every dtype, fixed, ragged and zero dims, nulls, codecs, several
//! commits, tags) and random page and data file sizes:
//!
//! - the reference writes, and the Python reader reads every version and tag to the dump
//!   computed from the description alone;
//! - the Python writer writes (`adapter.py --page-bytes P --file-bytes F write`), and the
//!   reference reads every version and tag back to the same dumps, verifies each version
//!   (VAL-14) and finds nothing for the writer lint: the runner's [`check_written`].
//!
//! Needs `.venv/bin/python` with the `lz4` and `zstandard` packages (`scripts/setup.sh`).
//! 32 cases by default with a fixed seed (about 5 Python processes each); `PROPTEST_CASES`
//! runs more, `PROPTEST_RNG_SEED` picks another seed.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use proptest::prelude::*;
use serde_json::Value;
use tessera_conformance::adapter::{Adapter, Observation, Outcome};
use tessera_conformance::case::Args;
use tessera_conformance::compare;
use tessera_conformance::logical::{Logical, RefWrite};
use tessera_conformance::runner::check_written;

/// Time limit of one adapter invocation: generous, the machine may be loaded.
const TIMEOUT: Duration = Duration::from_secs(60);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the conformance crate is in the workspace").to_path_buf()
}

/// The Python adapter with the writer's page and data file targets.
fn python(page: u64, file: u64) -> Adapter {
    let repo = repo();
    let python = repo.join(".venv/bin/python");
    assert!(python.exists(), "{} is missing: run scripts/setup.sh", python.display());
    let argv = [
        python.to_string_lossy().into_owned(),
        repo.join("conformance/python/adapter.py").to_string_lossy().into_owned(),
        "--page-bytes".into(),
        page.to_string(),
        "--file-bytes".into(),
        file.to_string(),
    ];
    Adapter::External { name: "tessera-py".into(), argv: argv.to_vec() }
}

/// Every problem of one Python read against the expected dump.
fn judge(o: &Observation, want: &Value, what: &str) -> Vec<String> {
    match &o.outcome {
        Outcome::Accepted(Ok(got)) => {
            compare::diff(want, got).iter().take(10).map(|d| format!("{what}: Python reads {d}")).collect()
        }
        other => vec![format!("{what}: the Python reader gives {other:?}; stderr: {}", o.stderr_head)],
    }
}

/// The reference writes `l`; the Python reader reads it.
fn reference_to_python(l: &Logical, py: &Adapter, root: &Path, page: u64, file: u64) -> Vec<String> {
    let settings = RefWrite { deterministic: true, page_bytes: page, target_file_bytes: file };
    if let Err(e) = l.write_with_reference(root, &settings) {
        return vec![format!("the reference cannot write the description: {e}")];
    }
    let mut problems = Vec::new();
    for v in 1..=l.versions() {
        let o = py.read(root, Some(&Args { version: Some(v), ..Args::default() }), TIMEOUT);
        problems.extend(judge(&o, &l.expected_dump(v), &format!("main@{v}")));
    }
    for t in &l.tags {
        let o = py.read(root, Some(&Args { tag: Some(t.name.clone()), ..Args::default() }), TIMEOUT);
        problems.extend(judge(&o, &l.expected_dump(t.version), &format!("tag {}", t.name)));
    }
    problems
}

/// The Python writer writes `l`; the reference reads, verifies and lints it.
fn python_to_reference(l: &Logical, py: &Adapter, dir: &Path) -> Vec<String> {
    let logical = dir.join("logical.json");
    let out = dir.join("dataset");
    let text = serde_json::to_vec(&l.to_value()).expect("a description serializes");
    if let Err(e) = std::fs::write(&logical, text).and_then(|()| std::fs::create_dir(&out)) {
        return vec![format!("cannot prepare the write: {e}")];
    }
    let o = py.write(&logical, &out, TIMEOUT);
    if !matches!(o.outcome, Outcome::Accepted(_)) {
        return vec![format!("the Python writer gives {:?}; stderr: {}", o.outcome, o.stderr_head)];
    }
    let versions: Vec<(u64, Value)> = (1..=l.versions()).map(|v| (v, l.expected_dump(v))).collect();
    let tags: Vec<(String, u64)> = l.tags.iter().map(|t| (t.name.clone(), t.version)).collect();
    check_written(&out, l, &versions, &tags)
}

proptest! {
    #![proptest_config(common::config(32, 0x00C2_05E1))]

    #[test]
    fn reference_and_python_read_each_others_datasets(
        l in common::logical(),
        page in 1u64..200,
        file in 1u64..2000,
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let py = python(page, file);
        let problems = reference_to_python(&l, &py, &tmp.path().join("reference"), page, file);
        prop_assert!(problems.is_empty(), "reference writes, Python reads:\n{}", problems.join("\n"));
        let problems = python_to_reference(&l, &py, tmp.path());
        prop_assert!(problems.is_empty(), "Python writes, reference reads:\n{}", problems.join("\n"));
    }
}
