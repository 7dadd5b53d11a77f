//! Augmentation inside the loader: outputs dense at the pipeline's shape and type, the
//! same bytes whatever the worker count, exact across a resume, new draws each epoch;
//! null rows zero; pipelines that cannot apply refused when the loader opens.

mod common;

use tessera::{Batch, Column, ColumnData, DType, Dataset, Dim, Schema, WriteOptions};
use tessera_loader::{
    ChannelOrder, Elem, HostLayout, Loader, LoaderConfig, LoaderError, ResizeTo, ShuffleMode, Transform,
};

/// Pixel `(y, x, c)` of row `r`'s image.
fn pixel(r: u64, y: u64, x: u64, c: u64) -> u8 {
    ((r * 31 + y * 7 + x * 3 + c * 50) % 251) as u8
}

/// Row `r`: an image of `(8 + r % 5) × (10 + r % 7) × 3`.
fn dims(r: u64) -> [u64; 3] {
    [8 + r % 5, 10 + r % 7, 3]
}

/// 40 rows in 4 fragments: a ragged RGB image (null every 9th row), a label and a clip.
fn dataset(root: &str) {
    let schema = Schema::new([
        Column::new("image", DType::U8, &[Dim::Ragged, Dim::Ragged, Dim::Fixed(3)]).nullable(),
        Column::new("label", DType::I64, &[]),
        Column::new("clip", DType::I16, &[Dim::Ragged]),
    ])
    .unwrap();
    let mut ds = Dataset::create(root, schema.clone(), &WriteOptions::default()).unwrap();
    for f in 0..4u64 {
        let mut image = ColumnData::for_column(&schema.columns[0]);
        let mut clip = ColumnData::for_column(&schema.columns[2]);
        let mut labels = Vec::new();
        for r in f * 10..(f + 1) * 10 {
            if r % 9 == 4 {
                image.push_null().unwrap();
            } else {
                let [h, w, c] = dims(r);
                let px: Vec<u8> =
                    (0..h).flat_map(|y| (0..w).flat_map(move |x| (0..c).map(move |k| pixel(r, y, x, k)))).collect();
                image.push_row(&[h, w, c], &px).unwrap();
            }
            let len = 5 + r % 13;
            let samples: Vec<u8> = (0..len).flat_map(|t| ((r * 100 + t) as i16).to_le_bytes()).collect();
            clip.push_row(&[len], &samples).unwrap();
            labels.push(r as i64);
        }
        let batch = Batch::new()
            .with("image", image)
            .unwrap()
            .with("label", ColumnData::from_scalars(&labels))
            .unwrap()
            .with("clip", clip)
            .unwrap();
        ds = ds.append(&batch, "10 rows", WriteOptions::default()).unwrap();
    }
}

fn augmenting(root: &str) -> LoaderConfig {
    LoaderConfig::new(root)
        .with_batch_size(6)
        .with_seed(11)
        .with_transform(
            "image",
            [
                Transform::random_resized_crop(5, 6),
                Transform::HorizontalFlip { p: 0.5 },
                Transform::imagenet_normalize(Elem::F16),
            ],
        )
        .with_transform("clip", [Transform::RandomTimeCrop { length: 8, stride: 2 }])
}

/// Every batch of an epoch as (rows, per-column bytes).
fn epoch_bytes(loader: &Loader, e: u64) -> Vec<(Vec<u64>, Vec<Vec<u8>>)> {
    loader
        .epoch(e)
        .unwrap()
        .map(|b| {
            let b = b.unwrap();
            (b.rows.clone(), (0..b.columns.len()).map(|c| common::bytes(&b, c)).collect())
        })
        .collect()
}

#[test]
fn batches_come_out_at_the_pipelines_shape_and_type() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    dataset(root);
    let loader = Loader::open(augmenting(root)).unwrap();
    let mut rows = 0;
    for b in loader.epoch(0).unwrap() {
        let b = b.unwrap();
        let n = b.rows.len() as i64;
        let image = &b.columns[0];
        assert_eq!((image.elem, image.shape.as_slice()), (Elem::F16, &[n, 3, 5, 6][..]));
        assert_eq!(image.byte_len, b.rows.len() * 3 * 5 * 6 * 2);
        assert_eq!(image.layout, HostLayout::Fixed);
        let valid = image.valid.as_ref().unwrap();
        let px = common::bytes(&b, 0);
        for (j, &row) in b.rows.iter().enumerate() {
            assert_eq!(valid[j], row % 9 != 4);
            let slot = &px[j * 180..(j + 1) * 180];
            if !valid[j] {
                assert!(slot.iter().all(|&v| v == 0), "null row {row}");
            }
        }
        // Untransformed columns are as stored.
        let labels: Vec<i64> =
            common::bytes(&b, 1).chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(labels, b.rows.iter().map(|&r| r as i64).collect::<Vec<_>>());
        // Clips: 8 samples, 2 apart, from a start inside the clip; zeros past its end.
        let clip = &b.columns[2];
        assert_eq!((clip.elem, clip.shape.as_slice()), (Elem::I16, &[n, 8][..]));
        let samples: Vec<i16> =
            common::bytes(&b, 2).chunks_exact(2).map(|c| i16::from_le_bytes([c[0], c[1]])).collect();
        for (j, &row) in b.rows.iter().enumerate() {
            let s = &samples[j * 8..(j + 1) * 8];
            let len = 5 + row % 13;
            let t0 = u64::try_from(s[0]).unwrap() - row * 100;
            for (k, &v) in s.iter().enumerate() {
                let t = t0 + 2 * k as u64;
                let want = if t < len { (row * 100 + t) as i16 } else { 0 };
                assert_eq!(v, want, "row {row}, sample {k}");
            }
        }
        rows += b.rows.len();
    }
    assert_eq!(rows, 42); // 40 rows, the last batch padded from the start
}

