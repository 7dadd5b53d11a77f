//! Property: random schemas (every dtype, fixed and ragged shapes with zero dims, nullability,
//! codecs) and rows round-trip. The description survives its JSON form; the reference writes
//! it (with random page and file sizes, so rows spread over pages, fragments and segments);
//! every version and tag reads back to the dump computed from the description alone; every
//! version verifies; and the writer lint finds nothing.
//!
//! 40 cases by default with a fixed seed; `PROPTEST_CASES` runs more.

mod common;

use proptest::prelude::*;
use tessera_conformance::case::Args;
use tessera_conformance::compare;
use tessera_conformance::logical::{Logical, RefWrite};
use tessera_conformance::reference_impl::{self, Outcome};
use tessera_conformance::writer_lint;

proptest! {
    #![proptest_config(common::config(40, 0x0011_7EA1))]

    #[test]
    fn random_descriptions_round_trip(l in common::logical(), page in 1u64..200, file in 1u64..2000) {
        let again = Logical::from_value(&l.to_value());
        prop_assert_eq!(again.as_ref(), Ok(&l), "the description does not survive its JSON form");
        let tmp = tempfile::tempdir().unwrap();
        let settings = RefWrite { deterministic: true, page_bytes: page, target_file_bytes: file };
        l.write_with_reference(tmp.path(), &settings).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for v in 1..=l.versions() {
            let args = Args { version: Some(v), ..Args::default() };
            match reference_impl::read(tmp.path(), Some(&args)) {
                Outcome::Accepted(got) => {
                    let d = compare::diff(&l.expected_dump(v), &got);
                    prop_assert!(d.is_empty(), "main@{v} reads back differently:\n{}", compare::render(&d, 10));
                }
                other => prop_assert!(false, "main@{v}: {}", other.summary()),
            }
            let verified = reference_impl::verify(tmp.path(), Some(&args));
            prop_assert!(verified.is_ok(), "main@{v}: {:?}", verified);
        }
        for t in &l.tags {
            let args = Args { tag: Some(t.name.clone()), ..Args::default() };
            match reference_impl::read(tmp.path(), Some(&args)) {
                Outcome::Accepted(got) => prop_assert!(compare::equal(&l.expected_dump(t.version), &got), "tag {}", t.name),
                other => prop_assert!(false, "tag {}: {}", t.name, other.summary()),
            }
        }
        let problems = writer_lint::lint(tmp.path(), &l);
        prop_assert!(problems.is_empty(), "writer lint:\n{}", problems.join("\n"));
    }
}
