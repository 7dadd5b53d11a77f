//! `tessera ingest` that does not make users guess: shapes inferred from the first samples,
//! schema questions answered with exit 2 and the exact flag (never `--skip-bad`), nothing
//! left behind by a failed ingest, `--ragged` per dim, `--rename` and `--kind`.

mod common;

use common::*;
use tessera::{DType, Dataset, Dim, ImageLayout, Kind, Metric};

/// Little-endian bytes of i32 values.
fn i32s(v: impl IntoIterator<Item = i32>) -> Vec<u8> {
    v.into_iter().flat_map(i32::to_le_bytes).collect()
}

/// A WebDataset shard whose sample `i` has `tokens.npy` of `len(i)` i32 and a class label.
fn token_shard(path: &std::path::Path, n: usize, len: impl Fn(usize) -> usize) {
    let mut b = tar::Builder::new(Vec::new());
    let stem = path.file_stem().unwrap().to_str().unwrap();
    for i in 0..n {
        let l = len(i);
        let key = format!("{stem}-{i:06}");
        tar_add(&mut b, &format!("{key}.tokens.npy"), &npy("<i4", &[l], &i32s((0..l).map(|x| (x + i) as i32))));
        tar_add(&mut b, &format!("{key}.cls"), (i % 5).to_string().as_bytes());
    }
    std::fs::write(path, b.into_inner().unwrap()).unwrap();
}

#[test]
fn varying_npy_lengths_ingest_without_flags() {
    // The reported case: WebDataset shards of .npy members whose `tokens` length varies.
    let dir = tempfile::tempdir().unwrap();
    let shards = dir.path().join("shards");
    std::fs::create_dir_all(&shards).unwrap();
    token_shard(&shards.join("a.tar"), 6, |i| 130 + 7 * i);
    token_shard(&shards.join("b.tar"), 3, |_| 130);
    let ds = dir.path().join("ds");
    let out = json(&["ingest", s(&ds), s(&shards)]);
    assert_eq!(out["rows"], 9);
    let d = Dataset::open(s(&ds)).unwrap();
    let tokens = d.schema().column("tokens").unwrap();
    assert_eq!((tokens.dtype, tokens.shape.clone()), (DType::I32, vec![Dim::Ragged]));
    let rows = d.read_rows(0..9, Some(&["tokens"])).unwrap();
    let t = rows.get("tokens").unwrap();
    assert_eq!(t.row_shape(1), vec![137]);
    assert_eq!(t.row(1), i32s((0..137).map(|x| x + 1)).as_slice());
    assert_eq!(t.row_shape(8), vec![130]);
}

#[test]
fn a_late_shape_change_exits_2_with_the_flag_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // Past the samples inference looks at, and past the first batch the writer gets (so the
    // dataset was already created when the odd sample comes).
    for (n, odd) in [(300, 280), (1100, 1050)] {
        let shard = dir.path().join(format!("late-{n}.tar"));
        token_shard(&shard, n, |i| if i == odd { 9 } else { 4 });
        let ds = dir.path().join(format!("ds-{n}"));
        let (code, _, stderr) = fails(&["ingest", s(&ds), s(&shard)]);
        assert_eq!(code, 2, "a schema question, not a data fault: {stderr}");
        assert!(stderr.contains(&format!("{odd:06}")) && stderr.contains("[9]"), "names the sample: {stderr}");
        assert!(stderr.contains("--ragged tokens=?"), "names the exact flag: {stderr}");
        assert!(!stderr.contains("--skip-bad"), "never suggests dropping rows: {stderr}");
        assert!(!ds.exists(), "no dataset folder left behind ({n} samples): {stderr}");
        // --skip-bad does not drop it either.
        assert_eq!(fails(&["ingest", s(&ds), s(&shard), "--skip-bad"]).0, 2);
        assert!(!ds.exists());
        // The flag the message names works.
        let out = json(&["ingest", s(&ds), s(&shard), "--ragged", "tokens=?"]);
        assert_eq!(out["rows"], n);
    }

    // Appending: the dataset's shape cannot change; the existing dataset stays as it was.
    let fixed = dir.path().join("fixed.tar");
    token_shard(&fixed, 3, |_| 4);
    let ds = dir.path().join("append");
    ok(&["ingest", s(&ds), s(&fixed), "-q"]);
    let longer = dir.path().join("longer.tar");
    token_shard(&longer, 3, |_| 6);
    let (code, _, stderr) = fails(&["ingest", s(&ds), s(&longer)]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("the dataset has i32 [4]"), "{stderr}");
    assert_eq!(versions(&ds), 2);
}