#[test]
fn a_deterministic_pipeline_crops_the_stored_pixels() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    dataset(root);
    let config = LoaderConfig::new(root)
        .with_columns(&["image"])
        .with_batch_size(8)
        .with_shuffle(ShuffleMode::None)
        .with_transform(
            "image",
            [Transform::CenterCrop { height: 6, width: 4 }, Transform::ToDtype { dtype: Elem::F32, scale: false }],
        );
    let loader = Loader::open(config).unwrap();
    for b in loader.epoch(0).unwrap() {
        let b = b.unwrap();
        let vals: Vec<f32> =
            common::bytes(&b, 0).chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        for (j, &r) in b.rows.iter().enumerate() {
            if r % 9 == 4 {
                continue;
            }
            let [h, w, _] = dims(r);
            // torchvision: top = round((h - 6) / 2), ties to even.
            let round = |d: u64| if d % 2 == 1 && (d / 2) % 2 == 1 { d / 2 + 1 } else { d / 2 };
            let (top, left) = (round(h - 6), round(w - 4));
            for y in 0..6 {
                for x in 0..4 {
                    for c in 0..3 {
                        let got = vals[j * 72 + ((y * 4 + x) * 3 + c) as usize];
                        // Exact: a u8 converts to f32 without rounding.
                        assert!(
                            got.to_bits() == f32::from(pixel(r, top + y, left + x, c)).to_bits(),
                            "row {r} ({y}, {x}, {c})"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn augmentations_do_not_depend_on_workers_and_resume_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    dataset(root);
    let reference = epoch_bytes(&Loader::open(augmenting(root).with_workers(1)).unwrap(), 2);
    for workers in [2, 4] {
        let other = epoch_bytes(&Loader::open(augmenting(root).with_workers(workers)).unwrap(), 2);
        assert!(other == reference, "{workers} workers differ");
    }
    // The next epoch: every row draws again.
    let next = epoch_bytes(&Loader::open(augmenting(root)).unwrap(), 3);
    let by_row = |e: &[(Vec<u64>, Vec<Vec<u8>>)], row: u64| {
        e.iter().find_map(|(rows, cols)| {
            rows.iter().position(|&r| r == row).map(|j| cols[0][j * 180..(j + 1) * 180].to_vec())
        })
    };
    let differing = (0..40).filter(|&r| r % 9 != 4 && by_row(&reference, r) != by_row(&next, r)).count();
    assert!(differing >= 30, "only {differing} rows got new draws in a new epoch");
    // Resume after 3 of 7 batches: the remaining batches are byte-identical.
    let loader = Loader::open(augmenting(root)).unwrap();
    let mut it = loader.epoch(2).unwrap();
    for _ in 0..3 {
        it.next().unwrap().unwrap();
    }
    let state = it.state();
    drop(it);
    let rest: Vec<(Vec<u64>, Vec<Vec<u8>>)> = loader
        .resume(&state)
        .unwrap()
        .map(|b| {
            let b = b.unwrap();
            (b.rows.clone(), (0..b.columns.len()).map(|c| common::bytes(&b, c)).collect())
        })
        .collect();
    assert!(rest == reference[3..], "resumed batches differ");
}

#[test]
fn pipelines_that_cannot_apply_are_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    dataset(root);
    let flip = || [Transform::HorizontalFlip { p: 0.5 }];
    let cases = [
        (LoaderConfig::new(root).with_transform("nope", flip()), "no such projected column"),
        (LoaderConfig::new(root).with_columns(&["label"]).with_transform("image", flip()), "no such projected column"),
        (LoaderConfig::new(root).with_transform("label", flip()), "rank 2"),
        (LoaderConfig::new(root).with_transform("image", flip()), "depends on the row"),
        (
            LoaderConfig::new(root).with_transform("image", [Transform::Resize(ResizeTo::ShorterSide(4))]),
            "depends on the row",
        ),
        (
            LoaderConfig::new(root).with_transform(
                "image",
                [Transform::Normalize { mean: vec![0.5], std: vec![0.5], dtype: Elem::I32, layout: ChannelOrder::Chw }],
            ),
            "f32, f16, bf16",
        ),
    ];
    for (config, want) in cases {
        match Loader::open(config) {
            Err(LoaderError::Config(m)) => assert!(m.contains(want), "{m}"),
            Err(e) => panic!("{want}: {e}"),
            Ok(_) => panic!("{want}: opened"),
        }
    }
}
