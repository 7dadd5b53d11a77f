//! Completeness guard: every mandatory requirement of SPEC.md (one whose text says MUST, MUST
//! NOT, REQUIRED or SHALL) is cited by at least one fixture case, or listed with a reason in
//! `conformance/uncovered.toml`. The test prints the uncovered ids and fails.
//!
//! It also fails for a case citing an id SPEC.md does not define, and for an allow-list entry
//! that is stale (a case cites it) or is not a mandatory requirement.

use std::collections::BTreeSet;

use tessera_conformance::case::load_cases;
use tessera_conformance::fixtures_dir;
use tessera_conformance::requirements::{allow_list_path, load_allow_list, load_spec, spec_path};

#[test]
fn every_mandatory_requirement_is_covered_or_allow_listed() {
    let spec = load_spec(&spec_path()).unwrap_or_else(|e| panic!("{e}"));
    let defined: BTreeSet<&str> = spec.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(defined.len(), spec.len(), "SPEC.md defines an id twice");
    let mandatory: BTreeSet<&str> = spec.iter().filter(|r| r.mandatory).map(|r| r.id.as_str()).collect();
    assert!(mandatory.len() > 100, "only {} mandatory requirements found: is the parser broken?", mandatory.len());

    let cases = load_cases(&fixtures_dir().join("cases")).unwrap_or_else(|e| panic!("{e}"));
    let cited: BTreeSet<&str> = cases.iter().flat_map(|c| c.meta.requirements.iter().map(String::as_str)).collect();
    let allow = load_allow_list(&allow_list_path()).unwrap_or_else(|e| panic!("{e}"));

    let mut problems = Vec::new();
    for id in cited.difference(&defined) {
        let who: Vec<&str> =
            cases.iter().filter(|c| c.meta.requirements.iter().any(|r| r == id)).map(|c| c.meta.id.as_str()).collect();
        problems.push(format!("{id} is cited by {who:?} but SPEC.md does not define it"));
    }
    for id in allow.keys() {
        if !defined.contains(id.as_str()) {
            problems.push(format!("uncovered.toml lists {id}, which SPEC.md does not define"));
        } else if !mandatory.contains(id.as_str()) {
            problems.push(format!("uncovered.toml lists {id}, which is not a mandatory requirement"));
        } else if cited.contains(id.as_str()) {
            problems.push(format!("uncovered.toml lists {id}, but a case cites it: remove the entry"));
        }
    }
    let uncovered: Vec<&str> =
        mandatory.iter().copied().filter(|id| !cited.contains(id) && !allow.contains_key(*id)).collect();
    let covered = mandatory.iter().filter(|id| cited.contains(**id)).count();
    println!(
        "{} requirements, {} mandatory: {covered} cited by cases, {} allow-listed, {} uncovered",
        defined.len(),
        mandatory.len(),
        allow.len(),
        uncovered.len()
    );
    for id in &uncovered {
        let text = spec.iter().find(|r| r.id == *id).map_or("", |r| r.text.lines().next().unwrap_or(""));
        println!("  uncovered: {id}: {}", text.trim());
    }
    if !uncovered.is_empty() {
        problems.push(format!(
            "{} mandatory requirement(s) are neither cited by a case nor listed in conformance/uncovered.toml: {}",
            uncovered.len(),
            uncovered.join(", ")
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
