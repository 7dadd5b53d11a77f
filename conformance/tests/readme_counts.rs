//! The case counts that `fixtures/README.md` and `conformance/README.md` state are the tree's.
//! A case added or removed without the READMEs following fails here, and the failure prints
//! every line to write, so the counts are never edited by hand from memory.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use tessera_conformance::case::{CaseClass, load_cases};
use tessera_conformance::fixtures_dir;

/// Cases and areas per class directory, from the tree.
fn counts() -> BTreeMap<&'static str, (usize, BTreeSet<String>)> {
    let cases = load_cases(&fixtures_dir().join("cases")).expect("the case tree loads");
    let mut out: BTreeMap<&'static str, (usize, BTreeSet<String>)> = BTreeMap::new();
    for c in &cases {
        let e = out.entry(c.class.dir()).or_default();
        e.0 += 1;
        e.1.insert(c.area.clone());
    }
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_readmes_state_the_trees_case_counts() {
    let tree = counts();
    let count = |class: CaseClass| tree.get(class.dir()).map_or(0, |x| x.0);
    let areas = |class: CaseClass| tree.get(class.dir()).map_or(0, |x| x.1.len());
    let (v, r, u, w) =
        (count(CaseClass::Valid), count(CaseClass::Reject), count(CaseClass::Unsupported), count(CaseClass::Writer));
    let (reads, total) = (v + r + u, v + r + u + 2 * w);
    let root = fixtures_dir().parent().expect("fixtures/ has a parent").to_path_buf();
    let fixtures_readme = read(&root.join("fixtures").join("README.md"));
    let conformance_readme = read(&root.join("conformance").join("README.md"));
    let mut want: Vec<(&str, &str, String)> = vec![(
        "fixtures/README.md",
        &fixtures_readme,
        format!("Counts today: {v} valid, {r} reject, {u} unsupported, {w} writer."),
    )];
    for (class, prefix) in
        [(CaseClass::Valid, "v-"), (CaseClass::Reject, "n-"), (CaseClass::Unsupported, "u-"), (CaseClass::Writer, "w-")]
    {
        want.push((
            "conformance/README.md",
            &conformance_readme,
            format!("| `{prefix}` | {} | {} |", count(class), areas(class)),
        ));
    }
    for line in [
        format!("The first command ends with `{total} passed, 0 failed` (writer: {} passed).", 2 * w),
        format!("  valid        {v} passed, 0 failed, 0 skipped"),
        format!("  reject       {r} passed, 0 failed, 0 skipped"),
        format!("  unsupported  {u} passed, 0 failed, 0 skipped"),
        format!("  writer       {} passed, 0 failed, 0 skipped", 2 * w),
        format!("{total} passed, 0 failed\n```"),
        format!("Without `--writer` the {reads} read cases run."),
    ] {
        want.push(("conformance/README.md", &conformance_readme, line));
    }
    // Every area of every class is named in fixtures/README.md's list of areas.
    for (_, names) in tree.values() {
        for a in names {
            want.push(("fixtures/README.md", &fixtures_readme, format!("`{a}`")));
        }
    }
    let missing: Vec<String> = want
        .iter()
        .filter(|(_, text, line)| !text.contains(line.as_str()))
        .map(|(file, _, line)| format!("{file}: {line:?}"))
        .collect();
    assert!(missing.is_empty(), "the READMEs' case counts are stale; they must contain:\n{}", missing.join("\n"));
}

/// The `case.toml` example of fixtures/README.md is the case it names, byte for byte.
#[test]
fn the_case_toml_example_is_a_real_case() {
    let root = fixtures_dir();
    let readme = read(&root.join("README.md"));
    let start = readme.find("```toml\n").expect("fixtures/README.md shows a case.toml") + "```toml\n".len();
    let example = &readme[start..start + readme[start..].find("```").expect("the toml block ends")];
    let id = example
        .lines()
        .find_map(|l| l.strip_prefix("id = \"").and_then(|r| r.strip_suffix('"')))
        .expect("the example has an id");
    let case = load_cases(&root.join("cases"))
        .expect("the case tree loads")
        .into_iter()
        .find(|c| c.meta.id == id)
        .unwrap_or_else(|| panic!("the example's case {id} does not exist"));
    let real = read(&case.dir.join("case.toml"));
    assert_eq!(example.trim_end(), real.trim_end(), "fixtures/README.md's case.toml example differs from {id}");
}
