//! Runs fixture cases against an implementation ([`Adapter`]) and reports per case.
//!
//! Read cases (`valid`, `reject`, `unsupported`): the case's `input/` is copied into a
//! temporary directory with read-only permissions, the implementation reads the version the
//! case names, and the outcome is judged:
//!
//! | case | outcome | status |
//! |---|---|---|
//! | valid | dump equal to `expected.json` (DUMP-10) | `PASS` |
//! | valid | another dump, or stdout that is not JSON | `FAIL_OUTPUT_MISMATCH` |
//! | valid | rejected | `FAIL_SHOULD_ACCEPT` |
//! | reject, unsupported | rejected with a listed class | `PASS` |
//! | reject, unsupported | rejected with another class, or none | `FAIL_WRONG_CLASS` |
//! | reject, unsupported | accepted | `FAIL_SHOULD_REJECT` |
//! | any | crash (exit status other than 0, 1, 89; signal; panic) | `CRASH` |
//! | any | ran past the time limit | `TIMEOUT` |
//! | any | exit 89, `--skip`, skip file | `SKIP` (with the reason) |
//!
//! Writer cases run in two directions. `write`: the implementation writes `logical.json`, and
//! the reference reads every version and tag back (and verifies it, and lints the writer's
//! obligations, [`crate::writer_lint`]). `read`: the reference writes `logical.json`, and the
//! implementation reads every version and tag. The second direction lets a read-only
//! implementation use the writer cases too.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::adapter::{Adapter, AdapterInfo, ENCODED_IMAGES_FEATURE, Observation, Outcome};
use crate::case::{Args, Case, CaseClass, load_cases};
use crate::compare;
use crate::logical::{ExpectedTags, ExpectedVersions, Logical, RefWrite, parse_expected};
use crate::reference_impl;
use crate::writer_lint;

/// The default time limit of one adapter invocation.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

/// The result of one case (or one direction of a writer case).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    /// The implementation did what the case requires.
    Pass,
    /// A valid input was rejected.
    FailShouldAccept,
    /// An input that must be rejected was accepted.
    FailShouldReject,
    /// The dump (or the written dataset) differs from the expected one.
    FailOutputMismatch,
    /// Rejected, but with a class the case does not list.
    FailWrongClass,
    /// The implementation crashed.
    Crash,
    /// The implementation ran past the time limit.
    Timeout,
    /// Not run, for the reason given.
    Skip,
}

impl Status {
    /// Every status, in report order.
    pub const ALL: [Status; 8] = [
        Self::Pass,
        Self::FailShouldAccept,
        Self::FailShouldReject,
        Self::FailOutputMismatch,
        Self::FailWrongClass,
        Self::Crash,
        Self::Timeout,
        Self::Skip,
    ];

    /// The status as reports spell it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "PASS",
            Self::FailShouldAccept => "FAIL_SHOULD_ACCEPT",
            Self::FailShouldReject => "FAIL_SHOULD_REJECT",
            Self::FailOutputMismatch => "FAIL_OUTPUT_MISMATCH",
            Self::FailWrongClass => "FAIL_WRONG_CLASS",
            Self::Crash => "CRASH",
            Self::Timeout => "TIMEOUT",
            Self::Skip => "SKIP",
        }
    }
}

/// How the runner is set up.
#[derive(Clone, Debug)]
pub struct Options {
    /// The fixture root (holding `cases/`).
    pub fixtures: PathBuf,
    /// Only cases matching one of these globs run (all when empty).
    pub run: Vec<String>,
    /// Cases matching one of these globs are skipped ("--skip GLOB").
    pub skip: Vec<String>,
    /// Skipped cases with a reason each: `(glob, reason)`.
    pub skip_reasons: Vec<(String, String)>,
    /// Time limit per invocation for cases without their own `timeout_ms`.
    pub default_timeout: Duration,
    /// Count `FAIL_WRONG_CLASS` as not failed (it is still reported).
    pub lenient_classes: bool,
    /// Run the writer cases (both directions).
    pub writer: bool,
}

