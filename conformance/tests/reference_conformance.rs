//! Runs every fixture against the reference implementation: valid cases must read to their
//! `expected.json`, reject and unsupported cases must fail with a listed error class. The
//! reference must also fail for the reason the case's `hint` names (a check that applies to
//! the reference only: other implementations word their errors their own way). Writer cases
//! run through the runner, in process, in both directions.

use tessera_conformance::adapter::Adapter;
use tessera_conformance::case::{CaseClass, load_cases};
use tessera_conformance::compare;
use tessera_conformance::fixtures_dir;
use tessera_conformance::reference_impl::{self, Outcome};
use tessera_conformance::runner::{self, Options, Status};

#[test]
fn reference_passes_every_case() {
    let cases = load_cases(&fixtures_dir().join("cases")).unwrap_or_else(|e| panic!("{e}"));
    let count = |c: CaseClass| cases.iter().filter(|x| x.class == c).count();
    let (valid, reject, unsupported) =
        (count(CaseClass::Valid), count(CaseClass::Reject), count(CaseClass::Unsupported));
    assert!(valid >= 20, "only {valid} valid cases");
    assert!(reject + unsupported >= 30, "only {} reject and unsupported cases", reject + unsupported);

    let mut failures = Vec::new();
    let mut passed = [0usize; 4];
    for case in cases.iter().filter(|c| c.is_read()) {
        let outcome = reference_impl::read(&case.input(), case.meta.args.as_ref());
        let problem = match (case.class, &outcome) {
            (_, Outcome::Crashed(msg)) => Some(format!("CRASH: {msg}")),
            (CaseClass::Valid, Outcome::Accepted(got)) => match case.expected() {
                Err(e) => Some(format!("cannot read expected.json: {e}")),
                Ok(want) => {
                    let d = compare::diff(&want, got);
                    (!d.is_empty()).then(|| format!("FAIL_OUTPUT_MISMATCH\n{}", compare::render(&d, 20)))
                }
            },
            (CaseClass::Valid, other) => Some(format!("FAIL_SHOULD_ACCEPT: {}", other.summary())),
            (_, Outcome::Accepted(_)) => Some("FAIL_SHOULD_REJECT: the read succeeded".into()),
            (_, Outcome::Rejected { class, message }) => {
                if case.meta.error.contains(class) {
                    case.meta
                        .hint
                        .as_deref()
                        .filter(|h| !message.contains(h))
                        .map(|h| format!("FAIL_WRONG_REASON: the message does not mention {h:?}: {message}"))
                } else {
                    Some(format!("FAIL_WRONG_CLASS: expected one of {:?}, got [{class}] {message}", case.meta.error))
                }
            }
        };
        match problem {
            None => passed[case.class as usize] += 1,
            Some(p) => failures.push(format!("{} ({}): {p}", case.meta.id, case.dir.display())),
        }
    }
    let total: usize = passed.iter().sum();
    println!(
        "valid: {}/{valid} | reject: {}/{reject} | unsupported: {}/{unsupported}",
        passed[0], passed[1], passed[2]
    );
    println!("{total} passed, {} failed", failures.len());
    assert!(failures.is_empty(), "{} case(s) failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn reference_passes_every_writer_case_both_ways() {
    let mut opts = Options::new(&fixtures_dir());
    opts.writer = true;
    opts.run = vec!["w-*".into()];
    let report = runner::run(&Adapter::Reference, &opts).unwrap_or_else(|e| panic!("{e}"));
    let writer_cases = load_cases(&fixtures_dir().join("cases"))
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .filter(|c| c.class == CaseClass::Writer)
        .count();
    assert!(writer_cases >= 8, "only {writer_cases} writer cases");
    assert_eq!(report.results.len(), 2 * writer_cases, "each writer case runs in two directions");
    let bad: Vec<String> = report
        .results
        .iter()
        .filter(|r| r.status != Status::Pass)
        .map(|r| format!("{} {}: {}\n  {}", r.status.as_str(), r.display_id(), r.detail, r.diff.join("\n  ")))
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
