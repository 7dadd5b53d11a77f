//! `tessera ingest` from image folders, WebDataset shards, NumPy files and JSON Lines, and
//! its handling of corrupt inputs.

mod common;

use common::*;
use tessera::{Compression, DType, Dataset, Dim, ImageLayout, Kind};

#[test]
fn image_folder_native_shape_matches_independent_decode() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("train");
    let files = image_folder(&root, &["dog", "cat", "bird"], 4);
    std::fs::write(root.join("cat").join("notes.txt"), "not an image").unwrap();
    let ds = dir.path().join("ds");
    let summary = json(&["ingest", s(&ds), s(&root), "--keep-original", "-m", "first"]);
    assert_eq!(summary["rows"], 12);
    assert_eq!(summary["images"], 12);
    assert_eq!(summary["created"], true);
    assert_eq!(summary["ignored_files"], 1);
    assert!(summary["bytes_stored"].as_u64().unwrap() > 0);

    let d = Dataset::open(s(&ds)).unwrap();
    assert_eq!(d.row_count(), 12);
    let image = d.schema().column("image").unwrap();
    assert_eq!(image.dtype, DType::U8);
    assert_eq!(image.shape, vec![Dim::Ragged, Dim::Ragged, Dim::Fixed(3)]);
    assert_eq!(image.kind, Kind::Image { layout: ImageLayout::Hwc });
    assert_eq!(image.compression, Compression::None);
    let label = d.schema().column("label").unwrap();
    assert_eq!(label.dtype, DType::I64);
    assert_eq!(label.kind, Kind::ClassLabel { names: vec!["bird".into(), "cat".into(), "dog".into()] });
    assert_eq!(d.schema().column("image_original").unwrap().dtype, DType::Bytes);

    let rows = d.read_rows(0..12, None).unwrap();
    let (img, lab, enc) = (rows.get("image").unwrap(), rows.get("label").unwrap(), rows.get("image_original").unwrap());
    let labels = lab.to_vec::<i64>().unwrap();
    for (i, (path, class)) in files.iter().enumerate() {
        let bytes = std::fs::read(path).unwrap();
        // PNG and WebP (lossless): the original pixels; JPEG: exactly what the image crate
        // decodes from the same file.
        let want = image::load_from_memory(&bytes).unwrap().to_rgb8();
        if path.extension().unwrap() != "jpg" {
            let seed = *class as u32 * 100 + (i % 4) as u32;
            assert_eq!(want, picture(want.width(), want.height(), seed), "lossless {path:?}");
        }
        assert_eq!(img.row_shape(i), vec![u64::from(want.height()), u64::from(want.width()), 3], "{path:?}");
        assert_eq!(img.row(i), want.as_raw().as_slice(), "pixels of {path:?}");
        assert_eq!(labels[i], *class as i64);
        assert_eq!(enc.row(i), bytes.as_slice());
    }
}

#[test]
fn image_folder_resized_and_appended() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("train");
    image_folder(&root, &["a", "b", "c"], 2);
    let ds = dir.path().join("ds");
    ok(&["ingest", "-d", s(&ds), s(&root), "--size", "8", "-q", "--compress", "image=zstd:5,label=lz4"]);
    let d = Dataset::open(s(&ds)).unwrap();
    let image = d.schema().column("image").unwrap();
    assert_eq!(image.shape, vec![Dim::Fixed(8), Dim::Fixed(8), Dim::Fixed(3)]);
    assert_eq!(image.compression, Compression::Zstd { level: 5 });
    assert_eq!(d.schema().column("label").unwrap().compression, Compression::Lz4);
    assert_eq!((d.version(), d.row_count()), (2, 6));

    // Appending a folder with a subset of the classes maps labels by name.
    let more = dir.path().join("more");
    image_folder(&more, &["c"], 2);
    let out = json(&["ingest", s(&ds), s(&more), "--size", "8"]);
    assert_eq!((out["version"].as_u64(), out["created"].as_bool()), (Some(3), Some(false)));
    let d = Dataset::open(s(&ds)).unwrap();
    let labels = d.read_rows(6..8, Some(&["label"])).unwrap().get("label").unwrap().to_vec::<i64>().unwrap();
    assert_eq!(labels, vec![2, 2]);

    // A class the dataset does not know is a usage error; so is a different image size.
    let other = dir.path().join("other");
    image_folder(&other, &["zebra"], 1);
    assert_eq!(fails(&["ingest", s(&ds), s(&other), "--size", "8"]).0, 2);
    assert_eq!(fails(&["ingest", s(&ds), s(&more), "--size", "9"]).0, 2);
    let (code, _, stderr) = fails(&["ingest", s(&ds), s(&more)]);
    assert!(code == 2 && stderr.contains("--size"), "{stderr}");
    assert_eq!(versions(&ds), 3);
}