impl Options {
    /// Options for the fixtures at `fixtures`: every read case, strict classes, no writer cases.
    #[must_use]
    pub fn new(fixtures: &Path) -> Self {
        Self {
            fixtures: fixtures.to_path_buf(),
            run: Vec::new(),
            skip: Vec::new(),
            skip_reasons: Vec::new(),
            default_timeout: Duration::from_millis(DEFAULT_TIMEOUT_MS),
            lenient_classes: false,
            writer: false,
        }
    }
}

/// Parses a skip file: a TOML table of `"glob" = "reason"`, every reason non-empty.
///
/// # Errors
/// A TOML error, a value that is not a string, or an empty reason.
pub fn parse_skip_file(text: &str) -> Result<Vec<(String, String)>, String> {
    let table: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (glob, reason) in table {
        let reason = reason.as_str().ok_or_else(|| format!("{glob:?}: the reason must be a string"))?;
        if reason.trim().is_empty() {
            return Err(format!("{glob:?}: every skipped case needs a reason"));
        }
        out.push((glob, reason.to_string()));
    }
    Ok(out)
}

/// Glob match: `*` matches any run of characters (`/` included), `?` one character.
#[must_use]
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// What the runner saw, summed over a result's invocations.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    /// Exit code of the deciding invocation.
    pub exit_code: Option<i32>,
    /// Signal of the deciding invocation.
    pub signal: Option<i32>,
    /// Error class of the deciding invocation, if it rejected.
    pub class: Option<String>,
    /// The first stderr lines of the deciding invocation.
    pub stderr_head: String,
    /// Total wall time.
    pub duration: Duration,
    /// Number of adapter invocations.
    pub invocations: u32,
}

impl Observed {
    fn add(&mut self, o: &Observation) {
        self.exit_code = o.exit_code;
        self.signal = o.signal;
        self.class = match &o.outcome {
            Outcome::Rejected { class, .. } => class.clone(),
            _ => None,
        };
        self.stderr_head.clone_from(&o.stderr_head);
        self.duration += o.duration;
        self.invocations += 1;
    }
}

/// The result of one case, or of one direction of a writer case.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// The case id.
    pub id: String,
    /// `write` or `read` for writer cases.
    pub direction: Option<&'static str>,
    /// The case class.
    pub class: CaseClass,
    /// The case area.
    pub area: String,
    /// Requirement ids the case cites.
    pub requirements: Vec<String>,
    /// The status.
    pub status: Status,
    /// One line about the result (the reason, for a skip).
    pub detail: String,
    /// What the case expects.
    pub expected: Value,
    /// What the runner saw.
    pub observed: Observed,
    /// Differences, one per entry (`path: expected …, got …`).
    pub diff: Vec<String>,
}

impl CaseResult {
    /// The id with the direction, e.g. `w-dtype-0001-x [write]`.
    #[must_use]
    pub fn display_id(&self) -> String {
        match self.direction {
            Some(d) => format!("{} [{d}]", self.id),
            None => self.id.clone(),
        }
    }

    fn to_json(&self) -> Value {
        let mut v = json!({
            "id": self.id,
            "class": self.class.dir(),
            "area": self.area,
            "status": self.status.as_str(),
            "detail": self.detail,
            "requirements": self.requirements,
            "expected": self.expected,
            "observed": {
                "exit_code": self.observed.exit_code,
                "signal": self.observed.signal,
                "class": self.observed.class,
                "stderr_head": self.observed.stderr_head,
                "duration_ms": self.observed.duration.as_secs_f64() * 1000.0,
                "invocations": self.observed.invocations,
            },
            "diff": self.diff,
        });
        if let Some(d) = self.direction {
            v["direction"] = json!(d);
        }
        v
    }
}

/// All results of one run against one implementation.
#[derive(Clone, Debug)]
pub struct Report {
    /// The implementation's label.
    pub label: String,
    /// Its command line (`None` in process).
    pub command: Option<Vec<String>>,
    /// What it said about itself.
    pub info: AdapterInfo,
    /// The fixture root.
    pub fixtures: PathBuf,
    /// Wrong classes are reported but not counted as failures.
    pub lenient_classes: bool,
    /// Writer cases were run.
    pub writer: bool,
    /// The results in case id order.
    pub results: Vec<CaseResult>,
}

impl Report {
    /// True when a result counts as a failure.
    #[must_use]
    pub fn is_failure(&self, s: Status) -> bool {
        match s {
            Status::Pass | Status::Skip => false,
            Status::FailWrongClass => !self.lenient_classes,
            _ => true,
        }
    }

