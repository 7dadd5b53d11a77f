//! The loader over encoded image columns (SPEC.md §"Encoded image columns"): every sample's
//! pixels equal an independent decode of the stored file (the `image` crate), in every shuffle
//! mode, with ragged images padded like other ragged columns; shards are disjoint; resume is
//! exact; and a bad image is skipped and reported, never half-decoded into a batch.

mod common;

use std::collections::BTreeSet;
use std::io::Cursor;

use tessera::{Batch, Column, ColumnData, Compression, DType, Dataset, Dim, ImageLayout, Kind, Schema, WriteOptions};
use tessera_loader::{HostBatch, Loader, LoaderConfig, ShuffleMode};

const ROWS: usize = 30;
const SIDE: u32 = 24;

/// Row `r`'s file for the fixed `img` column: a q90 JPEG, or a PNG for every fifth row.
fn img_file(r: usize) -> Vec<u8> {
    let r = r as u32;
    let img = image::RgbImage::from_fn(SIDE, SIDE, |x, y| {
        image::Rgb([(x * 7 + r * 13) as u8, (y * 11) as u8, (x * y + r) as u8])
    });
    let mut out = Vec::new();
    if r.is_multiple_of(5) {
        img.write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png).unwrap();
    } else {
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90).encode_image(&img).unwrap();
    }
    out
}

/// Row `r`'s file for the ragged `var` column: a JPEG of `(8 + r % 5) × (6 + r % 7)`.
fn var_file(r: usize) -> Vec<u8> {
    let (w, h) = (6 + (r % 7) as u32, 8 + (r % 5) as u32);
    let img = image::RgbImage::from_fn(w, h, |x, y| image::Rgb([(x * 30) as u8, (y * 20) as u8, (r * 8) as u8]));
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90).encode_image(&img).unwrap();
    out
}

/// An independent decode: `[h, w, 3]` and the pixels.
fn decode(file: &[u8]) -> (usize, usize, Vec<u8>) {
    let img = image::load_from_memory(file).unwrap().into_rgb8();
    (img.height() as usize, img.width() as usize, img.into_raw())
}

fn image_col(name: &str, shape: &[Dim]) -> Column {
    Column::new(name, DType::U8, shape)
        .with_kind(Kind::Image { layout: ImageLayout::Hwc })
        .with_compression(Compression::Encoded)
}

/// `ROWS` rows in three fragments; `id = r`.
fn dataset(root: &str) -> Dataset {
    let fixed = [Dim::Fixed(u64::from(SIDE)), Dim::Fixed(u64::from(SIDE)), Dim::Fixed(3)];
    let ragged = [Dim::Ragged, Dim::Ragged, Dim::Fixed(3)];
    let schema =
        Schema::new([Column::new("id", DType::I64, &[]), image_col("img", &fixed), image_col("var", &ragged)]).unwrap();
    let mut ds = Dataset::create(root, schema, &WriteOptions::default()).unwrap();
    for part in 0..3 {
        let rows = part * 10..(part + 1) * 10;
        let mut img = ColumnData::empty(DType::U8, &fixed, false);
        let mut var = ColumnData::empty(DType::U8, &ragged, false);
        for r in rows.clone() {
            img.push_encoded(&img_file(r)).unwrap();
            var.push_encoded(&var_file(r)).unwrap();
        }
        let ids: Vec<i64> = rows.map(|r| r as i64).collect();
        let batch = Batch::new()
            .with("id", ColumnData::from_scalars(&ids))
            .unwrap()
            .with("img", img)
            .unwrap()
            .with("var", var)
            .unwrap();
        ds = ds.append(&batch, "ten images", WriteOptions::default()).unwrap();
    }
    ds
}

/// Checks every sample of a batch against the independent decode; returns the ids.
fn check_batch(batch: &HostBatch) -> Vec<i64> {
    let ids: Vec<i64> =
        common::bytes(batch, 0).chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
    let img = common::bytes(batch, 1);
    let slot = (SIDE * SIDE * 3) as usize;
    let var = common::bytes(batch, 2);
    let vcol = &batch.columns[2];
    let (max_h, max_w) = (vcol.shape[1] as usize, vcol.shape[2] as usize);
    let lengths = vcol.layout.lengths().unwrap();
    for (j, &id) in ids.iter().enumerate() {
        let r = usize::try_from(id).unwrap();
        assert_eq!(img[j * slot..(j + 1) * slot], decode(&img_file(r)).2[..], "img of row {r}");
        let (h, w, px) = decode(&var_file(r));
        assert_eq!((lengths[2 * j], lengths[2 * j + 1]), (h as i64, w as i64), "var lengths of row {r}");
        let base = j * max_h * max_w * 3;
        for y in 0..max_h {
            let got = &var[base + y * max_w * 3..base + (y + 1) * max_w * 3];
            if y < h {
                assert_eq!(got[..w * 3], px[y * w * 3..(y + 1) * w * 3], "var row {r}, line {y}");
                assert!(got[w * 3..].iter().all(|&b| b == 0), "padding of row {r}, line {y}");
            } else {
                assert!(got.iter().all(|&b| b == 0), "padding of row {r}, line {y}");
            }
        }
    }
    ids
}

