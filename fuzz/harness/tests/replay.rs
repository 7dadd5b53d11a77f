//! Replays every file of `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` through the
//! harness function of its target, on the stable toolchain, as part of `cargo test`. A panic in
//! any input fails the test; all failing files are listed, not only the first.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("fuzz/harness has a parent").to_path_buf()
}

/// The input files of one target, sorted by path.
fn inputs(target: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for kind in ["corpus", "regressions"] {
        let Ok(dir) = std::fs::read_dir(fuzz_dir().join(kind).join(target)) else { continue };
        files.extend(dir.flatten().map(|e| e.path()).filter(|p| p.is_file()));
    }
    files.sort();
    files
}

fn replay(target: &str) {
    let start = Instant::now();
    let files = inputs(target);
    let mut failures = Vec::new();
    for path in &files {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| tessera_fuzz_harness::run(target, &data))) {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(ToString::to_string))
                .unwrap_or_default();
            failures.push(format!("{}: {msg}", path.display()));
        }
    }
    eprintln!("{target}: {} inputs replayed in {:.2?}", files.len(), start.elapsed());
    assert!(
        failures.is_empty(),
        "{target}: {} of {} inputs panic:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

macro_rules! replay_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                replay(stringify!($name));
            }
        )*

        #[test]
        fn every_target_is_replayed() {
            let mut mine = vec![$(stringify!($name)),*];
            mine.sort_unstable();
            let mut all = tessera_fuzz_harness::TARGETS.to_vec();
            all.sort_unstable();
            assert_eq!(mine, all);
        }
    };
}

replay_tests!(data_file, manifest, segment, tag, deletion_vector, lz4_block, zstd_block, store_layout, roundtrip);