    /// (passed, failed, skipped, wrong class tolerated by `--lenient-classes`).
    #[must_use]
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        let mut c = (0, 0, 0, 0);
        for r in &self.results {
            match r.status {
                Status::Pass => c.0 += 1,
                Status::Skip => c.2 += 1,
                s if self.is_failure(s) => c.1 += 1,
                _ => c.3 += 1,
            }
        }
        c
    }

    /// The last line of the human summary: `N passed, N failed` (and `, N skipped` when any).
    #[must_use]
    pub fn final_line(&self) -> String {
        final_line(self.counts())
    }

    /// True when nothing failed.
    #[must_use]
    pub fn ok(&self) -> bool {
        self.counts().1 == 0
    }

    /// Requirement ids cited by at least one passing result, and by at least one failing one.
    #[must_use]
    pub fn requirements(&self) -> (BTreeSet<String>, BTreeSet<String>) {
        let mut passed = BTreeSet::new();
        let mut failed = BTreeSet::new();
        for r in &self.results {
            if r.status == Status::Pass {
                passed.extend(r.requirements.iter().cloned());
            } else if self.is_failure(r.status) {
                failed.extend(r.requirements.iter().cloned());
            }
        }
        (passed, failed)
    }

    /// The human summary: one line per failing (and tolerated) result, per-class totals, and
    /// the final `N passed, N failed` line. `verbose` adds diffs and stderr.
    #[must_use]
    pub fn human(&self, verbose: bool) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "implementation: {} ({} {})", self.label, self.info.name, self.info.version);
        for r in &self.results {
            let show = self.is_failure(r.status)
                || r.status == Status::FailWrongClass
                || (verbose && r.status == Status::Skip);
            if !show {
                continue;
            }
            let _ = writeln!(out, "{:<21} {}: {}", r.status.as_str(), r.display_id(), one_line(&r.detail));
            if verbose {
                for d in r.diff.iter().take(20) {
                    let _ = writeln!(out, "    {d}");
                }
                if !r.observed.stderr_head.is_empty() && r.status != Status::Skip {
                    for l in r.observed.stderr_head.lines() {
                        let _ = writeln!(out, "    stderr| {l}");
                    }
                }
            }
        }
        let _ = writeln!(out, "summary by class:");
        for class in CaseClass::ALL {
            let rs: Vec<&CaseResult> = self.results.iter().filter(|r| r.class == class).collect();
            if rs.is_empty() {
                continue;
            }
            let p = rs.iter().filter(|r| r.status == Status::Pass).count();
            let f = rs.iter().filter(|r| self.is_failure(r.status)).count();
            let s = rs.iter().filter(|r| r.status == Status::Skip).count();
            let _ = writeln!(out, "  {:<12} {p} passed, {f} failed, {s} skipped", class.dir());
        }
        let by_status: Vec<String> = Status::ALL
            .iter()
            .filter_map(|s| {
                let n = self.results.iter().filter(|r| r.status == *s).count();
                (n > 0 && *s != Status::Pass).then(|| format!("{} {n}", s.as_str()))
            })
            .collect();
        if !by_status.is_empty() {
            let _ = writeln!(out, "  statuses: {}", by_status.join(", "));
        }
        let (.., tolerated) = self.counts();
        if tolerated > 0 {
            let _ = writeln!(out, "  {tolerated} wrong-class result(s) not counted as failures (--lenient-classes)");
        }
        out.push_str(&self.final_line());
        out.push('\n');
        out
    }

    /// The JSON report.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let (passed, failed, skipped, tolerated) = self.counts();
        let mut by_status = serde_json::Map::new();
        for s in Status::ALL {
            by_status.insert(s.as_str().into(), json!(self.results.iter().filter(|r| r.status == s).count()));
        }
        let mut by_class = serde_json::Map::new();
        for class in CaseClass::ALL {
            let rs: Vec<&CaseResult> = self.results.iter().filter(|r| r.class == class).collect();
            by_class.insert(
                class.dir().into(),
                json!({
                    "passed": rs.iter().filter(|r| r.status == Status::Pass).count(),
                    "failed": rs.iter().filter(|r| self.is_failure(r.status)).count(),
                    "skipped": rs.iter().filter(|r| r.status == Status::Skip).count(),
                }),
            );
        }
        let (covered, failing) = self.requirements();
        json!({
            "report": "tessera-conformance-report/1",
            "adapter": {"label": self.label, "command": self.command, "info": self.info},
            "fixtures": self.fixtures.display().to_string(),
            "options": {"strict_classes": !self.lenient_classes, "writer": self.writer},
            "totals": {
                "results": self.results.len(),
                "passed": passed,
                "failed": failed,
                "skipped": skipped,
                "wrong_class_tolerated": tolerated,
                "by_status": by_status,
            },
            "by_class": by_class,
            "requirements_covered": covered,
            "requirements_failed": failing,
            "cases": self.results.iter().map(CaseResult::to_json).collect::<Vec<_>>(),
        })
    }
}

