//! A full loader epoch, with shuffle and sharding, on every storage backend: local files,
//! memory, and the S3 and Azure test servers (`scripts/servers.sh`; in CI a missing server
//! fails the test, elsewhere it is skipped with a notice).

mod common;

use std::collections::BTreeMap;

use tessera_loader::{Loader, ShuffleMode};
use tessera_testkit::{Backend, TestRoot};

const ROWS: usize = 90;

/// The `img` bytes the common dataset writes for row `id`.
fn img_of(id: i64) -> Vec<u8> {
    (0..48).map(|k| (id * 7 + k) as u8).collect()
}

fn epoch_on(backend: Backend) {
    let Some(root) = TestRoot::new(backend, "loader-epoch") else { return };
    common::dataset(&root.url, ROWS, true, &common::small_files());
    for shuffle in [ShuffleMode::Global, ShuffleMode::Block { window_fragments: 2 }] {
        let world = 3;
        let mut seen: BTreeMap<i64, usize> = BTreeMap::new();
        let mut batches = Vec::new();
        for rank in 0..world {
            let cfg = common::config(&root.url)
                .with_batch_size(8)
                .with_shuffle(shuffle)
                .with_seed(11)
                .with_rank(rank, world)
                .with_columns(&["id", "img", "tok"]);
            let loader = Loader::open(cfg).unwrap_or_else(|e| panic!("{backend:?}: {e}"));
            let mut n = 0;
            for batch in loader.epoch(1).unwrap() {
                let batch = batch.unwrap_or_else(|e| panic!("{backend:?} {shuffle:?}: {e}"));
                let ids = common::ids(&batch);
                let img = common::named(&batch, "img");
                assert_eq!(img.len(), ids.len() * 48, "{backend:?} {shuffle:?}: image bytes");
                for (&id, got) in ids.iter().zip(img.chunks_exact(48)) {
                    assert_eq!(got, img_of(id), "{backend:?} {shuffle:?}: image of row {id}");
                    *seen.entry(id).or_default() += 1;
                }
                n += 1;
            }
            batches.push(n);
        }
        assert!(batches.iter().all(|&n| n == batches[0]), "{backend:?} {shuffle:?}: batch counts {batches:?}");
        // 90 rows in global batches of 24: 4 batches, the last padded with 6 repeated rows.
        assert_eq!(batches[0], 4, "{backend:?}");
        assert_eq!(seen.len(), ROWS, "{backend:?} {shuffle:?}: every row once");
        assert_eq!(seen.values().sum::<usize>(), 96, "{backend:?} {shuffle:?}: rows plus padding");
        assert_eq!(seen.values().filter(|&&c| c == 2).count(), 6, "{backend:?} {shuffle:?}: six padded rows");
    }
}

#[test]
fn local() {
    epoch_on(Backend::Local);
}

#[test]
fn memory() {
    epoch_on(Backend::Memory);
}

#[test]
fn s3() {
    epoch_on(Backend::S3);
}

#[test]
fn azure() {
    epoch_on(Backend::Azure);
}
