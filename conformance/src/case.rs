//! The `case.toml` model and the loader of the case tree.
//!
//! ```text
//! fixtures/cases/<class>/<area>/<case-id>/
//!     case.toml        metadata (this module's CaseMeta)
//!     input/           the dataset root exactly as stored: data/, index/, branches/, tags/
//!     expected.json    valid cases only: the canonical dump the read must produce
//! ```
//!
//! `<class>` is `valid`, `reject` or `unsupported`; the case id starts with the matching
//! prefix (`v-`, `n-`, `u-`) followed by the area, a four-digit number and a slug, e.g.
//! `n-datafile-0003-bad-footer-crc`.
//!
//! Writer cases (`writer/<area>/w-<area>-<NNNN>-<slug>/`) have no `input/`: they hold
//! `logical.json` (the content to write, `tessera-logical/1`, see [`crate::logical`]) and an
//! `expected.json` with the canonical dump of every version the write creates.

use std::collections::BTreeMap;
use std::fmt;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The spec version every current case applies from.
pub const SPEC_VERSION: &str = "1.0";

/// The error classes a fixture may list: the spec's classes for faults in stored bytes.
pub const SPEC_ERROR_CLASSES: [&str; 5] = ["malformed", "invalid", "unsupported", "limit", "io"];

/// The class of a case, encoded both in its top-level directory and in its id prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CaseClass {
    /// A conforming dataset: the read must succeed and produce `expected.json`.
    Valid,
    /// A dataset violating a MUST: the read must fail with a listed class.
    Reject,
    /// A dataset "from the future" (major version, reader flag): the read must fail with
    /// `unsupported`.
    Unsupported,
    /// A logical description to write: the written dataset must read back, version by
    /// version, to `expected.json` (and the reference's dataset of it must read the same).
    Writer,
}

impl CaseClass {
    /// Every class, in directory order.
    pub const ALL: [CaseClass; 4] = [Self::Valid, Self::Reject, Self::Unsupported, Self::Writer];

    /// The classes whose cases read a stored dataset (`input/`).
    pub const READ: [CaseClass; 3] = [Self::Valid, Self::Reject, Self::Unsupported];

    /// The directory under `cases/`.
    #[must_use]
    pub fn dir(self) -> &'static str {
        match self {
            Self::Valid => "valid",
            Self::Reject => "reject",
            Self::Unsupported => "unsupported",
            Self::Writer => "writer",
        }
    }

    /// The id prefix, without the dash.
    #[must_use]
    pub fn prefix(self) -> &'static str {
        match self {
            Self::Valid => "v",
            Self::Reject => "n",
            Self::Unsupported => "u",
            Self::Writer => "w",
        }
    }

    /// The class of a directory name.
    #[must_use]
    pub fn from_dir(dir: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.dir() == dir)
    }

    /// The class of an id prefix (without the dash).
    #[must_use]
    pub fn from_prefix(prefix: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.prefix() == prefix)
    }

    /// The operation every case of the class performs.
    #[must_use]
    pub fn operation(self) -> Operation {
        if self == Self::Writer { Operation::Write } else { Operation::Read }
    }
}

impl fmt::Display for CaseClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.dir())
    }
}

/// What the implementation must do with the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    /// Succeed and produce the expected dump.
    Accept,
    /// Fail with one of the listed error classes.
    Reject,
}

/// The operation a case exercises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    /// Open a version of the dataset and dump every row.
    Read,
    /// Write a dataset from `logical.json`, then read every version back.
    Write,
}

impl Operation {
    /// The name used in `case.toml` and by the adapter protocol.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

/// Which version a `read` opens. With no arguments: the latest version of `main`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// A version number (of `main`, or of `branch` when given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// A branch (its latest version, or `version` of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// A tag (alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// A view (alone): read the rows it lists, in its order, of the version it pins
    /// (SPEC.md §"Views").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
}