#[test]
fn corrupt_jpeg_stops_the_ingest_or_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("train");
    image_folder(&root, &["a", "b"], 2);
    let ds = dir.path().join("ds");
    ok(&["ingest", s(&ds), s(&root), "-q"]);
    assert_eq!(versions(&ds), 2);

    let bad_root = dir.path().join("more");
    image_folder(&bad_root, &["a", "b"], 2);
    let good = jpeg_bytes(&picture(16, 16, 1));
    let mut corrupt = good[..24].to_vec();
    corrupt.extend(std::iter::repeat_n(0u8, 200));
    let bad = bad_root.join("b").join("broken.jpg");
    std::fs::write(&bad, corrupt).unwrap();

    let (code, _, stderr) = fails(&["ingest", s(&ds), s(&bad_root), "-q"]);
    assert_eq!(code, 1);
    assert!(stderr.contains(s(&bad)), "stderr names the file: {stderr}");
    assert!(stderr.contains("no version was committed"), "{stderr}");
    assert_eq!(versions(&ds), 2, "no new version");

    let out = json(&["ingest", s(&ds), s(&bad_root), "--skip-bad"]);
    assert_eq!(out["rows"], 4);
    assert_eq!(out["skipped"].as_array().unwrap().len(), 1);
    assert_eq!(out["skipped"][0]["input"], s(&bad));
    let text = ok(&["ingest", s(&ds), s(&bad_root), "--skip-bad", "-q"]);
    assert!(text.contains("skipped 1 bad inputs") && text.contains(s(&bad)), "{text}");
    assert_eq!(versions(&ds), 4);
}

fn wds_sample(b: &mut tar::Builder<Vec<u8>>, key: &str, i: u32) -> image::RgbImage {
    let img = picture(9 + i, 7, i);
    if i.is_multiple_of(2) {
        tar_add(b, &format!("{key}.png"), &png_bytes(&img));
    } else {
        tar_add(b, &format!("{key}.jpg"), &jpeg_bytes(&img));
    }
    tar_add(b, &format!("{key}.cls"), format!("{}\n", i % 3).as_bytes());
    tar_add(b, &format!("{key}.txt"), format!("caption {i} ü").as_bytes());
    tar_add(b, &format!("{key}.json"), format!("{{\"i\": {i}}}").as_bytes());
    let v: Vec<u8> = [i as f32, 0.5].iter().flat_map(|f| f.to_le_bytes()).collect();
    tar_add(b, &format!("{key}.emb.npy"), &npy("<f4", &[2], &v));
    img
}

#[test]
fn webdataset_shards_decode_by_extension() {
    let dir = tempfile::tempdir().unwrap();
    let shards = dir.path().join("shards");
    std::fs::create_dir_all(&shards).unwrap();
    let mut images = Vec::new();
    for shard in 0..2 {
        let mut b = tar::Builder::new(Vec::new());
        for i in 0..3 {
            let n = shard * 3 + i;
            images.push(wds_sample(&mut b, &format!("sub/{n:06}"), n));
        }
        std::fs::write(shards.join(format!("shard-{shard}.tar")), b.into_inner().unwrap()).unwrap();
    }
    let ds = dir.path().join("ds");
    let out = json(&["ingest", s(&ds), s(&shards), "--keep-original"]);
    assert_eq!(out["rows"], 6);
    let d = Dataset::open(s(&ds)).unwrap();
    let names: Vec<&str> = d.schema().columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["image", "image_original", "label", "text", "json", "emb"]);
    let col = |n: &str| d.schema().column(n).unwrap().clone();
    assert_eq!(col("text").kind, Kind::Text);
    assert_eq!(col("json").kind, Kind::Json);
    assert_eq!((col("label").dtype, col("emb").dtype), (DType::I64, DType::F32));
    assert_eq!(col("emb").shape, vec![Dim::Fixed(2)]);
    let rows = d.read_rows(0..6, None).unwrap();
    for (i, img) in images.iter().enumerate() {
        let enc = rows.get("image_original").unwrap().row(i);
        let want = image::load_from_memory(enc).unwrap().to_rgb8();
        if i % 2 == 0 {
            assert_eq!(&want, img, "PNG is lossless");
        }
        assert_eq!(rows.get("image").unwrap().row(i), want.as_raw().as_slice());
        assert_eq!(rows.get("text").unwrap().str_row(i), Some(format!("caption {i} ü").as_str()));
        assert_eq!(rows.get("json").unwrap().str_row(i), Some(format!("{{\"i\": {i}}}").as_str()));
    }
    assert_eq!(rows.get("label").unwrap().to_vec::<i64>().unwrap(), vec![0, 1, 2, 0, 1, 2]);
    assert_eq!(rows.get("emb").unwrap().to_vec::<f32>().unwrap()[..4], [0.0, 0.5, 1.0, 0.5]);
}

