//! Mid-epoch resume: a state taken after any number of batches, saved and loaded, yields
//! exactly the remaining batches (also with another world size at the same global batch);
//! states from another dataset, version, seed or settings are refused.

mod common;

use tessera::WriteOptions;
use tessera_loader::sampler::SplitMix64;
use tessera_loader::{Loader, LoaderError, LoaderState, ShuffleMode};

const ROWS: usize = 203;

fn files() -> WriteOptions {
    WriteOptions { target_file_bytes: 256, page_bytes: 64, ..WriteOptions::default() }
}

fn loader(root: &str, shuffle: ShuffleMode, bs: usize, rank: usize, world: usize) -> Loader {
    Loader::open(
        common::config(root)
            .with_batch_size(bs)
            .with_shuffle(shuffle)
            .with_seed(4)
            .with_rank(rank, world)
            .with_workers(3),
    )
    .unwrap()
}

/// Interleaved ids of every rank, starting from `state` (or the epoch's start).
fn run_all(root: &str, shuffle: ShuffleMode, bs: usize, world: usize, state: Option<&LoaderState>) -> Vec<i64> {
    let per_rank: Vec<Vec<Vec<i64>>> = (0..world)
        .map(|r| {
            let l = loader(root, shuffle, bs, r, world);
            let it = match state {
                Some(s) => l.resume(s).unwrap(),
                None => l.epoch(2).unwrap(),
            };
            it.map(|b| common::ids(&b.unwrap())).collect()
        })
        .collect();
    let mut out = Vec::new();
    for k in 0..per_rank[0].len() {
        for r in &per_rank {
            out.extend_from_slice(&r[k]);
        }
    }
    out
}

/// The state after consuming `k` batches on rank 0 of `world`.
fn state_after(root: &str, shuffle: ShuffleMode, bs: usize, world: usize, k: usize) -> LoaderState {
    let l = loader(root, shuffle, bs, 0, world);
    let mut it = l.epoch(2).unwrap();
    for _ in 0..k {
        it.next().unwrap().unwrap();
    }
    // Through the byte encoding, as a checkpoint file would.
    LoaderState::from_bytes(&it.state().to_bytes()).unwrap()
}

#[test]
fn resume_at_random_points_reproduces_the_remainder() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    common::id_dataset(root, ROWS, &files());
    let mut rng = SplitMix64::new(2024);
    for shuffle in [ShuffleMode::Global, ShuffleMode::Block { window_fragments: 2 }, ShuffleMode::None] {
        let full = run_all(root, shuffle, 4, 2, None);
        let batches = full.len() / 8;
        let mut points = vec![0, batches];
        points.extend((0..4).map(|_| (rng.next_u64() % batches as u64) as usize));
        for k in points {
            let state = state_after(root, shuffle, 4, 2, k);
            assert_eq!(state.samples_consumed_global, 8 * k as u64);
            // Same world size.
            assert_eq!(run_all(root, shuffle, 4, 2, Some(&state)), full[8 * k..], "{shuffle:?} k={k}");
            // Other world sizes with the same global batch of 8.
            assert_eq!(run_all(root, shuffle, 2, 4, Some(&state)), full[8 * k..], "{shuffle:?} k={k} W=4");
            assert_eq!(run_all(root, shuffle, 8, 1, Some(&state)), full[8 * k..], "{shuffle:?} k={k} W=1");
        }
    }
}

#[test]
fn foreign_states_are_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let ds = common::id_dataset(root, ROWS, &files());
    let state = state_after(root, ShuffleMode::Global, 4, 2, 3);
    let refused = |l: Loader| match l.resume(&state) {
        Err(LoaderError::Resume(msg)) => msg,
        other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
    };
    let base = || common::config(root).with_batch_size(4).with_rank(0, 2).with_seed(4);
    assert!(refused(Loader::open(base().with_seed(5)).unwrap()).contains("seed"));
    assert!(refused(Loader::open(base().with_shuffle(ShuffleMode::None)).unwrap()).contains("settings_digest"));
    assert!(refused(Loader::open(base().with_batch_size(3)).unwrap()).contains("settings_digest"));
    assert!(refused(Loader::open(LoaderConfig { drop_last: true, ..base() }).unwrap()).contains("settings_digest"));
    // A newer version of the same dataset.
    ds.append(
        &tessera::Batch::new().with("id", tessera::ColumnData::from_scalars(&[999i64])).unwrap(),
        "one more",
        files(),
    )
    .unwrap();
    assert!(refused(Loader::open(base()).unwrap()).contains("version"));
    // The old version pinned explicitly is accepted.
    let pinned = Loader::open(LoaderConfig { at: tessera::At::Version(ds.version()), ..base() }).unwrap();
    assert!(pinned.resume(&state).is_ok());
    // A different dataset that happens to have the same version number.
    let other = tempfile::tempdir().unwrap();
    let other_root = other.path().to_str().unwrap();
    common::id_dataset(other_root, ROWS, &files());
    let l = Loader::open(LoaderConfig { location: other_root.to_string(), ..base() }).unwrap();
    assert_eq!(l.version(), state.version);
    assert!(refused(l).contains("another dataset"));
    // Corrupted checkpoint bytes never decode.
    let mut bytes = state.to_bytes();
    bytes[20] ^= 1;
    assert!(LoaderState::from_bytes(&bytes).is_err());
    assert!(LoaderState::from_json(&state.to_json()).is_ok());
}

#[test]
fn a_state_at_the_end_resumes_to_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    common::id_dataset(root, 40, &files());
    let l = loader(root, ShuffleMode::Global, 4, 0, 1);
    let mut it = l.epoch(2).unwrap();
    let n = it.by_ref().count();
    assert_eq!(n, 10);
    let state = it.state();
    drop(it);
    assert_eq!(l.resume(&state).unwrap().count(), 0);
}

use tessera_loader::LoaderConfig;
