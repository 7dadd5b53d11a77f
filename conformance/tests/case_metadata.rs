//! Every case directory holds a valid `case.toml` whose id is the directory's name and whose
//! prefix matches the class directory it sits in; ids are unique. The loader itself is also
//! checked against broken trees.

use std::collections::BTreeSet;
use std::path::Path;

use tessera_conformance::case::{CaseClass, CaseMeta, load_cases};
use tessera_conformance::fixtures_dir;

/// Every `<class>/<area>/<case>` directory on disk.
fn case_dirs(cases: &Path) -> Vec<(String, String, String)> {
    let names = |p: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(p)
            .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned())).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    let mut out = Vec::new();
    for class in names(cases) {
        for area in names(&cases.join(&class)) {
            for case in names(&cases.join(&class).join(&area)) {
                out.push((class.clone(), area.clone(), case));
            }
        }
    }
    out
}

#[test]
fn every_case_has_consistent_metadata() {
    let root = fixtures_dir().join("cases");
    let dirs = case_dirs(&root);
    assert!(!dirs.is_empty(), "no cases under {}", root.display());
    let mut ids = BTreeSet::new();
    let mut problems = Vec::new();
    for (class, area, name) in &dirs {
        let dir = root.join(class).join(area).join(name);
        let Some(class) = CaseClass::from_dir(class) else {
            problems.push(format!("{}: unknown class directory", dir.display()));
            continue;
        };
        let meta = match std::fs::read_to_string(dir.join("case.toml"))
            .map_err(|e| e.to_string())
            .and_then(|t| CaseMeta::parse(&t))
        {
            Ok(m) => m,
            Err(e) => {
                problems.push(format!("{}: case.toml: {e}", dir.display()));
                continue;
            }
        };
        if &meta.id != name {
            problems.push(format!("{}: id {:?} differs from the directory name", dir.display(), meta.id));
        }
        if !meta.id.starts_with(&format!("{}-", class.prefix())) {
            problems.push(format!("{}: id {:?} does not start with {}-", dir.display(), meta.id, class.prefix()));
        }
        if let Err(e) = meta.validate(class, area, name) {
            problems.push(format!("{}: {}", dir.display(), e.replace('\n', "; ")));
        }
        if !ids.insert(meta.id.clone()) {
            problems.push(format!("duplicate id {}", meta.id));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let loaded = load_cases(&root).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.len(), dirs.len(), "the loader saw a different number of cases than there are directories");
}

/// Writes a minimal case directory.
fn write_case(root: &Path, class: &str, area: &str, dir_name: &str, toml: &str) {
    let d = root.join(class).join(area).join(dir_name);
    std::fs::create_dir_all(d.join("input")).unwrap();
    std::fs::write(d.join("case.toml"), toml).unwrap();
    if class == "valid" {
        std::fs::write(d.join("expected.json"), "{}\n").unwrap();
    }
}

fn toml(id: &str, expect: &str, error: &str) -> String {
    format!(
        "id = \"{id}\"\nspec = \"1.0\"\nrequirements = [\"DF-10\"]\nexpect = \"{expect}\"\n{error}operation = \
         \"read\"\ndescription = \"d\"\nprovenance = \"gen:test\"\n"
    )
}

#[test]
fn loader_rejects_broken_trees() {
    let ok_reject = toml("n-datafile-0001-x", "reject", "error = [\"malformed\"]\n");
    // A good tree loads.
    let t = tempfile::tempdir().unwrap();
    write_case(t.path(), "reject", "datafile", "n-datafile-0001-x", &ok_reject);
    write_case(t.path(), "valid", "dtype", "v-dtype-0001-y", &toml("v-dtype-0001-y", "accept", ""));
    assert_eq!(load_cases(t.path()).unwrap().len(), 2);

    let broken: [(&str, &str, &str, String); 6] = [
        // id differs from the directory name
        ("reject", "datafile", "n-datafile-0002-z", ok_reject.clone()),
        // prefix does not match the class directory
        ("valid", "datafile", "n-datafile-0001-x", ok_reject.clone()),
        // area does not match
        ("reject", "manifest", "n-datafile-0001-x", ok_reject.clone()),
        // unknown field
        ("reject", "datafile", "n-datafile-0001-x", format!("{ok_reject}extra = 1\n")),
        // reject without error classes
        ("reject", "datafile", "n-datafile-0001-x", toml("n-datafile-0001-x", "reject", "")),
        // unknown error class
        ("reject", "datafile", "n-datafile-0001-x", toml("n-datafile-0001-x", "reject", "error = [\"oops\"]\n")),
    ];
    for (class, area, dir, text) in broken {
        let t = tempfile::tempdir().unwrap();
        write_case(t.path(), class, area, dir, &text);
        assert!(load_cases(t.path()).is_err(), "accepted {class}/{area}/{dir} with\n{text}");
    }
    // Writer cases: logical.json and expected.json, no input/, operation write, no args.
    let writer_toml = "id = \"w-dtype-0001-x\"\nspec = \"1.0\"\nrequirements = [\"VER-06\"]\nexpect = \"accept\"\noperation = \
                       \"write\"\ndescription = \"d\"\nprovenance = \"gen:test\"\n";
    let writer = |files: &[&str], toml: &str| {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("writer").join("dtype").join("w-dtype-0001-x");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("case.toml"), toml).unwrap();
        for f in files {
            if *f == "input" {
                std::fs::create_dir_all(d.join("input")).unwrap();
            } else {
                std::fs::write(d.join(f), "{}").unwrap();
            }
        }
        load_cases(t.path()).map(|c| c.len())
    };
    assert_eq!(writer(&["logical.json", "expected.json"], writer_toml), Ok(1));
    assert!(writer(&["expected.json"], writer_toml).is_err(), "a writer case needs logical.json");
    assert!(writer(&["logical.json", "expected.json", "input"], writer_toml).is_err(), "no input/ in writer cases");
    assert!(writer(&["logical.json", "expected.json"], &writer_toml.replace("write", "read")).is_err());
    assert!(
        writer(&["logical.json", "expected.json"], &format!("{writer_toml}args = {{ version = 2 }}\n")).is_err(),
        "writer cases take no args"
    );

    // Ids are unique by construction of the layout (class, area and id all come from the
    // path); the loader still checks, and this shows the check is wired in.
    let t = tempfile::tempdir().unwrap();
    write_case(t.path(), "reject", "datafile", "n-datafile-0001-x", &ok_reject);
    write_case(t.path(), "reject", "datafile", "n-datafile-0002-y", &ok_reject.replace("0001-x", "0002-y"));
    assert_eq!(load_cases(t.path()).unwrap().len(), 2);
}