impl Args {
    /// Checks that the combination is meaningful: a tag stands alone.
    ///
    /// # Errors
    /// A description of the problem.
    pub fn validate(&self) -> Result<(), String> {
        if self.tag.is_some() && (self.version.is_some() || self.branch.is_some()) {
            return Err("args: `tag` cannot be combined with `version` or `branch`".into());
        }
        if self.view.is_some() && (self.version.is_some() || self.branch.is_some() || self.tag.is_some()) {
            return Err("args: `view` cannot be combined with `version`, `branch` or `tag`".into());
        }
        if self.version == Some(0) {
            return Err("args: versions start at 1".into());
        }
        if self.version.is_none() && self.branch.is_none() && self.tag.is_none() && self.view.is_none() {
            return Err("args: empty table (omit `args` to read the latest version of main)".into());
        }
        Ok(())
    }

    /// The arguments as an inline TOML table, e.g. `{ branch = "dev", version = 2 }`.
    #[must_use]
    pub fn to_inline_toml(&self) -> String {
        let mut parts = Vec::new();
        if let Some(b) = &self.branch {
            parts.push(format!("branch = {}", toml_string(b)));
        }
        if let Some(t) = &self.tag {
            parts.push(format!("tag = {}", toml_string(t)));
        }
        if let Some(v) = self.version {
            parts.push(format!("version = {v}"));
        }
        if let Some(v) = &self.view {
            parts.push(format!("view = {}", toml_string(v)));
        }
        format!("{{ {} }}", parts.join(", "))
    }
}

