//! Corrupt stored bytes: a checksum failure is an error by default; with skip-bad-sample the
//! affected samples are replaced by the next readable rows of the epoch's order, batch counts
//! stay equal, the replacements are deterministic, and every skip is reported.

mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::FileExt;

use tessera::Dataset;
use tessera_loader::{Loader, LoaderConfig, LoaderError, ShuffleMode};

/// Flips a byte inside page `page` of column `col` in the first data file of fragment
/// `frag`; returns the global rows stored in that page.
fn corrupt(ds: &Dataset, root: &str, frag: usize, col: &str, page: usize) -> Vec<i64> {
    let info = &ds.fragments()[frag];
    let file = &info.fragment.files[0];
    let df = ds.data_file(&info.fragment, file).unwrap();
    let chunk = df.chunk(ds.schema().column(col).unwrap().id).unwrap();
    let first: u64 = chunk.pages[..page].iter().map(|p| p.row_count).sum();
    let p = &chunk.pages[page];
    let f = std::fs::OpenOptions::new().read(true).write(true).open(format!("{root}/{}", file.path)).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, p.block.offset + 3).unwrap();
    f.write_all_at(&[b[0] ^ 0x5A], p.block.offset + 3).unwrap();
    (first..first + p.row_count).map(|r| (info.first_row + r) as i64).collect()
}

fn cfg(root: &str) -> LoaderConfig {
    common::config(root).with_batch_size(6).with_columns(&["id", "img"]).with_workers(3)
}

#[test]
fn checksum_failures_are_errors_or_deterministic_substitutions() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let ds = common::dataset(root, 100, false, &common::small_files());
    let order = |shuffle| -> Vec<i64> {
        let l = Loader::open(cfg(root).with_shuffle(shuffle)).unwrap();
        l.epoch(0).unwrap().flat_map(|b| common::ids(&b.unwrap())).collect()
    };
    let modes = [ShuffleMode::Global, ShuffleMode::Block { window_fragments: 2 }];
    let clean: Vec<Vec<i64>> = modes.iter().map(|&m| order(m)).collect();
    let bad = corrupt(&ds, root, 1, "img", 0);
    assert!(!bad.is_empty());

    // Default: the batch holding a bad row fails with a checksum error; the epoch ends.
    let results: Vec<_> = Loader::open(cfg(root)).unwrap().epoch(0).unwrap().collect();
    let err = results.iter().find_map(|r| r.as_ref().err()).expect("an error");
    assert!(matches!(err, LoaderError::Checksum { .. }), "{err}");
    assert!(results.last().unwrap().is_err(), "nothing after the error");

    // The same through an object store (block shuffle then reads through its window).
    let fs = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
    let store = tessera::Store::from_object_store(std::sync::Arc::new(fs), "", true);
    for ((shuffle, clean_sh), remote) in modes.into_iter().zip(&clean).flat_map(|m| [(m, false), (m, true)]) {
        let run = |workers: usize| {
            let c = LoaderConfig { skip_bad_samples: true, ..cfg(root) }.with_shuffle(shuffle).with_workers(workers);
            let loader = if remote { common::open_store(&store, c) } else { Loader::open(c) }.unwrap();
            let batches: Vec<Vec<i64>> = loader.epoch(0).unwrap().map(|b| common::ids(&b.unwrap())).collect();
            (batches, loader.skipped())
        };
        let (batches, skipped) = run(3);
        assert_eq!(batches.len() * 6, clean_sh.len(), "same batch count");
        let got: Vec<i64> = batches.concat();
        // Exactly the bad rows were replaced, each by a readable row.
        let replaced: BTreeSet<i64> = skipped.iter().map(|s| s.row as i64).collect();
        assert_eq!(replaced, bad.iter().copied().collect(), "{shuffle:?} remote={remote}");
        for (i, (&g, &c)) in got.iter().zip(clean_sh).enumerate() {
            if bad.contains(&c) {
                assert!(!bad.contains(&g), "position {i} still holds a bad row");
            } else {
                assert_eq!(g, c, "position {i} changed");
            }
        }
        for s in &skipped {
            assert!(s.error.contains("checksum"), "{}", s.error);
            assert!(!bad.contains(&(s.replacement as i64)));
        }
        // Deterministic, whatever the worker count.
        assert_eq!(run(1).0, batches);
    }
    assert_eq!(clean[0].len(), 102);
}

#[test]
fn corrupt_compressed_pages_are_caught_without_checksums_too() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let ds = common::dataset(root, 60, true, &common::small_files());
    let bad = corrupt(&ds, root, 0, "tok", 0);
    // With checksums off the lz4/zstd decoder still rejects the stream (or the decoded size),
    // unless the flipped byte happens to decode; either way no panic and no hang.
    let c = LoaderConfig { verify_checksums: false, skip_bad_samples: true, ..common::config(root) }
        .with_batch_size(5)
        .with_columns(&["id", "tok"]);
    let loader = Loader::open(c).unwrap();
    let n = loader.epoch(0).unwrap().map(|b| b.unwrap().rows.len()).sum::<usize>();
    assert_eq!(n, 60);
    for s in loader.skipped() {
        assert!(bad.contains(&(s.row as i64)));
    }
    // With checksums on the fault is always found.
    let c =
        LoaderConfig { skip_bad_samples: true, ..common::config(root) }.with_batch_size(5).with_columns(&["id", "tok"]);
    let loader = Loader::open(c).unwrap();
    assert_eq!(loader.epoch(0).unwrap().map(|b| b.unwrap().rows.len()).sum::<usize>(), 60);
    let skipped: BTreeSet<i64> = loader.skipped().iter().map(|s| s.row as i64).collect();
    assert_eq!(skipped, bad.into_iter().collect());
}
