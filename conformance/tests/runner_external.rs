//! The runner binary against implementations behind the external adapter protocol.
//!
//! First the reference adapter binary (`tessera-adapter-ref`), through the protocol, on every
//! case including the writer cases in both directions: exit 0 and a final `N passed, 0 failed`
//! line. Then misbehaving adapters (shell scripts) show that the runner reports each failure
//! with its own status and exits non-zero.

#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use serde_json::Value;
use tessera_conformance::case::{CaseClass, load_cases};
use tessera_conformance::fixtures_dir;

const RUNNER: &str = env!("CARGO_BIN_EXE_tessera-conformance");
const ADAPTER: &str = env!("CARGO_BIN_EXE_tessera-adapter-ref");

fn run(args: &[&str]) -> (i32, String, String) {
    let out: Output = Command::new(RUNNER).args(args).output().expect("run the runner");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn last_line(s: &str) -> &str {
    s.lines().last().unwrap_or("")
}

/// `N passed, N failed` or `N passed, N failed, N skipped`: the numbers.
fn final_counts(line: &str) -> Option<(usize, usize, usize)> {
    let parts: Vec<&str> = line.split(", ").collect();
    let num = |p: &str, word: &str| p.strip_suffix(word).and_then(|n| n.parse().ok());
    match parts.as_slice() {
        [p, f] => Some((num(p, " passed")?, num(f, " failed")?, 0)),
        [p, f, s] => Some((num(p, " passed")?, num(f, " failed")?, num(s, " skipped")?)),
        _ => None,
    }
}

#[test]
fn reference_adapter_passes_every_case_through_the_protocol() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("report.json");
    let (code, stdout, stderr) =
        run(&["--adapter", ADAPTER, "--writer", "--json", json.to_str().unwrap(), "--timeout-ms", "60000"]);
    let line = last_line(&stdout);
    assert_eq!(code, 0, "the runner failed:\n{stdout}\n{stderr}");
    let (passed, failed, skipped) = final_counts(line).unwrap_or_else(|| panic!("bad final line {line:?}"));
    assert_eq!((failed, skipped), (0, 0), "{stdout}");
    assert_eq!(stdout.lines().filter(|l| final_counts(l).is_some()).count(), 1, "exactly one final line");

    let cases = load_cases(&fixtures_dir().join("cases")).unwrap();
    let writer = cases.iter().filter(|c| c.class == CaseClass::Writer).count();
    assert_eq!(passed, cases.len() + writer, "each read case once, each writer case in two directions");

    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["report"], "tessera-conformance-report/1");
    assert_eq!(report["totals"]["passed"], passed);
    assert_eq!(report["totals"]["failed"], 0);
    assert_eq!(report["adapter"]["info"]["name"], "tessera-reference");
    let records = report["cases"].as_array().unwrap();
    assert_eq!(records.len(), passed);
    for r in records {
        assert_eq!(r["status"], "PASS", "{r}");
        assert!(r["observed"]["invocations"].as_u64().unwrap() >= 1);
        assert!(r["observed"]["duration_ms"].as_f64().is_some());
    }
    let covered = report["requirements_covered"].as_array().unwrap();
    assert!(covered.len() > 100, "only {} requirement ids covered", covered.len());
}

/// Writes an executable shell script adapter; `body` sees the arguments and `$REF` (the
/// reference adapter).
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/bash\nREF='{ADAPTER}'\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// The runner on a few cases with `adapter`, returning the exit code, stdout and the report.
fn run_few(adapter: &Path, extra: &[&str]) -> (i32, String, Value) {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("r.json");
    let mut args = vec![
        "--adapter",
        adapter.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--writer",
        "--run",
        "v-dtype-0001-*",
        "--run",
        "n-envelope-0005-*",
        "--run",
        "u-flags-0001-*",
        "--run",
        "w-history-0002-*",
    ];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = run(&args);
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_default())
        .unwrap_or_else(|e| panic!("no report ({e}):\n{stdout}\n{stderr}"));
    (code, stdout, report)
}

fn statuses(report: &Value) -> Vec<(String, String)> {
    report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let short = r["id"].as_str().unwrap().split('-').take(3).collect::<Vec<_>>().join("-");
            let id = match r["direction"].as_str() {
                Some(d) => format!("{short}:{d}"),
                None => short,
            };
            (id, r["status"].as_str().unwrap().to_string())
        })
        .collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter().map(|(a, b)| ((*a).to_string(), (*b).to_string())).collect()
}