/// The contents of one `case.toml`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseMeta {
    /// `<prefix>-<area>-<NNNN>-<slug>`, equal to the case's directory name.
    pub id: String,
    /// The first spec version the case applies to.
    pub spec: String,
    /// SPEC.md requirement ids the case exercises, e.g. `DF-10`.
    pub requirements: Vec<String>,
    /// Accept or reject.
    pub expect: Expect,
    /// For rejects: the error classes that count as a pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error: Vec<String>,
    /// The operation.
    pub operation: Operation,
    /// Which version to read; absent for the latest version of `main`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Args>,
    /// The case's own time limit per adapter invocation, in milliseconds (the runner's default,
    /// 10000, when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// One sentence: what the input is, and for rejects the single fault it has.
    pub description: String,
    /// Where the case comes from: `gen:tessera-fixtures` for generated cases.
    pub provenance: String,
    /// Advisory: a substring the reference's error message contains. Other implementations
    /// are never compared against it; it documents which check the case is aimed at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl CaseMeta {
    /// Parses `case.toml` text.
    ///
    /// # Errors
    /// The TOML or field error.
    pub fn parse(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Formats the metadata as `case.toml` text, fields in a fixed order.
    #[must_use]
    pub fn to_toml(&self) -> String {
        let list = |v: &[String]| format!("[{}]", v.iter().map(|s| toml_string(s)).collect::<Vec<_>>().join(", "));
        let mut out = String::new();
        let _ = writeln!(out, "id = {}", toml_string(&self.id));
        let _ = writeln!(out, "spec = {}", toml_string(&self.spec));
        let _ = writeln!(out, "requirements = {}", list(&self.requirements));
        let expect = match self.expect {
            Expect::Accept => "accept",
            Expect::Reject => "reject",
        };
        let _ = writeln!(out, "expect = {}", toml_string(expect));
        if !self.error.is_empty() {
            let _ = writeln!(out, "error = {}", list(&self.error));
        }
        let _ = writeln!(out, "operation = {}", toml_string(self.operation.as_str()));
        if let Some(a) = &self.args {
            let _ = writeln!(out, "args = {}", a.to_inline_toml());
        }
        if let Some(t) = self.timeout_ms {
            let _ = writeln!(out, "timeout_ms = {t}");
        }
        let _ = writeln!(out, "description = {}", toml_string(&self.description));
        if let Some(h) = &self.hint {
            let _ = writeln!(out, "hint = {}", toml_string(h));
        }
        let _ = writeln!(out, "provenance = {}", toml_string(&self.provenance));
        out
    }

    /// The parts of the id: (class prefix, area, number, slug), if it is well formed.
    #[must_use]
    pub fn id_parts(&self) -> Option<(&str, &str, &str, &str)> {
        split_id(&self.id)
    }

    /// Checks the metadata on its own and against the directory it was found in.
    ///
    /// # Errors
    /// Every problem found, one per line.
    pub fn validate(&self, class: CaseClass, area: &str, dir_name: &str) -> Result<(), String> {
        let mut problems = Vec::new();
        match self.id_parts() {
            None => problems.push(format!("id {:?} is not <prefix>-<area>-<NNNN>-<slug>", self.id)),
            Some((prefix, id_area, _, _)) => {
                if prefix != class.prefix() {
                    problems.push(format!(
                        "id prefix {prefix:?} does not match directory {:?} (expects {:?})",
                        class.dir(),
                        class.prefix()
                    ));
                }
                if id_area != area {
                    problems.push(format!("id area {id_area:?} does not match area directory {area:?}"));
                }
            }
        }
        if self.id != dir_name {
            problems.push(format!("id {:?} differs from the directory name {dir_name:?}", self.id));
        }
        if self.spec != SPEC_VERSION {
            problems.push(format!("spec {:?} is not {SPEC_VERSION:?}", self.spec));
        }
        if self.requirements.is_empty() {
            problems.push("requirements is empty".into());
        }
        for r in &self.requirements {
            if !is_requirement_id(r) {
                problems.push(format!("requirement {r:?} is not like \"DF-10\""));
            }
        }
        if has_duplicates(&self.requirements) {
            problems.push("requirements has duplicates".into());
        }
        let want_expect =
            if matches!(class, CaseClass::Valid | CaseClass::Writer) { Expect::Accept } else { Expect::Reject };
        if self.expect != want_expect {
            problems.push(format!("expect {:?} does not fit class {class}", self.expect));
        }
        if self.operation != class.operation() {
            problems.push(format!("operation {:?} does not fit class {class}", self.operation.as_str()));
        }
        if class == CaseClass::Writer && self.args.is_some() {
            problems.push("a writer case takes no args (it reads back every version)".into());
        }
        if self.timeout_ms == Some(0) {
            problems.push("timeout_ms is 0".into());
        }
        match class {
            CaseClass::Valid | CaseClass::Writer if !self.error.is_empty() => {
                problems.push(format!("a {class} case lists error classes"));
            }
            CaseClass::Reject if self.error.is_empty() => problems.push("a reject case lists no error class".into()),
            CaseClass::Unsupported if self.error != ["unsupported"] => {
                problems.push("an unsupported case must list exactly error = [\"unsupported\"]".into());
            }
            _ => {}
        }
        for e in &self.error {
            if !SPEC_ERROR_CLASSES.contains(&e.as_str()) {
                problems.push(format!("error class {e:?} is not one of {SPEC_ERROR_CLASSES:?}"));
            }
        }
        if has_duplicates(&self.error) {
            problems.push("error has duplicates".into());
        }
        if let Some(a) = &self.args
            && let Err(e) = a.validate()
        {
            problems.push(e);
        }
        if self.description.trim().is_empty() {
            problems.push("description is empty".into());
        }
        if self.provenance.trim().is_empty() {
            problems.push("provenance is empty".into());
        }
        if self.hint.as_deref().is_some_and(|h| h.trim().is_empty()) {
            problems.push("hint is empty".into());
        }
        if problems.is_empty() { Ok(()) } else { Err(problems.join("\n")) }
    }
}

/// Splits `<prefix>-<area>-<NNNN>-<slug>`; `None` unless every part is well formed.
fn split_id(id: &str) -> Option<(&str, &str, &str, &str)> {
    let mut it = id.splitn(4, '-');
    let (prefix, area, number, slug) = (it.next()?, it.next()?, it.next()?, it.next()?);
    let lower_alnum = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let ok = CaseClass::from_prefix(prefix).is_some()
        && lower_alnum(area)
        && number.len() == 4
        && number.bytes().all(|b| b.is_ascii_digit())
        && !slug.is_empty()
        && !slug.starts_with('-')
        && !slug.ends_with('-')
        && slug.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    ok.then_some((prefix, area, number, slug))
}

