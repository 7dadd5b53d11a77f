//! Writes one case directory and checks the reference's behaviour on it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use tessera::{At, Dataset, Limits, Store};

use super::{Result, Summary, bail};
use crate::canonical_json;
use crate::case::{Args, CaseClass, CaseMeta, Expect, SPEC_VERSION};
use crate::logical::{Logical, RefWrite};
use crate::reference_impl::{self, Outcome};

/// The provenance every generated case records.
pub const PROVENANCE: &str = "gen:tessera-fixtures";

/// What a case is: its id, the requirements it exercises, one sentence about it, and the
/// version it reads.
#[derive(Clone, Debug)]
pub(crate) struct Spec<'a> {
    /// `<prefix>-<area>-<NNNN>-<slug>`.
    pub(crate) id: &'a str,
    /// Requirement ids.
    pub(crate) reqs: &'a [&'a str],
    /// What the input is (and for rejects, its fault).
    pub(crate) description: &'a str,
    /// Which version to read.
    pub(crate) args: Option<Args>,
    /// The fuzz finding (`TFZ-n` in `fuzz/README.md`) this case promotes, if any.
    pub(crate) found_by: Option<&'a str>,
}

impl<'a> Spec<'a> {
    /// A case reading the latest version of `main`.
    pub(crate) fn new(id: &'a str, reqs: &'a [&'a str], description: &'a str) -> Self {
        Self { id, reqs, description, args: None, found_by: None }
    }

    /// The same case reading the version `args` name.
    pub(crate) fn with_args(mut self, args: Args) -> Self {
        self.args = Some(args);
        self
    }

    /// The same case, promoted from a fuzz finding: its provenance names the finding.
    pub(crate) fn found_by(mut self, finding: &'a str) -> Self {
        self.found_by = Some(finding);
        self
    }
}

/// Writes cases under a `cases/` directory and counts them.
#[derive(Debug)]
pub(crate) struct Emitter {
    root: PathBuf,
    counts: BTreeMap<(CaseClass, String), usize>,
    ids: BTreeSet<String>,
}

impl Emitter {
    /// An emitter writing under `root` (the `cases/` directory).
    pub(crate) fn new(root: &Path) -> Self {
        Self { root: root.to_path_buf(), counts: BTreeMap::new(), ids: BTreeSet::new() }
    }

    /// The counts of what was written.
    pub(crate) fn finish(self) -> Summary {
        Summary { counts: self.counts }
    }

    /// Builds a valid case: `build` writes the dataset into the given `input/` directory; the
    /// reference must read it (and verify it), and its dump becomes `expected.json`.
    pub(crate) fn valid(&mut self, spec: Spec<'_>, build: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
        self.valid_case(spec, build, true)
    }

    /// As [`Emitter::valid`], without full verification: for inputs every reader must accept
    /// but a verifier must reject (statistics that break STAT-01 to STAT-06, STAT-07; a view
    /// whose version has a fault outside what reading the view checks, VAL-19).
    pub(crate) fn valid_unverified(&mut self, spec: Spec<'_>, build: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
        self.valid_case(spec, build, false)
    }

    fn valid_case(&mut self, spec: Spec<'_>, build: impl FnOnce(&Path) -> Result<()>, verified: bool) -> Result<()> {
        let (dir, input) = self.start(&spec, CaseClass::Valid, build)?;
        let dump = match reference_impl::read(&input, spec.args.as_ref()) {
            Outcome::Accepted(v) => v,
            other => bail!("valid case {}: {}", spec.id, other.summary()),
        };
        if verified {
            verify(&input, spec.args.as_ref())
                .map_err(|e| super::GenError(format!("valid case {}: verify: {e}", spec.id)))?;
        }
        std::fs::write(dir.join("expected.json"), canonical_json::to_string_pretty(&dump))?;
        write_meta(&dir, spec, CaseClass::Valid, Vec::new(), None)
    }

    /// Builds a must-reject (or unsupported) case: the reference must fail with `class` and a
    /// message containing `hint`, which shows the fault it trips over is the intended one.
    pub(crate) fn reject(
        &mut self,
        spec: Spec<'_>,
        class: &str,
        hint: &str,
        build: impl FnOnce(&Path) -> Result<()>,
    ) -> Result<()> {
        let case_class = if class == "unsupported" { CaseClass::Unsupported } else { CaseClass::Reject };
        let (dir, input) = self.start(&spec, case_class, build)?;
        match reference_impl::read(&input, spec.args.as_ref()) {
            Outcome::Rejected { class: got, message } if got == class && message.contains(hint) => {}
            other => bail!("reject case {}: expected [{class}] with {hint:?}, got {}", spec.id, other.summary()),
        }
        write_meta(&dir, spec, case_class, vec![class.to_string()], Some(hint.to_string()))
    }

