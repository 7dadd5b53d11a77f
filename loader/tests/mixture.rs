//! Mixtures of sources (versions and views): each source's share of an epoch, disjoint equal
//! shards, exact resume on other world sizes, and a change of the mix at a resume point that
//! a replay reproduces batch for batch.

mod common;

use std::collections::BTreeMap;

use tessera::{Batch, Column, ColumnData, DType, Dataset, Dim, Schema, WriteOptions};
use tessera_loader::{Loader, LoaderConfig, LoaderError, LoaderState, MixSource, Mixture, Share, ShuffleMode};

/// The rows `ids` with `v = [id, −id]`, under the id column name `id_name`.
fn rows_of(id_name: &str, ids: &[i64]) -> Batch {
    let v: Vec<f32> = ids.iter().flat_map(|&i| [i as f32, -(i as f32)]).collect();
    Batch::new()
        .with(id_name, ColumnData::from_scalars(ids))
        .unwrap()
        .with("v", ColumnData::from_fixed(&[2], &v).unwrap())
        .unwrap()
}

/// The schema of [`rows_of`].
fn schema(id_name: &str) -> Schema {
    Schema::new([Column::new(id_name, DType::I64, &[]), Column::new("v", DType::F32, &[Dim::Fixed(2)])]).unwrap()
}

/// A dataset of `rows` rows in fragments of 10: `id = 1_000_000 × source + row`, and `v`
/// (f32 × 2) = `[id, −id]`.
fn dataset(root: &str, source: i64, rows: i64) -> Dataset {
    let mut ds = Dataset::create(root, schema("id"), &WriteOptions::default()).unwrap();
    for start in (0..rows).step_by(10) {
        let ids: Vec<i64> = (start..(start + 10).min(rows)).map(|r| 1_000_000 * source + r).collect();
        ds = ds.append(&rows_of("id", &ids), "rows", WriteOptions::default()).unwrap();
    }
    ds
}

struct Fixture {
    _dir: tempfile::TempDir,
    roots: Vec<String>,
    view: Vec<u64>,
}

/// Three sources: 100 rows, 40 rows, and a view of 30 of 90 rows.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let roots: Vec<String> = (0..3).map(|i| dir.path().join(format!("s{i}")).to_str().unwrap().to_string()).collect();
    dataset(&roots[0], 0, 100);
    dataset(&roots[1], 1, 40);
    let view: Vec<u64> = (0..90).filter(|r| r % 3 == 0).rev().collect();
    dataset(&roots[2], 2, 90).save_view("sel", &view, "every third row").unwrap();
    Fixture { _dir: dir, roots, view }
}

fn sources(f: &Fixture) -> Vec<MixSource> {
    vec![MixSource::new(&f.roots[0]), MixSource::new(&f.roots[1]), MixSource::new(&f.roots[2]).view("sel")]
}

fn config(mix: Mixture, batch: usize, rank: usize, world: usize) -> LoaderConfig {
    LoaderConfig::for_mixture(mix).with_batch_size(batch).with_rank(rank, world).with_seed(9).with_workers(2)
}

/// The ids of each batch, checked against the batch's sources, rows and second column.
fn ids(batches: impl Iterator<Item = Result<tessera_loader::HostBatch, LoaderError>>) -> Vec<Vec<i64>> {
    checked(batches, true)
}

/// As [`ids`]; `rows_are_ids` when no row was deleted (a batch's rows are live rows).
fn checked(
    batches: impl Iterator<Item = Result<tessera_loader::HostBatch, LoaderError>>,
    rows_are_ids: bool,
) -> Vec<Vec<i64>> {
    batches
        .map(|b| {
            let b = b.unwrap();
            let ids: Vec<i64> =
                common::bytes(&b, 0).chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
            let v: Vec<f32> =
                common::bytes(&b, 1).chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
            assert_eq!(b.sources.len(), ids.len());
            for (j, &id) in ids.iter().enumerate() {
                assert_eq!(id / 1_000_000, i64::from(b.sources[j]), "source reported");
                if rows_are_ids {
                    assert_eq!(id % 1_000_000, b.rows[j] as i64, "row reported");
                }
                assert_eq!((v[2 * j], v[2 * j + 1]), (id as f32, -(id as f32)));
            }
            ids
        })
        .collect()
}