/// True for ids like `DF-10` or `DUMP-4`.
fn is_requirement_id(s: &str) -> bool {
    s.split_once('-').is_some_and(|(a, n)| {
        !a.is_empty()
            && a.bytes().all(|b| b.is_ascii_uppercase())
            && !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
    })
}

fn has_duplicates(v: &[String]) -> bool {
    let mut s: Vec<&String> = v.iter().collect();
    s.sort();
    s.windows(2).any(|w| w[0] == w[1])
}

/// A TOML basic string literal.
fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// One loaded case.
#[derive(Clone, Debug)]
pub struct Case {
    /// Its metadata.
    pub meta: CaseMeta,
    /// Its class (from the directory, checked against the id).
    pub class: CaseClass,
    /// Its area (from the directory, checked against the id).
    pub area: String,
    /// The case directory.
    pub dir: PathBuf,
}

impl Case {
    /// The dataset root of the case.
    #[must_use]
    pub fn input(&self) -> PathBuf {
        self.dir.join("input")
    }

    /// The path of `expected.json` (valid and writer cases).
    #[must_use]
    pub fn expected_path(&self) -> PathBuf {
        self.dir.join("expected.json")
    }

    /// The path of `logical.json` (writer cases only).
    #[must_use]
    pub fn logical_path(&self) -> PathBuf {
        self.dir.join("logical.json")
    }

    /// True for the cases that read a stored dataset (every class but writer).
    #[must_use]
    pub fn is_read(&self) -> bool {
        self.class != CaseClass::Writer
    }

    /// Reads and parses `expected.json`.
    ///
    /// # Errors
    /// An I/O or JSON error, as text.
    pub fn expected(&self) -> Result<serde_json::Value, String> {
        let p = self.expected_path();
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))
    }
}

/// Everything wrong with a case tree, one problem per entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError {
    /// The problems, each naming the path at fault.
    pub problems: Vec<String>,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} problem(s) in the case tree:", self.problems.len())?;
        for p in &self.problems {
            writeln!(f, "  - {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for LoadError {}

/// Sorted names of the entries of a directory.
fn entries(dir: &Path, problems: &mut Vec<String>) -> Vec<(String, PathBuf)> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) => {
            problems.push(format!("{}: {e}", dir.display()));
            return Vec::new();
        }
    };
    let mut out: Vec<(String, PathBuf)> =
        rd.filter_map(Result::ok).map(|e| (e.file_name().to_string_lossy().into_owned(), e.path())).collect();
    out.sort();
    out
}

/// Loads every case under `cases_root` (the `cases/` directory), sorted by id, checking the
/// layout and every `case.toml`, and that no id appears twice.
///
/// # Errors
/// All problems found (the loader does not stop at the first).
pub fn load_cases(cases_root: &Path) -> Result<Vec<Case>, LoadError> {
    let mut problems = Vec::new();
    let mut cases = Vec::new();
    for (class_name, class_dir) in entries(cases_root, &mut problems) {
        let Some(class) = CaseClass::from_dir(&class_name) else {
            problems.push(format!(
                "{}: not a case class directory (valid, reject, unsupported, writer)",
                class_dir.display()
            ));
            continue;
        };
        for (area, area_dir) in entries(&class_dir, &mut problems) {
            if !area_dir.is_dir() {
                problems.push(format!("{}: expected an area directory", area_dir.display()));
                continue;
            }
            for (name, dir) in entries(&area_dir, &mut problems) {
                match load_case(class, &area, &name, &dir) {
                    Ok(c) => cases.push(c),
                    Err(e) => problems.push(format!("{}: {}", dir.display(), e.replace('\n', "; "))),
                }
            }
        }
    }
    let mut seen: BTreeMap<&str, &Path> = BTreeMap::new();
    for c in &cases {
        if let Some(other) = seen.insert(&c.meta.id, &c.dir) {
            problems.push(format!("duplicate id {:?} in {} and {}", c.meta.id, other.display(), c.dir.display()));
        }
    }
    if !problems.is_empty() {
        return Err(LoadError { problems });
    }
    cases.sort_by(|a, b| a.meta.id.cmp(&b.meta.id));
    Ok(cases)
}