/// `N passed, N failed` and `, N skipped` when any were skipped.
#[must_use]
pub fn final_line((passed, failed, skipped, _): (usize, usize, usize, usize)) -> String {
    if skipped > 0 {
        format!("{passed} passed, {failed} failed, {skipped} skipped")
    } else {
        format!("{passed} passed, {failed} failed")
    }
}

fn one_line(s: &str) -> String {
    let l = s.lines().next().unwrap_or("");
    if l.chars().count() > 240 { format!("{}…", l.chars().take(240).collect::<String>()) } else { l.to_string() }
}

/// A copy of a directory tree whose files and directories are read-only while it lives.
struct ReadOnlyCopy {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_type()?.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

fn set_mode(dir: &Path, read_only: bool) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let walk: Vec<PathBuf> =
            std::fs::read_dir(dir).map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
        if !read_only {
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
        }
        for p in walk {
            if p.is_dir() {
                set_mode(&p, read_only);
            } else {
                let _ = std::fs::set_permissions(
                    &p,
                    std::fs::Permissions::from_mode(if read_only { 0o444 } else { 0o644 }),
                );
            }
        }
        if read_only {
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555));
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (dir, read_only);
    }
}

impl ReadOnlyCopy {
    fn of(src: &Path) -> std::io::Result<Self> {
        let tmp = tempfile::Builder::new().prefix("tessera-conformance-").tempdir()?;
        let root = tmp.path().join("input");
        copy_tree(src, &root)?;
        set_mode(&root, true);
        Ok(Self { _tmp: tmp, root })
    }

    /// Takes over a directory written in `tmp` and makes it read-only.
    fn adopt(tmp: tempfile::TempDir, root: PathBuf) -> Self {
        set_mode(&root, true);
        Self { _tmp: tmp, root }
    }
}

impl Drop for ReadOnlyCopy {
    fn drop(&mut self) {
        set_mode(&self.root, false);
    }
}

/// A selected unit of work: a read case, or one direction of a writer case.
struct Job<'a> {
    case: &'a Case,
    direction: Option<&'static str>,
    skip: Option<String>,
}

fn names(case: &Case, direction: Option<&str>) -> Vec<String> {
    let mut v = vec![case.meta.id.clone(), format!("{}/{}/{}", case.class.dir(), case.area, case.meta.id)];
    if let Some(d) = direction {
        v.push(format!("{}:{d}", case.meta.id));
    }
    v
}

fn select<'a>(cases: &'a [Case], opts: &Options) -> Vec<Job<'a>> {
    let mut jobs = Vec::new();
    for case in cases {
        let directions: Vec<Option<&'static str>> = if case.class == CaseClass::Writer {
            if !opts.writer {
                continue;
            }
            vec![Some("write"), Some("read")]
        } else {
            vec![None]
        };
        for direction in directions {
            let n = names(case, direction);
            let matches = |g: &String| n.iter().any(|x| glob_match(g, x));
            if !opts.run.is_empty() && !opts.run.iter().any(matches) {
                continue;
            }
            let skip = opts.skip.iter().find(|g| matches(g)).map(|g| format!("--skip {g}")).or_else(|| {
                opts.skip_reasons.iter().find(|(g, _)| matches(g)).map(|(g, r)| format!("{r} (skip file: {g})"))
            });
            jobs.push(Job { case, direction, skip });
        }
    }
    jobs
}