    /// Builds a must-reject case with several faults whose order SPEC.md §16 leaves open
    /// `[VAL-17]`: every class in `classes` counts as a pass. The reference must report one of
    /// them, with `hint` in its message.
    pub(crate) fn reject_multi(
        &mut self,
        spec: Spec<'_>,
        classes: &[&str],
        hint: &str,
        build: impl FnOnce(&Path) -> Result<()>,
    ) -> Result<()> {
        let (dir, input) = self.start(&spec, CaseClass::Reject, build)?;
        match reference_impl::read(&input, spec.args.as_ref()) {
            Outcome::Rejected { class: got, message } if classes.contains(&got.as_str()) && message.contains(hint) => {}
            other => {
                bail!("reject case {}: expected one of {classes:?} with {hint:?}, got {}", spec.id, other.summary())
            }
        }
        let classes = classes.iter().map(ToString::to_string).collect();
        write_meta(&dir, spec, CaseClass::Reject, classes, Some(hint.to_string()))
    }

    /// Builds a writer case: `logical.json` and the `expected.json` computed from it alone.
    /// The reference writes the description (small pages and files, fixed clock), and must
    /// read every version and tag back to exactly the expected dumps, verify, and pass the
    /// writer lint: a case never records what the reference cannot produce.
    pub(crate) fn writer(&mut self, spec: Spec<'_>, logical: &Logical) -> Result<()> {
        let Some(area) = spec.id.split('-').nth(1) else { bail!("bad case id {:?}", spec.id) };
        if !spec.id.starts_with("w-") || spec.args.is_some() {
            bail!("writer case {}: id must start with w- and take no args", spec.id);
        }
        if !self.ids.insert(spec.id.to_string()) {
            bail!("case id {} used twice", spec.id);
        }
        let text = canonical_json::to_string_pretty(&logical.to_value());
        match Logical::parse(&text) {
            Ok(again) if again == *logical => {}
            Ok(_) => bail!("writer case {}: logical.json does not round-trip", spec.id),
            Err(e) => bail!("writer case {}: logical.json does not parse: {e}", spec.id),
        }
        let expected = logical.expected_document();
        for settings in [RefWrite::small_deterministic(), RefWrite { deterministic: true, ..RefWrite::default() }] {
            let tmp = tempfile::tempdir()?;
            logical.write_with_reference(tmp.path(), &settings)?;
            check_written(tmp.path(), logical).map_err(|e| super::GenError(format!("writer case {}: {e}", spec.id)))?;
        }
        let dir = self.root.join(CaseClass::Writer.dir()).join(area).join(spec.id);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("logical.json"), text)?;
        std::fs::write(dir.join("expected.json"), canonical_json::to_string_pretty(&expected))?;
        *self.counts.entry((CaseClass::Writer, area.to_string())).or_default() += 1;
        let writer_id = spec.id.to_string();
        write_meta(&dir, spec, CaseClass::Writer, Vec::new(), None)?;
        self.written(area, &writer_id, logical)
    }