/// Loads and checks one case directory.
fn load_case(class: CaseClass, area: &str, name: &str, dir: &Path) -> Result<Case, String> {
    if !dir.is_dir() {
        return Err("expected a case directory".into());
    }
    let text = std::fs::read_to_string(dir.join("case.toml")).map_err(|e| format!("case.toml: {e}"))?;
    let meta = CaseMeta::parse(&text).map_err(|e| format!("case.toml: {e}"))?;
    meta.validate(class, area, name)?;
    let has_expected = dir.join("expected.json").is_file();
    if class == CaseClass::Writer {
        if !dir.join("logical.json").is_file() {
            return Err("writer case without logical.json".into());
        }
        if !has_expected {
            return Err("writer case without expected.json".into());
        }
        for (entry, _) in entries(dir, &mut Vec::new()) {
            if !matches!(entry.as_str(), "case.toml" | "logical.json" | "expected.json") {
                return Err(format!("unexpected entry {entry:?} in the writer case directory"));
            }
        }
        return Ok(Case { meta, class, area: area.to_string(), dir: dir.to_path_buf() });
    }
    if !dir.join("input").is_dir() {
        return Err("missing input/ directory".into());
    }
    if class == CaseClass::Valid && !has_expected {
        return Err("valid case without expected.json".into());
    }
    if class != CaseClass::Valid && has_expected {
        return Err("only valid cases have an expected.json".into());
    }
    for (entry, _) in entries(dir, &mut Vec::new()) {
        if !matches!(entry.as_str(), "case.toml" | "input" | "expected.json") {
            return Err(format!("unexpected entry {entry:?} in the case directory"));
        }
    }
    Ok(Case { meta, class, area: area.to_string(), dir: dir.to_path_buf() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> CaseMeta {
        CaseMeta {
            id: "n-datafile-0003-bad-footer-crc".into(),
            spec: "1.0".into(),
            requirements: vec!["DF-10".into()],
            expect: Expect::Reject,
            error: vec!["malformed".into()],
            operation: Operation::Read,
            args: Some(Args { version: Some(2), branch: Some("dev".into()), ..Args::default() }),
            timeout_ms: Some(2500),
            description: "a \"quoted\" fault".into(),
            provenance: "gen:tessera-fixtures".into(),
            hint: Some("footer".into()),
        }
    }

    #[test]
    fn toml_round_trips() {
        let m = meta();
        let text = m.to_toml();
        assert_eq!(CaseMeta::parse(&text).unwrap(), m);
        assert!(m.validate(CaseClass::Reject, "datafile", "n-datafile-0003-bad-footer-crc").is_ok());
    }

    #[test]
    fn bad_metadata_is_refused() {
        let m = meta();
        assert!(m.validate(CaseClass::Valid, "datafile", &m.id).is_err());
        assert!(m.validate(CaseClass::Reject, "manifest", &m.id).is_err());
        assert!(m.validate(CaseClass::Reject, "datafile", "other").is_err());
        let mut u = m.clone();
        u.error = vec!["bogus".into()];
        assert!(u.validate(CaseClass::Reject, "datafile", &m.id).is_err());
        let mut t = m.clone();
        t.args = Some(Args { tag: Some("t".into()), version: Some(1), ..Args::default() });
        assert!(t.validate(CaseClass::Reject, "datafile", &m.id).is_err());
        assert!(CaseMeta::parse(&format!("{}extra = 1\n", m.to_toml())).is_err(), "unknown fields are refused");
        for bad in ["x-a-0001-b", "n-A-0001-b", "n-a-001-b", "n-a-0001-", "n-a-0001"] {
            assert!(split_id(bad).is_none(), "{bad}");
        }
        assert!(is_requirement_id("DUMP-04") && !is_requirement_id("df-1") && !is_requirement_id("DF-"));
    }
}