/// Loads the cases under `<fixtures>/cases` and lists the selected ones (`id` and direction).
///
/// # Errors
/// A case tree that does not load.
pub fn list(opts: &Options) -> Result<Vec<String>, String> {
    let cases = load_cases(&opts.fixtures.join("cases")).map_err(|e| e.to_string())?;
    Ok(select(&cases, opts)
        .iter()
        .map(|j| match j.direction {
            Some(d) => {
                format!("{}:{d}{}", j.case.meta.id, j.skip.as_ref().map_or(String::new(), |s| format!("  (skip: {s})")))
            }
            None => {
                format!("{}{}", j.case.meta.id, j.skip.as_ref().map_or(String::new(), |s| format!("  (skip: {s})")))
            }
        })
        .collect())
}

/// Runs every selected case against `adapter`.
///
/// # Errors
/// A case tree that does not load, or an adapter whose `info` fails.
pub fn run(adapter: &Adapter, opts: &Options) -> Result<Report, String> {
    run_with_progress(adapter, opts, |_| {})
}

/// As [`run`], calling `progress` after each result.
///
/// # Errors
/// As [`run`].
pub fn run_with_progress(
    adapter: &Adapter,
    opts: &Options,
    mut progress: impl FnMut(&CaseResult),
) -> Result<Report, String> {
    let cases = load_cases(&opts.fixtures.join("cases")).map_err(|e| e.to_string())?;
    let info = adapter.info(opts.default_timeout).map_err(|e| format!("adapter {}: {e}", adapter.label()))?;
    let mut results = Vec::new();
    for job in select(&cases, opts) {
        let r = run_job(adapter, &info, opts, &job);
        progress(&r);
        results.push(r);
    }
    Ok(Report {
        label: adapter.label(),
        command: adapter.command().map(<[String]>::to_vec),
        info,
        fixtures: opts.fixtures.clone(),
        lenient_classes: opts.lenient_classes,
        writer: opts.writer,
        results,
    })
}

fn expected_json(case: &Case) -> Value {
    let m = &case.meta;
    let mut v = json!({"expect": if case.class == CaseClass::Valid || case.class == CaseClass::Writer { "accept" } else { "reject" }});
    if !m.error.is_empty() {
        v["error"] = json!(m.error);
    }
    if let Some(a) = &m.args {
        v["args"] = serde_json::to_value(a).unwrap_or(Value::Null);
    }
    v
}

fn run_job(adapter: &Adapter, info: &AdapterInfo, opts: &Options, job: &Job<'_>) -> CaseResult {
    let case = job.case;
    let mut r = CaseResult {
        id: case.meta.id.clone(),
        direction: job.direction,
        class: case.class,
        area: case.area.clone(),
        requirements: case.meta.requirements.clone(),
        status: Status::Skip,
        detail: String::new(),
        expected: expected_json(case),
        observed: Observed::default(),
        diff: Vec::new(),
    };
    if let Some(reason) = &job.skip {
        r.detail.clone_from(reason);
        return r;
    }
    let timeout = case.meta.timeout_ms.map_or(opts.default_timeout, Duration::from_millis);
    match job.direction {
        None => read_case(adapter, info, case, timeout, &mut r),
        Some("write") => write_direction(adapter, info, case, timeout, &mut r),
        Some(_) => read_direction(adapter, info, case, timeout, &mut r),
    }
    r
}

/// Judges a read that must succeed with `want`; `None` means it passed.
fn judge_accept(o: &Observation, want: &Value, prefix: &str) -> Option<(Status, String, Vec<String>)> {
    match &o.outcome {
        Outcome::Accepted(Ok(got)) => {
            let d = compare::diff(want, got);
            (!d.is_empty()).then(|| {
                let lines: Vec<String> = d.iter().take(50).map(|x| format!("{prefix}{x}")).collect();
                (Status::FailOutputMismatch, format!("{prefix}{} difference(s), first: {}", d.len(), d[0]), lines)
            })
        }
        Outcome::Accepted(Err(e)) => Some((Status::FailOutputMismatch, format!("{prefix}{e}"), Vec::new())),
        Outcome::Rejected { class, message } => Some((
            Status::FailShouldAccept,
            format!("{prefix}rejected [{}]: {message}", class.as_deref().unwrap_or("?")),
            Vec::new(),
        )),
        other => Some(common(other, prefix)),
    }
}