/// Global batches of an epoch read on `world` ranks (each rank's slices, in rank order).
fn global(mix: &Mixture, global_batch: usize, world: usize, epoch: u64, state: Option<&LoaderState>) -> Vec<Vec<i64>> {
    let per_rank: Vec<Vec<Vec<i64>>> = (0..world)
        .map(|r| {
            let loader = Loader::open(config(mix.clone(), global_batch / world, r, world)).unwrap();
            match state {
                Some(s) => ids(loader.resume(s).unwrap()),
                None => ids(loader.epoch(epoch).unwrap()),
            }
        })
        .collect();
    let n = per_rank[0].len();
    assert!(per_rank.iter().all(|b| b.len() == n), "every rank yields the same number of batches");
    (0..n).map(|i| per_rank.iter().flat_map(|b| b[i].clone()).collect()).collect()
}

#[test]
fn each_source_takes_its_share_of_an_epoch_in_every_batch() {
    let f = fixture();
    let mix = Mixture::weighted(sources(&f), &[0.5, 0.3, 0.2]);
    let loader = Loader::open(config(mix, 20, 0, 1)).unwrap();
    let order = loader.mixture_order().unwrap();
    // 100 + 40 + 30 positions per epoch, split 85 / 51 / 34.
    assert_eq!(order.epoch_len(0), 170);
    assert_eq!(order.epoch_counts(0), vec![85, 51, 34]);
    assert_eq!(loader.batches_per_epoch(), 9);
    for epoch in 0..2 {
        let batches = ids(loader.epoch(epoch).unwrap());
        let all: Vec<i64> = batches.concat();
        let real = &all[..170]; // the rest pads the last batch from the epoch's start
        let mut per: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        for &id in real {
            per.entry(id / 1_000_000).or_default().push(id % 1_000_000);
        }
        assert_eq!(per.values().map(Vec::len).collect::<Vec<_>>(), vec![85, 51, 34]);
        // The view source only yields the view's rows; the small source wraps whole epochs.
        assert!(per[&2].iter().all(|r| f.view.contains(&(*r as u64))));
        if epoch == 0 {
            let mut s1 = per[&1].clone();
            s1.sort_unstable();
            s1.dedup();
            assert_eq!(s1.len(), 40, "the first 51 samples of a 40-row source cover it");
        }
        // Every full batch of 20 carries the mix: 10 / 6 / 4, give or take 2.
        for b in &batches[..8] {
            let n0 = b.iter().filter(|&&id| id / 1_000_000 == 0).count();
            assert!((8..=12).contains(&n0), "batch share {n0}");
        }
    }
}

#[test]
fn ranks_split_a_mixture_into_disjoint_equal_shards_and_resume_on_any_world_size() {
    let f = fixture();
    let mix = Mixture::weighted(sources(&f), &[0.6, 0.25, 0.15]);
    let whole = global(&mix, 24, 1, 1, None);
    for world in [2, 3, 8] {
        assert_eq!(global(&mix, 24, world, 1, None), whole, "{world} ranks deliver the one-rank global batches");
    }
    // Stopped after k batches on one rank, resumed on 1, 2, 3 and 8 ranks.
    let loader = Loader::open(config(mix.clone(), 24, 0, 1)).unwrap();
    for k in [1usize, 3, 5] {
        let mut it = loader.epoch(1).unwrap();
        let head: Vec<_> = (&mut it).take(k).map(|b| b.unwrap().rows.len()).collect();
        assert_eq!(head.len(), k);
        let state = it.state();
        drop(it);
        for world in [1, 2, 3, 8] {
            let rest = global(&mix, 24, world, 1, Some(&state));
            assert_eq!(rest, whole[k..], "resume after {k} batches on {world} ranks");
        }
    }
}

