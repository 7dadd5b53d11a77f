//! The read cases of the conformance fixtures (`fixtures/cases`) as the loader's conformance
//! tests run them, both the core's (`loader/tests/conformance.rs`) and the tch adapter's
//! (`loader-tch/tests/conformance.rs`, through `#[path]`): what each case reads, how the
//! loader is set to read it, the comparison with its expected dump, and the run of every
//! case on its own thread with a time limit.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use tessera::At;
use tessera_conformance::case::{Case, load_cases};
use tessera_loader::{LoaderConfig, ShuffleMode};

/// A case that takes longer than this through the loader counts as a hang.
pub const CASE_TIMEOUT: Duration = Duration::from_secs(60);

/// The version a case reads (`args = { tag, branch, version }`).
pub fn at_of(case: &Case) -> At {
    match &case.meta.args {
        None => At::Latest,
        Some(a) => match (&a.tag, &a.branch, a.version) {
            (Some(t), _, _) => At::Tag(t.clone()),
            (None, Some(b), Some(v)) => At::BranchVersion(b.clone(), v),
            (None, Some(b), None) => At::Branch(b.clone()),
            (None, None, Some(v)) => At::Version(v),
            (None, None, None) => At::Latest,
        },
    }
}

/// The view a case reads (`args = { view = … }`), instead of a version.
pub fn view_of(case: &Case) -> Option<&str> {
    case.meta.args.as_ref().and_then(|a| a.view.as_deref())
}

/// The loader settings that read a case's whole version (or view) in order, `rows` rows (of
/// the expected dump, or a guess) in one batch where they fit.
pub fn case_config(case: &Case, rows: u64) -> LoaderConfig {
    let input = case.input();
    let mut cfg = LoaderConfig {
        at: at_of(case),
        ..LoaderConfig::new(input.to_str().expect("UTF-8 path"))
            .with_batch_size(rows.clamp(1, 1 << 16) as usize)
            .with_shuffle(ShuffleMode::None)
            .with_workers(2)
            .with_memory_budget(512 << 20)
    };
    cfg.view = view_of(case).map(str::to_owned);
    cfg
}

/// A valid case: `read` (given the expected row count) dumps every column of what the loader
/// delivered (`{name: dump_column}`); each column of the expected dump must be in it, equal.
pub fn expect_dump(case: &Case, read: impl FnOnce(u64) -> Result<serde_json::Value, String>) -> Result<(), String> {
    let expected = case.expected()?;
    let rows = expected["row_count"].as_u64().ok_or("expected dump without row_count")?;
    let got = read(rows).map_err(|e| format!("loader refused it: {e}"))?;
    for (name, want) in expected["columns"].as_object().ok_or("expected dump without columns")? {
        if got.get(name) != Some(want) {
            return Err(format!("column {name:?} differs from the expected dump"));
        }
    }
    Ok(())
}

/// Every read case of `fixtures/cases`.
pub fn read_cases() -> Vec<Case> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/cases");
    let cases = load_cases(&root).unwrap_or_else(|e| panic!("loading fixtures: {:?}", e.problems));
    cases.into_iter().filter(Case::is_read).collect()
}

/// Runs `run` on each case, each on its own thread: an `Err`, a panic or no answer within
/// [`CASE_TIMEOUT`] is a failure. Returns how many passed and the failures, one line each.
pub fn run_cases(cases: Vec<Case>, run: fn(&Case) -> Result<(), String>) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    let mut passed = 0;
    for case in cases {
        let id = case.meta.id.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(|| run(&case))
                .unwrap_or_else(|p| Err(format!("panicked: {:?}", p.downcast_ref::<String>())));
            let _ = tx.send(r);
        });
        match rx.recv_timeout(CASE_TIMEOUT) {
            Ok(Ok(())) => passed += 1,
            Ok(Err(e)) => failures.push(format!("{id}: {e}")),
            Err(_) => failures.push(format!("{id}: no answer within {CASE_TIMEOUT:?} (hang)")),
        }
    }
    (passed, failures)
}
