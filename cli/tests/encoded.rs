//! `tessera ingest --keep-encoded`: image files stored as they are (an encoded column), read
//! back as their decoded pixels; images that were converted are stored decoded; `tessera
//! info` shows the files' bytes against the decoded bytes.

mod common;

use common::*;
use tessera::{Codec, Compression, Dataset};

#[test]
fn keep_encoded_stores_the_files_and_reads_back_their_pixels() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("train");
    let files = image_folder(&root, &["cat", "dog"], 6);
    // A grey JPEG: --channels 3 converts it, so it cannot be kept and is stored decoded.
    let grey = image::GrayImage::from_fn(20, 16, |x, y| image::Luma([(x * 9 + y) as u8]));
    let mut grey_jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut grey_jpeg, 90).encode_image(&grey).unwrap();
    std::fs::write(root.join("dog").join("zz_grey.jpg"), &grey_jpeg).unwrap();
    let ds = dir.path().join("ds");
    let summary = json(&["ingest", s(&ds), s(&root), "--keep-encoded", "-m", "encoded"]);
    assert_eq!(summary["rows"], 13);

    let d = Dataset::open(s(&ds)).unwrap();
    assert_eq!(d.schema().column("image").unwrap().compression, Compression::Encoded);
    let rows = d.read_rows(0..13, None).unwrap();
    let img = rows.get("image").unwrap();
    let mut order: Vec<_> = files.iter().map(|(p, _)| p.clone()).collect();
    order.insert(12, root.join("dog").join("zz_grey.jpg"));
    for (i, path) in order.iter().enumerate() {
        let file = std::fs::read(path).unwrap();
        let want = image::load_from_memory(&file).unwrap().into_rgb8().into_raw();
        assert_eq!(img.row(i), &want[..], "{}", path.display());
        if i == 12 {
            assert_eq!(img.encoded(i), None, "the converted grey image is stored decoded");
        } else {
            let codec = img.encoded(i).map(|(c, _)| c);
            assert!(matches!(codec, Some(Codec::Jpeg | Codec::Png | Codec::WebP)), "{codec:?}");
            assert_eq!(img.encoded(i).unwrap().1, &file[..], "the file, byte for byte");
        }
    }
    assert_eq!(d.verify().unwrap().rows, 13);

    let info = json(&["info", s(&ds)]);
    let col = info["columns"].as_array().unwrap().iter().find(|c| c["name"] == "image").unwrap();
    assert_eq!(col["compression"]["codec"], "encoded");
    assert!(col["bytes_stored"].as_u64().unwrap() < col["bytes_raw"].as_u64().unwrap());
    assert!(ok(&["info", s(&ds)]).contains("encoded: stored = the image files, raw = their decoded pixels"));
}

#[test]
fn resized_images_are_stored_decoded_and_compress_names_encoded() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("train");
    image_folder(&root, &["a"], 3);
    let ds = dir.path().join("ds");
    json(&["ingest", s(&ds), s(&root), "--keep-encoded", "--size", "8", "-m", "resized"]);
    let d = Dataset::open(s(&ds)).unwrap();
    let rows = d.read_rows(0..3, None).unwrap();
    assert!((0..3).all(|i| rows.get("image").unwrap().encoded(i).is_none()));
    let ds2 = dir.path().join("ds2");
    json(&["ingest", s(&ds2), s(&root), "--compress", "image=encoded", "-m", "by name"]);
    let d2 = Dataset::open(s(&ds2)).unwrap();
    assert_eq!(d2.schema().column("image").unwrap().compression, Compression::Encoded);
    assert!(d2.read_rows(0..3, None).unwrap().get("image").unwrap().encoded(0).is_some());
}