#[test]
fn webdataset_duplicate_and_misordered_keys_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    // A key that comes back after another key.
    let mut b = tar::Builder::new(Vec::new());
    wds_sample(&mut b, "k0", 0);
    wds_sample(&mut b, "k1", 1);
    tar_add(&mut b, "k0.extra.txt", b"late");
    let misordered = dir.path().join("misordered.tar");
    std::fs::write(&misordered, b.into_inner().unwrap()).unwrap();
    let (code, _, stderr) = fails(&["ingest", s(&ds), s(&misordered), "-q"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("k0") && stderr.contains("appears again"), "{stderr}");

    // A field twice in one sample.
    let mut b = tar::Builder::new(Vec::new());
    wds_sample(&mut b, "k0", 0);
    tar_add(&mut b, "k0.cls", b"2");
    wds_sample(&mut b, "k1", 1);
    let dup = dir.path().join("dup.tar");
    std::fs::write(&dup, b.into_inner().unwrap()).unwrap();
    let (code, _, stderr) = fails(&["ingest", s(&ds), s(&dup), "-q"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("appears twice"), "{stderr}");
    // Reported, never merged: with --skip-bad the broken sample is dropped.
    let out = json(&["ingest", s(&ds), s(&dup), "--skip-bad"]);
    assert_eq!(out["rows"], 1);
    assert!(out["skipped"][0]["input"].as_str().unwrap().ends_with("dup.tar:k0"));
}

#[test]
fn numpy_arrays_become_columns() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("arrays");
    std::fs::create_dir_all(&src).unwrap();
    let x: Vec<f32> = (0..15).map(|i| i as f32 * 0.25).collect();
    let xb: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(src.join("x.npy"), npy("<f4", &[5, 3], &xb)).unwrap();
    let y: Vec<i64> = vec![-2, -1, 0, 1, i64::MAX];
    std::fs::write(src.join("y.npy"), npy("<i8", &[5], &y.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>()))
        .unwrap();
    let z: Vec<u8> = (0..30).collect();
    std::fs::write(src.join("z.npy"), npy("|u1", &[5, 2, 3], &z)).unwrap();
    let big_endian: Vec<u8> = (0..5i32).flat_map(|v| (v * 1000).to_be_bytes()).collect();
    std::fs::write(src.join("be.npy"), npy(">i4", &[5], &big_endian)).unwrap();
    // An .npz with a deflated member.
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("w.npy", opts).unwrap();
    let small: Vec<u8> = (0..5i16).flat_map(|v| (v - 2).to_le_bytes()).collect();
    std::io::Write::write_all(&mut zip, &npy("<i2", &[5], &small)).unwrap();
    std::fs::write(src.join("more.npz"), zip.finish().unwrap().into_inner()).unwrap();

    let ds = dir.path().join("ds");
    let out = json(&["ingest", s(&ds), s(&src)]);
    assert_eq!(out["rows"], 5);
    let d = Dataset::open(s(&ds)).unwrap();
    let col = |n: &str| d.schema().column(n).unwrap().clone();
    assert_eq!((col("x").dtype, col("x").shape.clone()), (DType::F32, vec![Dim::Fixed(3)]));
    assert_eq!((col("y").dtype, col("y").shape.clone()), (DType::I64, vec![]));
    assert_eq!((col("z").dtype, col("z").shape.clone()), (DType::U8, vec![Dim::Fixed(2), Dim::Fixed(3)]));
    let rows = d.read_rows(0..5, None).unwrap();
    assert_eq!(rows.get("x").unwrap().to_vec::<f32>().unwrap(), x);
    assert_eq!(rows.get("y").unwrap().to_vec::<i64>().unwrap(), y);
    assert_eq!(rows.get("z").unwrap().values(), z.as_slice());
    assert_eq!(rows.get("z").unwrap().row(1), &z[6..12]);
    assert_eq!(rows.get("be").unwrap().to_vec::<i32>().unwrap(), vec![0, 1000, 2000, 3000, 4000]);
    assert_eq!(rows.get("w").unwrap().to_vec::<i16>().unwrap(), vec![-2, -1, 0, 1, 2]);

    // Mismatched row counts and truncated files are data faults.
    let bad = dir.path().join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("a.npy"), npy("|u1", &[3], &[1, 2, 3])).unwrap();
    std::fs::write(bad.join("b.npy"), npy("|u1", &[4], &[1, 2, 3, 4])).unwrap();
    assert_eq!(fails(&["ingest", s(&dir.path().join("ds2")), s(&bad)]).0, 1);
    let trunc = dir.path().join("t.npy");
    std::fs::write(&trunc, &npy("<f4", &[4], &[0; 16])[..70]).unwrap();
    let (code, _, stderr) = fails(&["ingest", s(&dir.path().join("ds3")), s(&trunc)]);
    assert_eq!(code, 1);
    assert!(stderr.contains("t.npy"), "{stderr}");
}

