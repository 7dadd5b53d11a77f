//! Property: flipping or truncating random bytes of a valid fixture never makes the reference
//! panic and never makes it return wrong data silently. Every outcome is either an error of a
//! spec class, or the case's exact expected dump (the change hit bytes nothing reads, such as
//! padding or an unreferenced object, which no checksum covers).
//!
//! 256 cases by default with a fixed seed; `PROPTEST_CASES` scales the run up and
//! `PROPTEST_RNG_SEED` picks another seed.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngSeed};
use serde_json::Value;
use tessera_conformance::case::{Args, CaseClass, load_cases};
use tessera_conformance::compare;
use tessera_conformance::fixtures_dir;
use tessera_conformance::reference_impl::{self, Outcome};

/// A valid case ready to be corrupted: its input files and what reading it must give.
struct Target {
    id: String,
    input: PathBuf,
    /// Non-empty files of the input, relative paths.
    files: Vec<PathBuf>,
    args: Option<Args>,
    expected: Value,
}

fn targets() -> &'static [Target] {
    static T: OnceLock<Vec<Target>> = OnceLock::new();
    T.get_or_init(|| {
        let cases = load_cases(&fixtures_dir().join("cases")).unwrap_or_else(|e| panic!("{e}"));
        cases
            .into_iter()
            .filter(|c| c.class == CaseClass::Valid)
            .map(|c| {
                let input = c.input();
                let mut files = Vec::new();
                collect(&input, Path::new(""), &mut files);
                let expected = c.expected().unwrap_or_else(|e| panic!("{e}"));
                Target { id: c.meta.id.clone(), input, files, args: c.meta.args.clone(), expected }
            })
            .collect()
    })
}

/// Non-empty files under `dir`, relative to the input root, sorted.
fn collect(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(root.join(rel)).expect("read_dir").filter_map(Result::ok).collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let r = rel.join(e.file_name());
        let meta = e.metadata().expect("metadata");
        if meta.is_dir() {
            collect(root, &r, out);
        } else if meta.len() > 0 {
            out.push(r);
        }
    }
}

/// Copies a directory tree.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create_dir_all");
    for e in std::fs::read_dir(from).expect("read_dir").filter_map(Result::ok) {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).expect("copy");
        }
    }
}

/// One corruption of one file.
#[derive(Clone, Debug)]
enum Mutation {
    /// XOR the byte at an index with a non-zero mask.
    Flip(Index, u8),
    /// Cut the file to a shorter length.
    Truncate(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<Index>(), 1u8..=255).prop_map(|(i, x)| Mutation::Flip(i, x)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
    ]
}

fn config() -> Config {
    let mut c = Config { failure_persistence: None, ..Config::default() };
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        c.rng_seed = RngSeed::Fixed(0x7E55_E7A0);
    }
    c
}

/// Applies the mutation to a copy of the case and reads it.
fn run(target: &Target, file: &Path, m: &Mutation) -> (String, Outcome) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("input");
    copy_tree(&target.input, &root);
    let path = root.join(file);
    let mut bytes = std::fs::read(&path).expect("read");
    let what = match m {
        Mutation::Flip(i, x) => {
            let at = i.index(bytes.len());
            bytes[at] ^= x;
            format!("{}: byte {at} ^= {x:#04x}", file.display())
        }
        Mutation::Truncate(i) => {
            let len = i.index(bytes.len());
            bytes.truncate(len);
            format!("{}: truncated to {len} bytes", file.display())
        }
    };
    std::fs::write(&path, &bytes).expect("write");
    (what, reference_impl::read(&root, target.args.as_ref()))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn corrupted_fixtures_fail_cleanly_or_read_unchanged(
        case in any::<Index>(),
        file in any::<Index>(),
        m in mutation(),
    ) {
        let t = case.get(targets());
        let f = file.get(&t.files);
        let (what, outcome) = run(t, f, &m);
        match outcome {
            Outcome::Crashed(msg) => prop_assert!(false, "{}: {what}: the reference panicked: {msg}", t.id),
            Outcome::Rejected { class, message } => prop_assert!(
                ["malformed", "invalid", "unsupported", "limit", "io"].contains(&class.as_str()),
                "{}: {what}: rejected with the non-spec class [{class}]: {message}", t.id
            ),
            Outcome::Accepted(dump) => {
                let d = compare::diff(&t.expected, &dump);
                prop_assert!(d.is_empty(), "{}: {what}: read WRONG DATA silently:\n{}", t.id, compare::render(&d, 10));
            }
        }
    }
}