#[test]
fn a_change_of_the_mix_at_a_resume_point_continues_and_replays() {
    let f = fixture();
    let before = Mixture::weighted(sources(&f), &[0.5, 0.5, 0.0]);
    let run = Loader::open(config(before.clone(), 16, 0, 1)).unwrap();
    let first_epoch = ids(run.epoch(0).unwrap());
    let mut it = run.epoch(1).unwrap();
    let head = ids((&mut it).take(3));
    let state = it.state();
    drop(it);
    assert!(head.concat().iter().all(|id| id / 1_000_000 < 2), "the view source takes nothing yet");

    // New weights from the resume point on, the view source joining; a larger epoch.
    let after =
        before.clone().change_at(&state, vec![Share::Weight(0.2), Share::Weight(0.2), Share::Weight(0.6)], Some(200));
    let resumed = Loader::open(config(after.clone(), 16, 0, 1)).unwrap();
    let tail = ids(resumed.resume(&state).unwrap());
    assert_eq!(tail.len(), 200usize.div_ceil(16) - 3);
    let joined = tail.concat().iter().filter(|id| *id / 1_000_000 == 2).count();
    assert!(joined > 80, "the view source now takes most samples ({joined})");

    // A replay under the new history reproduces every batch: the old epoch, the head, the tail.
    let replay = Loader::open(config(after.clone(), 16, 0, 1)).unwrap();
    assert_eq!(ids(replay.epoch(0).unwrap()), first_epoch);
    let again = ids(replay.epoch(1).unwrap());
    assert_eq!(again[..3], head[..]);
    assert_eq!(again[3..], tail[..]);
    // And on four ranks, from the same state.
    assert_eq!(global(&after, 16, 4, 1, Some(&state)), tail);

    // No stream loses or repeats a row across the change: source 0's samples over both
    // epochs are whole permutations of its 100 rows, back to back.
    // (Only the epochs' real positions: 140 and 200; the rest pads the last batch.)
    let s0: Vec<i64> = (first_epoch.concat()[..140].iter())
        .chain(&again.concat()[..200])
        .copied()
        .filter(|id| id / 1_000_000 == 0)
        .collect();
    for chunk in s0.chunks(100).filter(|c| c.len() == 100) {
        let mut c = chunk.to_vec();
        c.sort_unstable();
        c.dedup();
        assert_eq!(c.len(), 100);
    }

    // A state taken after the change belongs to the new history: the old one refuses it.
    let mut it = resumed.resume(&state).unwrap();
    it.next().unwrap().unwrap();
    let later = it.state();
    drop(it);
    assert!(matches!(run.resume(&later), Err(LoaderError::Resume(_))));
    assert!(resumed.resume(&later).is_ok());
}

#[test]
fn sources_must_share_the_batch_layout_and_the_order_kind() {
    let f = fixture();
    let other = f.roots[0].replace("s0", "odd");
    let schema =
        Schema::new([Column::new("id", DType::I32, &[]), Column::new("v", DType::F32, &[Dim::Fixed(2)])]).unwrap();
    let ds = Dataset::create(&other, schema, &WriteOptions::default()).unwrap();
    let batch = Batch::new()
        .with("id", ColumnData::from_scalars(&[1i32]))
        .unwrap()
        .with("v", ColumnData::from_fixed(&[2], &[0.0f32, 0.0]).unwrap())
        .unwrap();
    ds.append(&batch, "one", WriteOptions::default()).unwrap();
    let mix = Mixture::weighted([MixSource::new(&f.roots[0]), MixSource::new(&other)], &[1.0, 1.0]);
    let err = Loader::open(config(mix, 4, 0, 1)).unwrap_err().to_string();
    assert!(err.contains("\"id\"") && err.contains("i32"), "{err}");

    let mix = Mixture::weighted(sources(&f), &[1.0, 1.0, 1.0]);
    let block = config(mix.clone(), 4, 0, 1).with_shuffle(ShuffleMode::Block { window_fragments: 2 });
    assert!(matches!(Loader::open(block), Err(LoaderError::Config(_))));
    let none = Loader::open(config(Mixture::weighted(sources(&f), &[0.0, 0.0, 0.0]), 4, 0, 1));
    assert!(matches!(none, Err(LoaderError::Config(_))));
    // Sequential order reads each source front to back.
    let seq = Loader::open(
        config(Mixture::weighted(sources(&f)[..1].to_vec(), &[1.0]), 10, 0, 1).with_shuffle(ShuffleMode::None),
    )
    .unwrap();
    let got = ids(seq.epoch(0).unwrap()).concat();
    assert_eq!(got, (0..100).collect::<Vec<i64>>());
}