#[test]
fn json_lines_infer_types_and_nulls() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("rows.jsonl");
    std::fs::write(
        &src,
        concat!(
            "{\"id\": 1, \"score\": 0.5, \"ok\": true, \"text\": \"a\", \"meta\": {\"k\": [1, 2]}, \"opt\": null}\n",
            "{\"id\": 2, \"score\": 1, \"ok\": false, \"text\": \"b\", \"meta\": [], \"opt\": 7}\n",
            "\n",
            "{\"id\": 3, \"score\": -2.25, \"ok\": true, \"text\": \"ü\", \"meta\": {}}\n",
        ),
    )
    .unwrap();
    let ds = dir.path().join("ds");
    assert_eq!(json(&["ingest", s(&ds), s(&src)])["rows"], 3);
    let d = Dataset::open(s(&ds)).unwrap();
    let col = |n: &str| d.schema().column(n).unwrap().clone();
    assert_eq!((col("id").dtype, col("id").nullable), (DType::I64, false));
    assert_eq!(col("score").dtype, DType::F64);
    assert_eq!(col("ok").dtype, DType::Bool);
    assert_eq!((col("text").dtype, col("text").kind), (DType::Utf8, Kind::Text));
    assert_eq!(col("meta").kind, Kind::Json);
    assert_eq!((col("opt").dtype, col("opt").nullable), (DType::I64, true));
    let rows = d.read_rows(0..3, None).unwrap();
    assert_eq!(rows.get("id").unwrap().to_vec::<i64>().unwrap(), vec![1, 2, 3]);
    assert_eq!(rows.get("score").unwrap().to_vec::<f64>().unwrap(), vec![0.5, 1.0, -2.25]);
    assert_eq!(rows.get("ok").unwrap().to_vec::<bool>().unwrap(), vec![true, false, true]);
    assert_eq!(rows.get("text").unwrap().str_row(2), Some("ü"));
    assert_eq!(rows.get("meta").unwrap().str_row(0), Some("{\"k\":[1,2]}"));
    let opt = rows.get("opt").unwrap();
    assert_eq!((opt.is_valid(0), opt.is_valid(1), opt.is_valid(2)), (false, true, false));

    // A type change is a bad line, with its file and line number.
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"id\": 1}\n{\"id\": \"two\"}\n").unwrap();
    let (code, _, stderr) = fails(&["ingest", s(&dir.path().join("ds2")), s(&bad)]);
    assert_eq!(code, 1);
    assert!(stderr.contains("bad.jsonl:2"), "{stderr}");
}