#[test]
fn ragged_names_the_dims_that_vary() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("arrays");
    std::fs::create_dir_all(&src).unwrap();
    let img: Vec<u8> = (0..2 * 4 * 5 * 3).map(|x| x as u8).collect();
    std::fs::write(src.join("img.npy"), npy("|u1", &[2, 4, 5, 3], &img)).unwrap();
    std::fs::write(src.join("boxes.npy"), npy("<i4", &[2, 3, 4], &i32s(0..24))).unwrap();
    let ds = dir.path().join("ds");
    ok(&["ingest", s(&ds), s(&src), "-q", "--ragged", "img=?,?,3", "--ragged", "boxes=?,4"]);
    let d = Dataset::open(s(&ds)).unwrap();
    assert_eq!(d.schema().column("img").unwrap().shape, [Dim::Ragged, Dim::Ragged, Dim::Fixed(3)]);
    assert_eq!(d.schema().column("boxes").unwrap().shape, [Dim::Ragged, Dim::Fixed(4)]);
    let rows = d.read_rows(0..2, None).unwrap();
    assert_eq!(rows.get("img").unwrap().row(1), &img[60..]);
    assert_eq!(rows.get("boxes").unwrap().row(0), i32s(0..12).as_slice());

    // Comma-joined entries mean the same; a bare name makes every dim ragged.
    let ds = dir.path().join("ds2");
    ok(&["ingest", s(&ds), s(&src), "-q", "--ragged", "img=?,5,3,boxes"]);
    let d = Dataset::open(s(&ds)).unwrap();
    assert_eq!(d.schema().column("img").unwrap().shape, [Dim::Ragged, Dim::Fixed(5), Dim::Fixed(3)]);
    assert_eq!(d.schema().column("boxes").unwrap().shape, [Dim::Ragged, Dim::Ragged]);

    // A spec that does not fit the arrays is a schema question.
    for bad in ["img=?,?,4", "img=?,?", "img=?,x,3"] {
        let ds = dir.path().join("bad");
        let (code, _, stderr) = fails(&["ingest", s(&ds), s(&src), "--ragged", bad]);
        assert_eq!(code, 2, "{bad}: {stderr}");
        assert!(!ds.exists(), "{bad}");
    }
}

#[test]
fn rename_and_kind_on_the_way_in() {
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("s.tar");
    let mut tar = tar::Builder::new(Vec::new());
    let mut pixels = Vec::new();
    for i in 0..4usize {
        let (h, w) = (3 + i, 5);
        let pix: Vec<u8> = (0..h * w * 3).map(|x| (x * 7 + i) as u8).collect();
        tar_add(&mut tar, &format!("{i:04}.img.npy"), &npy("|u1", &[h, w, 3], &pix));
        let e: Vec<u8> = [i as f32, 1.0, 0.5].iter().flat_map(|f| f.to_le_bytes()).collect();
        tar_add(&mut tar, &format!("{i:04}.emb.npy"), &npy("<f4", &[3], &e));
        // Only some samples carry a note: the column becomes nullable.
        if i % 2 == 0 {
            tar_add(&mut tar, &format!("{i:04}.note.bin"), format!("note {i}").as_bytes());
        }
        pixels.push(pix);
    }
    std::fs::write(&shard, tar.into_inner().unwrap()).unwrap();
    let ds = dir.path().join("ds");
    ok(&[
        "ingest",
        s(&ds),
        s(&shard),
        "-q",
        "--rename",
        "img=image,emb=embedding",
        "--kind",
        "image=image",
        "--kind",
        "embedding=embedding:cosine,note=text",
    ]);
    let d = Dataset::open(s(&ds)).unwrap();
    let names: Vec<&str> = d.schema().columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["image", "embedding", "note"]);
    let image = d.schema().column("image").unwrap();
    assert_eq!(image.kind, Kind::Image { layout: ImageLayout::Hwc });
    assert_eq!(image.shape, [Dim::Ragged, Dim::Fixed(5), Dim::Fixed(3)]);
    let emb = d.schema().column("embedding").unwrap();
    assert_eq!(
        (emb.kind.clone(), emb.shape.clone()),
        (Kind::Embedding { metric: Metric::Cosine }, vec![Dim::Fixed(3)])
    );
    let note = d.schema().column("note").unwrap();
    assert_eq!((note.dtype, note.kind.clone(), note.nullable), (DType::Utf8, Kind::Text, true));
    let rows = d.read_rows(0..4, None).unwrap();
    assert_eq!(rows.get("image").unwrap().row(3), pixels[3].as_slice());
    assert_eq!(rows.get("note").unwrap().str_row(2), Some("note 2"));
    assert!(!rows.get("note").unwrap().is_valid(1));

    // Names that match nothing, and unknown kinds, are usage errors naming them.
    let ds = dir.path().join("bad");
    for (args, needle) in [
        (["--rename", "picture=image", "--kind", "img=image"], "picture"),
        (["--rename", "img=image", "--kind", "img=image"], "kinds use the new names"),
        (["--rename", "img=image", "--kind", "image=photo"], "photo"),
    ] {
        let mut a = vec!["ingest", s(&ds), s(&shard)];
        a.extend(args);
        let (code, _, stderr) = fails(&a);
        assert!(code == 2 && stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!ds.exists());
    }

    // Planned sources (NumPy files) rename too; --ragged uses the new name.
    let src = dir.path().join("arrays");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("emb.npy"), npy("<i4", &[2, 2], &i32s(0..4))).unwrap();
    let ds = dir.path().join("planned");
    ok(&["ingest", s(&ds), s(&src), "-q", "--rename", "emb=ids", "--ragged", "ids", "--kind", "ids=tokens"]);
    let d = Dataset::open(s(&ds)).unwrap();
    let ids = d.schema().column("ids").unwrap();
    assert_eq!((ids.shape.clone(), ids.kind.clone()), (vec![Dim::Ragged], Kind::Tokens { vocab_size: None }));
}