/// Crash, timeout and not-supported outcomes.
fn common(o: &Outcome, prefix: &str) -> (Status, String, Vec<String>) {
    match o {
        Outcome::Crashed(m) => (Status::Crash, format!("{prefix}{m}"), Vec::new()),
        Outcome::TimedOut => (Status::Timeout, format!("{prefix}ran past the time limit"), Vec::new()),
        Outcome::NotSupported(m) => {
            (Status::Skip, format!("{prefix}the implementation does not support this (exit 89): {m}"), Vec::new())
        }
        Outcome::Accepted(_) | Outcome::Rejected { .. } => (Status::Pass, String::new(), Vec::new()),
    }
}

fn read_case(adapter: &Adapter, info: &AdapterInfo, case: &Case, timeout: Duration, r: &mut CaseResult) {
    if !info.offers("read") {
        r.detail = "the implementation does not list the read operation".into();
        return;
    }
    let copy = match ReadOnlyCopy::of(&case.input()) {
        Ok(c) => c,
        Err(e) => {
            r.status = Status::Crash;
            r.detail = format!("the runner cannot copy the input: {e}");
            return;
        }
    };
    let o = adapter.read(&copy.root, case.meta.args.as_ref(), timeout);
    r.observed.add(&o);
    if let Some(reason) = core_reader_skip(info, case, &o.outcome) {
        r.detail = reason;
        return;
    }
    let (status, detail, diff) = if case.class == CaseClass::Valid {
        match case.expected() {
            Err(e) => (Status::Crash, format!("the runner cannot read expected.json: {e}"), Vec::new()),
            Ok(want) => judge_accept(&o, &want, "").unwrap_or((Status::Pass, "dump equal".into(), Vec::new())),
        }
    } else {
        match &o.outcome {
            Outcome::Accepted(_) => (Status::FailShouldReject, "the read succeeded".into(), Vec::new()),
            Outcome::Rejected { class: Some(c), message } if case.meta.error.contains(c) => {
                (Status::Pass, format!("rejected [{c}]: {message}"), Vec::new())
            }
            Outcome::Rejected { class, message } => (
                Status::FailWrongClass,
                format!(
                    "expected one of [{}], got [{}]: {message}",
                    case.meta.error.join(", "),
                    class.as_deref().unwrap_or("no class")
                ),
                Vec::new(),
            ),
            other => common(other, ""),
        }
    };
    r.status = status;
    r.detail = detail;
    r.diff = diff;
}

/// Whether a case exercises encoded image columns: its area is `encoded`, or it cites FLG-08 (the
/// written datasets of the encoded writer cases).
fn needs_encoded_images(case: &Case) -> bool {
    case.area == "encoded" || case.meta.requirements.iter().any(|r| r == "FLG-08")
}

/// A core reader (one whose `info` does not list [`ENCODED_IMAGES_FEATURE`]) conforms by
/// answering `unsupported` for a version that sets `ENCODED_IMAGES` (SPEC.md FLG-03, FLG-08): on
/// a case of encoded image columns that answer is a `SKIP`, never a pass and never a failure.
fn core_reader_skip(info: &AdapterInfo, case: &Case, outcome: &Outcome) -> Option<String> {
    let unsupported = matches!(outcome, Outcome::Rejected { class: Some(c), .. } if c == "unsupported");
    (unsupported
        && case.class != CaseClass::Unsupported
        && needs_encoded_images(case)
        && !info.has_feature(ENCODED_IMAGES_FEATURE))
    .then(|| {
        format!(
            "a core reader: rejected [unsupported], and `info` does not list the feature \
             {ENCODED_IMAGES_FEATURE:?} (reader flag ENCODED_IMAGES, SPEC.md FLG-08)"
        )
    })
}

/// Loads a writer case's description and expected dumps.
fn writer_inputs(case: &Case) -> Result<(Logical, ExpectedVersions, ExpectedTags), String> {
    let logical = Logical::read(&case.logical_path())?;
    let (versions, tags) = parse_expected(&case.expected()?)?;
    Ok((logical, versions, tags))
}