    /// The read side of a writer case: the dataset the reference writes from `logical` (small
    /// pages and files, fixed clock) as a valid read case of its latest version, so that a
    /// read-only implementation has every writer case's dataset to read. Its dump must be the
    /// one the description alone gives.
    fn written(&mut self, area: &str, writer_id: &str, logical: &Logical) -> Result<()> {
        let n = self.counts.get(&(CaseClass::Valid, "written".to_string())).copied().unwrap_or(0) + 1;
        let slug = writer_id.splitn(4, '-').nth(3).unwrap_or_default();
        let id = format!("v-written-{n:04}-{area}-{slug}");
        let description = format!(
            "the dataset the reference writes for writer case {writer_id} (small pages and files, fixed clock), \
             read at its latest version of main"
        );
        let want = logical.expected_dump(logical.versions());
        self.valid(Spec::new(&id, &["DUMP-01", "VAL-16"], &description), |input| {
            Ok(logical.write_with_reference(input, &RefWrite::small_deterministic())?)
        })?;
        let dir = self.root.join(CaseClass::Valid.dir()).join("written").join(&id);
        let got: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("expected.json"))?)
            .map_err(|e| super::GenError(format!("{id}: expected.json: {e}")))?;
        if !crate::compare::equal(&want, &got) {
            bail!("{id}: the reference's dump differs from the description's");
        }
        Ok(())
    }

    /// Creates the case directory and runs `build` on its `input/`.
    fn start(
        &mut self,
        spec: &Spec<'_>,
        class: CaseClass,
        build: impl FnOnce(&Path) -> Result<()>,
    ) -> Result<(PathBuf, PathBuf)> {
        let Some((prefix, area)) = spec.id.split('-').next().zip(spec.id.split('-').nth(1)) else {
            bail!("bad case id {:?}", spec.id)
        };
        if prefix != class.prefix() {
            bail!("case {}: prefix {prefix:?} does not fit class {class}", spec.id);
        }
        if !self.ids.insert(spec.id.to_string()) {
            bail!("case id {} used twice", spec.id);
        }
        let dir = self.root.join(class.dir()).join(area).join(spec.id);
        let input = dir.join("input");
        std::fs::create_dir_all(&input)?;
        build(&input).map_err(|e| super::GenError(format!("case {}: {e}", spec.id)))?;
        remove_staging_files(&input)?;
        *self.counts.entry((class, area.to_string())).or_default() += 1;
        Ok((dir, input))
    }
}

/// Writes `case.toml` for a finished case (after checking the metadata round-trips).
fn write_meta(dir: &Path, spec: Spec<'_>, class: CaseClass, error: Vec<String>, hint: Option<String>) -> Result<()> {
    let meta = CaseMeta {
        id: spec.id.to_string(),
        spec: SPEC_VERSION.to_string(),
        requirements: spec.reqs.iter().map(ToString::to_string).collect(),
        expect: if matches!(class, CaseClass::Valid | CaseClass::Writer) { Expect::Accept } else { Expect::Reject },
        error,
        operation: class.operation(),
        args: spec.args,
        timeout_ms: None,
        description: spec.description.to_string(),
        provenance: match spec.found_by {
            Some(finding) => format!("{PROVENANCE} fuzz:{finding}"),
            None => PROVENANCE.to_string(),
        },
        hint,
    };
    let area = spec.id.split('-').nth(1).unwrap_or_default();
    if let Err(e) = meta.validate(class, area, spec.id) {
        bail!("case {}: bad metadata: {e}", spec.id);
    }
    let text = meta.to_toml();
    if CaseMeta::parse(&text).ok().as_ref() != Some(&meta) {
        bail!("case {}: case.toml does not round-trip", spec.id);
    }
    std::fs::write(dir.join("case.toml"), text)?;
    Ok(())
}

/// Reads every version and tag of a dataset written from `logical` with the reference,
/// compares each with the dump computed from the description, verifies each version and runs
/// the writer lint ([`crate::runner::check_written`]).
///
/// # Errors
/// Every problem found.
pub(crate) fn check_written(root: &Path, logical: &Logical) -> std::result::Result<(), String> {
    let versions: Vec<(u64, serde_json::Value)> =
        (1..=logical.versions()).map(|v| (v, logical.expected_dump(v))).collect();
    let tags: Vec<(String, u64)> = logical.tags.iter().map(|t| (t.name.clone(), t.version)).collect();
    let problems = crate::runner::check_written(root, logical, &versions, &tags);
    if problems.is_empty() { Ok(()) } else { Err(problems.join("\n")) }
}

/// Runs the reference's full verification (every byte, padding included) on a valid case.
fn verify(input: &Path, args: Option<&Args>) -> tessera::Result<()> {
    let store = Store::open(input.to_str().unwrap_or_default())?;
    let ds = match reference_impl::at_for(args) {
        At::Tag(t) => Dataset::open_tag(&store, &t, Limits::default())?,
        at => Dataset::open_at(&store, &at, Limits::default())?,
    };
    ds.verify().map(|_| ())
}

/// Removes temporary files a local object store may leave (`<key>#<n>`), recursively.
fn remove_staging_files(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            remove_staging_files(&path)?;
        } else if path.file_name().is_some_and(|n| n.to_string_lossy().contains('#')) {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}