fn config(root: &str, shuffle: ShuffleMode) -> LoaderConfig {
    LoaderConfig::new(root).with_batch_size(4).with_shuffle(shuffle).with_seed(7).with_workers(2)
}

#[test]
fn every_sample_is_the_decoded_file_in_every_shuffle_mode() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    dataset(root);
    for shuffle in [ShuffleMode::None, ShuffleMode::Global, ShuffleMode::Block { window_fragments: 2 }] {
        let mut cfg = config(root, shuffle);
        cfg.drop_last = true;
        let loader = Loader::open(cfg).unwrap();
        let seen: Vec<i64> = loader.epoch(0).unwrap().flat_map(|b| check_batch(&b.unwrap())).collect();
        assert_eq!(seen.len(), ROWS / 4 * 4, "{shuffle:?}");
        assert_eq!(seen.iter().collect::<BTreeSet<_>>().len(), seen.len(), "{shuffle:?}: no row twice");
    }
}

#[test]
fn shards_are_disjoint_and_resume_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    dataset(root);
    let mut union = BTreeSet::new();
    for rank in 0..2 {
        let loader = Loader::open(config(root, ShuffleMode::Global).with_rank(rank, 2)).unwrap();
        for b in loader.epoch(1).unwrap() {
            let b = b.unwrap();
            // Padding rows of the last batch repeat earlier ones; the real rows are new.
            for id in check_batch(&b).into_iter().take(b.rows.len()) {
                union.insert(id);
            }
        }
    }
    assert_eq!(union.len(), ROWS);
    let loader = Loader::open(config(root, ShuffleMode::Global)).unwrap();
    let all: Vec<Vec<i64>> = loader.epoch(2).unwrap().map(|b| check_batch(&b.unwrap())).collect();
    let mut it = loader.epoch(2).unwrap();
    it.next().unwrap().unwrap();
    it.next().unwrap().unwrap();
    let state = it.state();
    drop(it);
    let rest: Vec<Vec<i64>> = loader.resume(&state).unwrap().map(|b| check_batch(&b.unwrap())).collect();
    assert_eq!(rest, all[2..]);
}

#[test]
fn a_bad_image_is_skipped_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    dataset(root);
    // Row 3's JPEG, in place, now says it is 8 pixels high: its header no longer matches the
    // row's shape [CMP-07]. With checksums off, only the decoder's check can catch it.
    let file = img_file(3);
    let sof = file.windows(2).position(|w| w == [0xff, 0xc0]).unwrap() + 5;
    let mut patched = false;
    for entry in std::fs::read_dir(dir.path().join("data")).unwrap() {
        let path = entry.unwrap().path();
        let mut data = std::fs::read(&path).unwrap();
        if let Some(at) = data.windows(file.len()).position(|w| w == file.as_slice()) {
            data[at + sof..at + sof + 2].copy_from_slice(&8u16.to_be_bytes());
            std::fs::write(&path, data).unwrap();
            patched = true;
        }
    }
    assert!(patched);
    let mut cfg = config(root, ShuffleMode::None).with_columns(&["id", "img"]);
    cfg.verify_checksums = false;
    let strict = Loader::open(cfg.clone()).unwrap();
    assert!(strict.epoch(0).unwrap().any(|b| b.is_err()), "without skip_bad_samples the batch fails");
    cfg.skip_bad_samples = true;
    let loader = Loader::open(cfg).unwrap();
    let mut ids = Vec::new();
    for b in loader.epoch(0).unwrap() {
        let b = b.unwrap();
        let len = (SIDE * SIDE * 3) as usize;
        let img = common::bytes(&b, 1);
        for (j, id) in
            common::bytes(&b, 0).chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).enumerate()
        {
            assert_eq!(img[j * len..(j + 1) * len], decode(&img_file(id as usize)).2[..], "row {id}");
            ids.push(id);
        }
    }
    assert!(!ids.contains(&3), "the bad row is replaced");
    let skipped = loader.skipped();
    assert_eq!(skipped.iter().map(|s| s.row).collect::<Vec<_>>(), [3]);
    assert!(skipped[0].error.contains("row's shape"), "{}", skipped[0].error);
}