/// [`writer_inputs`], or `None` with the result marked as a runner crash.
fn writer_inputs_or_crash(case: &Case, r: &mut CaseResult) -> Option<(Logical, ExpectedVersions, ExpectedTags)> {
    writer_inputs(case)
        .map_err(|e| {
            r.status = Status::Crash;
            r.detail = format!("the runner cannot load the case: {e}");
        })
        .ok()
}

/// Everything wrong with a dataset written from `logical`, as the reference sees it: each
/// version read back and compared with its expected dump, each version verified (VAL-14),
/// each tag read back, and the writer lint.
#[must_use]
pub fn check_written(root: &Path, logical: &Logical, versions: &[(u64, Value)], tags: &[(String, u64)]) -> Vec<String> {
    let mut problems = Vec::new();
    let dump_of: BTreeMap<u64, &Value> = versions.iter().map(|(v, d)| (*v, d)).collect();
    for (v, want) in versions {
        let args = Args { version: Some(*v), ..Args::default() };
        match reference_impl::read(root, Some(&args)) {
            reference_impl::Outcome::Accepted(got) => {
                let d = compare::diff(want, &got);
                problems.extend(d.iter().take(20).map(|x| format!("main@{v}: {x}")));
                if d.len() > 20 {
                    problems.push(format!("main@{v}: … and {} more difference(s)", d.len() - 20));
                }
            }
            other => problems.push(format!("main@{v}: the reference cannot read it: {}", other.summary())),
        }
        if let Err(e) = reference_impl::verify(root, Some(&args)) {
            problems.push(format!("main@{v}: full verification (VAL-14) fails: {e}"));
        }
    }
    for (name, v) in tags {
        let args = Args { tag: Some(name.clone()), ..Args::default() };
        match (reference_impl::read(root, Some(&args)), dump_of.get(v)) {
            (reference_impl::Outcome::Accepted(got), Some(want)) => {
                if !compare::equal(want, &got) {
                    problems.push(format!("tag {name}: does not read as main@{v}"));
                }
            }
            (other, _) => problems.push(format!("tag {name}: the reference cannot read it: {}", other.summary())),
        }
    }
    problems.extend(writer_lint::lint(root, logical));
    problems
}

fn write_direction(adapter: &Adapter, info: &AdapterInfo, case: &Case, timeout: Duration, r: &mut CaseResult) {
    if !info.offers("write") {
        r.detail = "the implementation does not list the write operation".into();
        return;
    }
    let Some((logical, versions, tags)) = writer_inputs_or_crash(case, r) else { return };
    let tmp = match tempfile::Builder::new().prefix("tessera-conformance-").tempdir() {
        Ok(t) => t,
        Err(e) => {
            r.status = Status::Crash;
            r.detail = format!("the runner cannot make a temporary directory: {e}");
            return;
        }
    };
    let out = tmp.path().join("dataset");
    if let Err(e) = std::fs::create_dir(&out) {
        r.status = Status::Crash;
        r.detail = format!("the runner cannot make the output directory: {e}");
        return;
    }
    let o = adapter.write(&case.logical_path(), &out, timeout);
    r.observed.add(&o);
    (r.status, r.detail) = match &o.outcome {
        Outcome::Accepted(_) => {
            let problems = check_written(&out, &logical, &versions, &tags);
            if problems.is_empty() {
                (Status::Pass, format!("{} version(s) and {} tag(s) read back equal", versions.len(), tags.len()))
            } else {
                let first = problems[0].clone();
                r.diff = problems;
                (Status::FailOutputMismatch, format!("{} problem(s), first: {first}", r.diff.len()))
            }
        }
        Outcome::Rejected { class, message } => {
            (Status::FailShouldAccept, format!("the write failed [{}]: {message}", class.as_deref().unwrap_or("?")))
        }
        other => {
            let (s, d, _) = common(other, "");
            (s, d)
        }
    };
}

