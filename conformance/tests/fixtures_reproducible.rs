//! The golden fixtures are exactly what the generator writes: regenerating them into a
//! temporary directory must reproduce every checked-in file byte for byte, with no file
//! missing and none extra.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use tessera_conformance::{fixtures_dir, generate};

/// Every file under `root`, by '/'-separated relative path.
fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(dir: &Path, prefix: &str, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        for e in rd.filter_map(Result::ok) {
            let name = e.file_name().to_string_lossy().into_owned();
            let rel = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
            let p = e.path();
            if p.is_dir() {
                walk(&p, &rel, out);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, "", &mut out);
    out
}

/// A readable report of how two trees differ (empty when equal).
fn tree_diff(want: &BTreeMap<String, Vec<u8>>, got: &BTreeMap<String, Vec<u8>>) -> String {
    let list = |title: &str, items: Vec<&String>| {
        if items.is_empty() {
            return String::new();
        }
        let mut s = format!("{title} ({}):\n", items.len());
        for i in items.iter().take(40) {
            let _ = writeln!(s, "  {i}");
        }
        if items.len() > 40 {
            let _ = writeln!(s, "  … and {} more", items.len() - 40);
        }
        s
    };
    let differing = want.iter().filter(|(k, v)| got.get(*k).is_some_and(|g| g != *v)).map(|(k, _)| k).collect();
    let missing = want.keys().filter(|k| !got.contains_key(*k)).collect();
    let extra = got.keys().filter(|k| !want.contains_key(*k)).collect();
    [
        list("files whose bytes differ", differing),
        list("checked-in files the generator no longer writes", missing),
        list("files the generator writes that are not checked in", extra),
    ]
    .concat()
}

#[test]
fn generator_reproduces_the_checked_in_fixtures() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let summary = generate::generate(tmp.path()).unwrap_or_else(|e| panic!("the generator failed: {e}"));
    let got = files(&tmp.path().join("cases"));
    let want = files(&fixtures_dir().join("cases"));
    assert!(!want.is_empty(), "fixtures/cases is empty or missing");
    let diff = tree_diff(&want, &got);
    assert!(
        diff.is_empty(),
        "the generator no longer reproduces fixtures/cases byte for byte.\n{diff}\nIf the change is \
         intended (a deliberate format or writer change), regenerate with\n  cargo run -p \
         tessera-conformance --bin tessera-fixtures -- fixtures\nand review the diff.\n\ngenerated:\n{summary}"
    );
    assert!(fixtures_dir().join("README.md").is_file(), "fixtures/README.md is missing");
}

#[test]
fn generator_is_deterministic() {
    let (a, b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    generate::generate(a.path()).expect("first run");
    generate::generate(b.path()).expect("second run");
    let diff = tree_diff(&files(&a.path().join("cases")), &files(&b.path().join("cases")));
    assert!(diff.is_empty(), "two runs of the generator differ:\n{diff}");
}