#[test]
fn misbehaving_adapters_get_their_statuses() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let info = r#"if [ "$1" = info ]; then exec "$REF" info; fi"#;

    // Accepts everything with an empty dump, and "writes" nothing.
    let liar = script(d, "liar", &format!("{info}\nif [ \"$1\" = read ]; then echo '{{}}'; fi\nexit 0"));
    let (code, stdout, report) = run_few(&liar, &[]);
    assert_eq!(code, 1, "{stdout}");
    assert_eq!(
        statuses(&report),
        pairs(&[
            ("n-envelope-0005", "FAIL_SHOULD_REJECT"),
            ("u-flags-0001", "FAIL_SHOULD_REJECT"),
            ("v-dtype-0001", "FAIL_OUTPUT_MISMATCH"),
            ("w-history-0002:write", "FAIL_OUTPUT_MISMATCH"),
            ("w-history-0002:read", "FAIL_OUTPUT_MISMATCH"),
        ])
    );
    assert!(last_line(&stdout).starts_with("0 passed, 5 failed"), "{stdout}");
    let mismatch = report["cases"].as_array().unwrap().iter().find(|r| r["id"] == "v-dtype-0001-all-scalar-dtypes");
    assert!(mismatch.unwrap()["diff"].as_array().unwrap().iter().any(|d| d.as_str().unwrap().starts_with("$.")));

    // Rejects with the wrong class: strict by default, tolerated with --lenient-classes.
    let io = script(d, "io", r#""$REF" "$@" 2> >(sed -E 's/^error\[[a-z_]+\]/error[io]/' >&2)"#);
    let (code, stdout, report) = run_few(&io, &[]);
    assert_eq!(code, 1, "{stdout}");
    assert_eq!(
        statuses(&report),
        pairs(&[
            ("n-envelope-0005", "FAIL_WRONG_CLASS"),
            ("u-flags-0001", "FAIL_WRONG_CLASS"),
            ("v-dtype-0001", "PASS"),
            ("w-history-0002:write", "PASS"),
            ("w-history-0002:read", "PASS"),
        ])
    );
    let (code, stdout, _) = run_few(&io, &["--lenient-classes"]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(last_line(&stdout), "3 passed, 0 failed", "{stdout}");
    assert!(stdout.contains("FAIL_WRONG_CLASS"), "wrong classes are still listed:\n{stdout}");

    // Crashes by signal and by odd exit codes; an error line without a class.
    let crash = script(d, "crash", &format!("{info}\ncase \"$1\" in read) kill -SEGV $$ ;; *) exit 3 ;; esac"));
    let (code, _, report) = run_few(&crash, &[]);
    assert_eq!(code, 1);
    assert!(statuses(&report).iter().all(|(_, s)| s == "CRASH"), "{report}");
    let sig = &report["cases"][0]["observed"]["signal"];
    assert_eq!(sig.as_i64(), Some(11), "{report}");
    let noclass = script(d, "noclass", &format!("{info}\necho 'something went wrong' >&2\nexit 1"));
    let (_, _, report) = run_few(&noclass, &[]);
    assert_eq!(
        statuses(&report),
        pairs(&[
            ("n-envelope-0005", "FAIL_WRONG_CLASS"),
            ("u-flags-0001", "FAIL_WRONG_CLASS"),
            ("v-dtype-0001", "FAIL_SHOULD_ACCEPT"),
            ("w-history-0002:write", "FAIL_SHOULD_ACCEPT"),
            ("w-history-0002:read", "FAIL_SHOULD_ACCEPT"),
        ])
    );

    // Not supported (exit 89) is a skip with the reason; a read-only adapter skips writes.
    let lazy = script(d, "lazy", &format!("{info}\necho 'no zstd here' >&2\nexit 89"));
    let (code, stdout, report) = run_few(&lazy, &[]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(last_line(&stdout), "0 passed, 0 failed, 5 skipped");
    assert!(report["cases"][0]["detail"].as_str().unwrap().contains("exit 89"));
    let read_only = script(
        d,
        "readonly",
        r#"if [ "$1" = info ]; then echo '{"name":"ro","version":"0","spec":["1.0-draft"],"operations":["read"],"features":[]}'; exit 0; fi
exec "$REF" "$@""#,
    );
    let (code, stdout, _) = run_few(&read_only, &[]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(last_line(&stdout), "4 passed, 0 failed, 1 skipped");

    // A hanging adapter (and the child it started) is killed at the time limit.
    let slow = script(d, "slow", &format!("{info}\nsleep 30 &\nwait"));
    let start = Instant::now();
    let (code, _, report) = run_few(&slow, &["--timeout-ms", "1000"]);
    assert_eq!(code, 1);
    assert!(statuses(&report).iter().all(|(_, s)| s == "TIMEOUT"), "{report}");
    assert!(start.elapsed().as_secs() < 20, "the runner waited for the adapter's children");
}

/// A core reader (no `encoded-images` in its `info`) answers `unsupported` for every version
/// with the `ENCODED_IMAGES` flag (SPEC.md FLG-08): the encoded cases are skipped, not failed; the
/// same answer from a reader that lists the feature, or on another case, still fails.
#[test]
fn a_core_reader_skips_the_encoded_cases() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let refuse = "echo 'error[unsupported]: reader flag 0x1 (ENCODED_IMAGES) is not implemented' >&2\nexit 1";
    let core = script(
        d,
        "core",
        &format!("if [ \"$1\" = info ]; then \"$REF\" info | sed -E 's/, *\"encoded-images\"//'; exit 0; fi\n{refuse}"),
    );
    let claims = script(d, "claims", &format!("if [ \"$1\" = info ]; then exec \"$REF\" info; fi\n{refuse}"));
    let few = ["--run", "v-encoded-0001-*", "--run", "n-encoded-0001-*", "--run", "v-dtype-0001-*"];
    let tmp_json = d.join("r.json");
    let mut args: Vec<&str> = vec!["--adapter", core.to_str().unwrap(), "--json", tmp_json.to_str().unwrap()];
    args.extend_from_slice(&few);
    let (code, stdout, stderr) = run(&args);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&tmp_json).unwrap()).unwrap();
    assert_eq!(
        statuses(&report),
        pairs(&[("n-encoded-0001", "SKIP"), ("v-dtype-0001", "FAIL_SHOULD_ACCEPT"), ("v-encoded-0001", "SKIP")])
    );
    let mut args: Vec<&str> = vec!["--adapter", claims.to_str().unwrap(), "--json", tmp_json.to_str().unwrap()];
    args.extend_from_slice(&few);
    let (code, stdout, _) = run(&args);
    assert_eq!(code, 1, "{stdout}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&tmp_json).unwrap()).unwrap();
    assert_eq!(
        statuses(&report),
        pairs(&[
            ("n-encoded-0001", "FAIL_WRONG_CLASS"),
            ("v-dtype-0001", "FAIL_SHOULD_ACCEPT"),
            ("v-encoded-0001", "FAIL_SHOULD_ACCEPT"),
        ])
    );
}

#[test]
fn skips_and_usage_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let skip = tmp.path().join("skip.toml");
    std::fs::write(&skip, "\"n-envelope-*\" = \"not implemented yet\"\n").unwrap();
    let (code, stdout, _) = run(&["--run", "n-envelope-0001-*", "--skip-file", skip.to_str().unwrap(), "-v"]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(last_line(&stdout), "0 passed, 0 failed, 1 skipped");
    assert!(stdout.contains("not implemented yet"), "{stdout}");
    std::fs::write(&skip, "\"n-*\" = \"\"\n").unwrap();
    let (code, _, stderr) = run(&["--skip-file", skip.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(stderr.contains("reason"), "{stderr}");
    let (code, _, _) = run(&["--no-such-flag"]);
    assert_eq!(code, 2);
    let (code, _, stderr) = run(&["--adapter", "/nonexistent/adapter"]);
    assert_eq!(code, 2, "{stderr}");
    let (code, stdout, _) = run(&["--list", "--writer", "--run", "w-history-0002-*"]);
    assert_eq!(code, 0);
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
}

#[test]
fn matrix_of_two_implementations() {
    let (code, stdout, stderr) =
        run(&["--matrix", &format!("ref,cli={ADAPTER}"), "--run", "n-ref-*", "--run", "v-version-*"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let last = last_line(&stdout);
    let (passed, failed, _) = final_counts(last).unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(failed, 0);
    assert!(passed > 10 && passed % 2 == 0, "{stdout}");
    assert!(stdout.contains("cli: "), "{stdout}");
}