fn read_direction(adapter: &Adapter, info: &AdapterInfo, case: &Case, timeout: Duration, r: &mut CaseResult) {
    if !info.offers("read") {
        r.detail = "the implementation does not list the read operation".into();
        return;
    }
    let Some((logical, versions, tags)) = writer_inputs_or_crash(case, r) else { return };
    let written =
        tempfile::Builder::new().prefix("tessera-conformance-").tempdir().map_err(|e| e.to_string()).and_then(|tmp| {
            let root = tmp.path().join("dataset");
            logical.write_with_reference(&root, &RefWrite::small_deterministic()).map_err(|e| e.to_string())?;
            Ok(ReadOnlyCopy::adopt(tmp, root))
        });
    let copy = match written {
        Ok(c) => c,
        Err(e) => {
            r.status = Status::Crash;
            r.detail = format!("the reference cannot write the case: {e}");
            return;
        }
    };
    let dump_of: BTreeMap<u64, &Value> = versions.iter().map(|(v, d)| (*v, d)).collect();
    let mut reads: Vec<(Args, &Value, String)> = versions
        .iter()
        .map(|(v, d)| (Args { version: Some(*v), ..Args::default() }, d, format!("main@{v}: ")))
        .collect();
    for (name, v) in &tags {
        if let Some(d) = dump_of.get(v) {
            reads.push((Args { tag: Some(name.clone()), ..Args::default() }, d, format!("tag {name}: ")));
        }
    }
    for (args, want, prefix) in &reads {
        let o = adapter.read(&copy.root, Some(args), timeout);
        r.observed.add(&o);
        if let Some(reason) = core_reader_skip(info, case, &o.outcome) {
            r.detail = format!("{prefix}{reason}");
            return;
        }
        if let Some((status, detail, diff)) = judge_accept(&o, want, prefix) {
            r.status = status;
            r.detail = detail;
            r.diff = diff;
            return;
        }
    }
    r.status = Status::Pass;
    r.detail = format!("{} read(s) equal", reads.len());
}

/// Runs the selected cases against several implementations and renders a matrix of the
/// results that are not all `PASS`, then each implementation's summary line and a total.
///
/// # Errors
/// As [`run`], for the first implementation that cannot be run.
pub fn run_matrix(adapters: &[Adapter], opts: &Options) -> Result<(Vec<Report>, String), String> {
    let reports: Vec<Report> = adapters.iter().map(|a| run(a, opts)).collect::<Result<_, _>>()?;
    let mut out = String::new();
    let labels: Vec<String> = reports.iter().map(|r| r.label.clone()).collect();
    let _ = writeln!(out, "{:<64} {}", "case", labels.join(" | "));
    let n = reports.first().map_or(0, |r| r.results.len());
    for i in 0..n {
        let row: Vec<Status> = reports.iter().map(|r| r.results[i].status).collect();
        if row.iter().all(|s| *s == Status::Pass) {
            continue;
        }
        let cells: Vec<String> =
            row.iter().zip(&labels).map(|(s, l)| format!("{:<w$}", s.as_str(), w = l.len())).collect();
        let _ = writeln!(out, "{:<64} {}", reports[0].results[i].display_id(), cells.join(" | "));
    }
    let mut total = (0, 0, 0, 0);
    for r in &reports {
        let c = r.counts();
        let _ = writeln!(out, "{}: {}", r.label, r.final_line());
        total = (total.0 + c.0, total.1 + c.1, total.2 + c.2, total.3 + c.3);
    }
    out.push_str(&final_line(total));
    out.push('\n');
    Ok((reports, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("n-datafile-*", "n-datafile-0001-x"));
        assert!(glob_match("*-0001-*", "v-dtype-0001-all"));
        assert!(glob_match("reject/limits/*", "reject/limits/n-limits-0001-x"));
        assert!(glob_match("v-?type*", "v-dtype-0001"));
        assert!(!glob_match("n-*", "v-dtype"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("a*b", "a-c"));
    }

    #[test]
    fn skip_files_need_reasons() {
        let ok = parse_skip_file("\"n-codec-*\" = \"no zstd yet\"\n\"w-*:write\" = \"read-only\"\n").unwrap();
        assert_eq!(ok.len(), 2);
        assert!(parse_skip_file("\"n-*\" = \"\"\n").is_err());
        assert!(parse_skip_file("\"n-*\" = 3\n").is_err());
    }

    #[test]
    fn final_lines() {
        assert_eq!(final_line((3, 0, 0, 0)), "3 passed, 0 failed");
        assert_eq!(final_line((3, 1, 2, 0)), "3 passed, 1 failed, 2 skipped");
    }
}