/// `fragments` one-file fragments of 4 rows, indexed by a fragment tree of small nodes, then
/// rows 1 and 6 deleted: ids `1_000_000 × source + row` of the rows that stay.
fn tree_dataset(root: &str, source: i64, fragments: i64) -> Vec<i64> {
    let opts = WriteOptions { index: tessera::IndexLayout::Tree { node_bytes: 700 }, ..WriteOptions::default() };
    let mut ds = Dataset::create(root, schema("id"), &opts).unwrap();
    for f in 0..fragments {
        let ids: Vec<i64> = (4 * f..4 * f + 4).map(|r| 1_000_000 * source + r).collect();
        ds = ds.append(&rows_of("id", &ids), "4 rows", opts.clone()).unwrap();
    }
    ds.delete_rows(&[1, 6], "two rows", &opts).unwrap();
    (0..4 * fragments).filter(|r| *r != 1 && *r != 6).map(|r| 1_000_000 * source + r).collect()
}

#[test]
fn sources_indexed_by_fragment_trees_are_found_lazily_and_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let roots: Vec<String> = (0..3).map(|i| dir.path().join(format!("t{i}")).to_str().unwrap().to_string()).collect();
    let mut want = tree_dataset(&roots[0], 0, 30);
    want.extend(tree_dataset(&roots[1], 1, 25));
    dataset(&roots[2], 2, 40); // a fragment log
    want.extend((0..40).map(|r| 2_000_000 + r));
    want.sort_unstable();
    // "Choose n" = each source's rows: every epoch reads every live row of each source once.
    let mix = Mixture::with_shares(
        roots.iter().map(MixSource::new),
        vec![Share::Samples(118), Share::Samples(98), Share::Samples(40)],
        None,
    );
    for (shuffle, world) in [(ShuffleMode::Global, 1), (ShuffleMode::None, 1), (ShuffleMode::Global, 4)] {
        for epoch in 0..2 {
            let got: Vec<i64> = (0..world)
                .flat_map(|r| {
                    let loader = Loader::open(config(mix.clone(), 8, r, world).with_shuffle(shuffle)).unwrap();
                    checked(loader.epoch(epoch).unwrap(), false).concat()
                })
                .collect();
            // The padding of the last global batch repeats the epoch's start.
            let mut real = got.clone();
            real.sort_unstable();
            real.dedup();
            assert_eq!(real, want, "{shuffle:?} on {world} ranks, epoch {epoch}");
            assert!(got.len() - want.len() < 8 * world, "only the last global batch pads");
        }
    }
}

