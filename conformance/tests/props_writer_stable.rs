//! Property: the writer is byte-stable (DF-29, LAY-04). Writing the same description twice with
//! a fixed timestamp and writer id gives identical objects under identical keys; and the
//! writer lint holds for the result.
//!
//! 24 cases by default with a fixed seed; `PROPTEST_CASES` runs more.

mod common;

use proptest::prelude::*;
use tessera_conformance::logical::RefWrite;

proptest! {
    #![proptest_config(common::config(24, 0x57AB_1E00))]

    #[test]
    fn same_input_same_bytes(l in common::logical(), page in 1u64..300, file in 1u64..3000) {
        let settings = RefWrite { deterministic: true, page_bytes: page, target_file_bytes: file };
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        l.write_with_reference(a.path(), &settings).map_err(|e| TestCaseError::fail(e.to_string()))?;
        l.write_with_reference(b.path(), &settings).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let (fa, fb) = (common::files(a.path()), common::files(b.path()));
        let keys_a: Vec<&String> = fa.keys().collect();
        let keys_b: Vec<&String> = fb.keys().collect();
        prop_assert_eq!(keys_a, keys_b, "the two writes stored different keys");
        for (k, v) in &fa {
            prop_assert!(fb.get(k) == Some(v), "{k} differs between the two writes");
        }
        // Content-addressed names (LAY-04, a SHOULD the reference follows): data files, segments
        // and deletion vectors are named after their bytes.
        for (k, v) in &fa {
            for (dir, ext) in [("data", "tsd"), ("index", "tsi"), ("deletions", "tsx")] {
                if k.starts_with(&format!("{dir}/")) && !k.contains('#') {
                    prop_assert_eq!(k, &tessera::paths::content_key(dir, ext, v), "{} is not content-addressed", k);
                }
            }
        }
    }
}