/// One source per backend: local files, the S3 and the Azure test servers (`scripts/servers.sh`;
/// in CI a missing server fails, elsewhere the test is skipped). A batch's range requests go
/// to each sample's own store.
#[test]
fn sources_on_different_stores_are_read_in_one_batch() {
    use tessera_testkit::{Backend, TestRoot};
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local").to_str().unwrap().to_string();
    let Some(s3) = TestRoot::new(Backend::S3, "mixture-s3") else { return };
    let Some(azure) = TestRoot::new(Backend::Azure, "mixture-azure") else { return };
    dataset(&local, 0, 30);
    dataset(&s3.url, 1, 20);
    dataset(&azure.url, 2, 10);
    let mix = Mixture::with_shares(
        [MixSource::new(&local), MixSource::new(&s3.url), MixSource::new(&azure.url)],
        vec![Share::Samples(30), Share::Samples(20), Share::Samples(10)],
        None,
    );
    let loader = Loader::open(config(mix, 12, 0, 1)).unwrap();
    let mut got: Vec<i64> = ids(loader.epoch(0).unwrap()).concat();
    got.sort_unstable();
    let want: Vec<i64> = (0..30).chain((0..20).map(|r| 1_000_000 + r)).chain((0..10).map(|r| 2_000_000 + r)).collect();
    assert_eq!(got, want, "every row of every store once");
    let io = loader.io_stats();
    assert!(io.requests > 0 && io.bytes > 0, "the remote sources' traffic is counted: {io:?}");
}

#[test]
fn sources_map_their_columns_onto_the_batch_and_fill_what_they_lack() {
    use tessera_loader::Fill;
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    // A source storing the ids as "ident", and one without "v".
    let renamed = dir.path().join("renamed").to_str().unwrap().to_string();
    let ids: Vec<i64> = (0..12).map(|r| 3_000_000 + r).collect();
    Dataset::create(&renamed, schema("ident"), &WriteOptions::default())
        .unwrap()
        .append(&rows_of("ident", &ids), "12", WriteOptions::default())
        .unwrap();
    let bare = dir.path().join("bare").to_str().unwrap().to_string();
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let ids: Vec<i64> = (0..8).map(|r| 4_000_000 + r).collect();
    Dataset::create(&bare, schema, &WriteOptions::default())
        .unwrap()
        .append(&Batch::new().with("id", ColumnData::from_scalars(&ids)).unwrap(), "8", WriteOptions::default())
        .unwrap();
    let row: Vec<u8> = [7.5f32, -7.5].iter().flat_map(|x| x.to_le_bytes()).collect();
    let mix = |fill: Fill| {
        Mixture::with_shares(
            [
                MixSource::new(&f.roots[0]),
                MixSource::new(&renamed).rename("id", "ident"),
                MixSource::new(&bare).fill("v", fill),
            ],
            vec![Share::Samples(10), Share::Samples(12), Share::Samples(8)],
            None,
        )
    };
    for (fill, want) in [(Fill::Zeros, (0.0f32, 0.0f32)), (Fill::Row(row.clone()), (7.5, -7.5))] {
        let loader = Loader::open(config(mix(fill), 6, 0, 1)).unwrap();
        let mut seen = BTreeMap::new();
        for b in loader.epoch(0).unwrap() {
            let b = b.unwrap();
            let ids: Vec<i64> =
                common::bytes(&b, 0).chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
            let v: Vec<f32> =
                common::bytes(&b, 1).chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
            for (j, &id) in ids.iter().enumerate() {
                let got = (v[2 * j], v[2 * j + 1]);
                match b.sources[j] {
                    2 => assert_eq!(got, want, "the filled column"),
                    _ => assert_eq!(got, (id as f32, -(id as f32)), "a stored row"),
                }
                seen.insert(id, b.sources[j]);
            }
        }
        assert_eq!(seen.values().filter(|&&s| s == 1).count(), 12, "every renamed row");
        assert_eq!(seen.values().filter(|&&s| s == 2).count(), 8, "every filled row");
    }
    // Without a fill the source is refused, naming the way out; bad fills too.
    let refused = |m: Mixture| Loader::open(config(m, 6, 0, 1)).unwrap_err().to_string();
    let plain = Mixture::weighted([MixSource::new(&f.roots[0]), MixSource::new(&bare)], &[1.0, 1.0]);
    assert!(refused(plain).contains("MixSource::fill"));
    assert!(refused(mix(Fill::Null)).contains("nullable"));
    assert!(refused(mix(Fill::Row(vec![0; 3]))).contains("3 bytes"));
}
