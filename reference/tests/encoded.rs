//! Encoded image columns end to end (SPEC.md §"Encoded image columns"): files in, pixels out,
//! the file kept byte for byte, the reader flag set, and hostile files refused with a class.

use std::io::Cursor;

use tessera::manifest::READER_FLAG_ENCODED_IMAGES;
use tessera::*;

/// A `w × h` RGB JPEG of smooth content at quality `q`.
fn jpeg(w: u32, h: u32, q: u8, seed: u32) -> Vec<u8> {
    let img =
        image::RgbImage::from_fn(w, h, |x, y| image::Rgb([(x * 9 + seed) as u8, (y * 5) as u8, ((x + y) * 3) as u8]));
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, q).encode_image(&img).unwrap();
    out
}

fn png_grey(w: u32, h: u32) -> Vec<u8> {
    let img = image::GrayImage::from_fn(w, h, |x, y| image::Luma([(x * 31 + y * 7) as u8]));
    let mut out = Vec::new();
    img.write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png).unwrap();
    out
}

/// Pixels as an independent decoder (`image`) sees them.
fn pixels(file: &[u8]) -> Vec<u8> {
    image::load_from_memory(file).unwrap().into_bytes()
}

fn image_col(name: &str, shape: &[Dim], layout: ImageLayout) -> Column {
    Column::new(name, DType::U8, shape).with_kind(Kind::Image { layout }).with_compression(Compression::Encoded)
}

#[test]
fn encoded_columns_store_the_files_and_read_back_pixels() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().to_str().unwrap();
    let schema = Schema::new([
        image_col("img", &[Dim::Fixed(16), Dim::Fixed(24), Dim::Fixed(3)], ImageLayout::Hwc),
        image_col("grey", &[Dim::Ragged, Dim::Ragged], ImageLayout::Hw).nullable(),
    ])
    .unwrap();
    let ds = Dataset::create(loc, schema, &WriteOptions::default()).unwrap();
    assert_eq!(ds.manifest().reader_flags, READER_FLAG_ENCODED_IMAGES);
    let files: Vec<Vec<u8>> = (0..5).map(|i| jpeg(24, 16, 90, i * 17)).collect();
    let mut img = ColumnData::empty(DType::U8, &[Dim::Fixed(16), Dim::Fixed(24), Dim::Fixed(3)], false);
    let mut grey = ColumnData::empty(DType::U8, &[Dim::Ragged, Dim::Ragged], true);
    for (i, f) in files.iter().enumerate() {
        img.push_encoded(f).unwrap();
        if i == 2 {
            grey.push_null().unwrap();
        } else {
            grey.push_encoded(&png_grey(3 + i as u32, 2 + i as u32)).unwrap();
        }
    }
    // A file of another shape is refused at the writer, before anything is written [CMP-09].
    assert_eq!(img.push_encoded(&jpeg(16, 16, 90, 0)).unwrap_err().class(), ErrorClass::Usage);
    assert_eq!(img.len(), 5);
    let batch = Batch::new().with("img", img).unwrap().with("grey", grey).unwrap();
    let v2 = ds.append(&batch, "images", WriteOptions::default()).unwrap();
    let back = Dataset::open(loc).unwrap();
    let rows = back.read_rows(0..5, None).unwrap();
    let img = rows.get("img").unwrap();
    for (i, f) in files.iter().enumerate() {
        assert_eq!(img.row(i), &pixels(f)[..], "row {i}");
        // The stored form is the file, byte for byte [CMP-06].
        assert_eq!(img.encoded(i), Some((Codec::Jpeg, f.as_slice())));
    }
    let grey = rows.get("grey").unwrap();
    assert_eq!(grey.row_shape(4), vec![6, 7]);
    assert_eq!(grey.row(4), &pixels(&png_grey(7, 6))[..]);
    assert!(!grey.is_valid(2));
    // The image pages really are the files: the data file is far smaller than the pixels.
    let stored: u64 = v2.fragments().iter().flat_map(|f| &f.fragment.files).map(|f| f.size).sum();
    assert!(stored < 5 * 16 * 24 * 3, "{stored} bytes stored");
    assert_eq!(back.verify().unwrap().rows, 5);
}

#[test]
fn a_manifest_without_the_flag_is_invalid() {
    let schema = Schema::new([image_col("img", &[Dim::Ragged, Dim::Ragged, Dim::Fixed(3)], ImageLayout::Hwc)]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ds = Dataset::create(dir.path().to_str().unwrap(), schema, &WriteOptions::default()).unwrap();
    let mut m = ds.manifest().clone();
    m.validate("main", 1, "m").unwrap();
    m.reader_flags = 0;
    assert_eq!(m.validate("main", 1, "m").unwrap_err().class(), ErrorClass::Invalid);
}

#[test]
fn only_u8_image_columns_can_be_encoded() {
    let bad = [
        Column::new("a", DType::F32, &[Dim::Fixed(2), Dim::Fixed(2), Dim::Fixed(3)])
            .with_kind(Kind::Image { layout: ImageLayout::Hwc }),
        Column::new("b", DType::U8, &[Dim::Fixed(3), Dim::Fixed(2), Dim::Fixed(2)])
            .with_kind(Kind::Image { layout: ImageLayout::Chw }),
        Column::new("c", DType::U8, &[Dim::Fixed(2), Dim::Fixed(2), Dim::Ragged])
            .with_kind(Kind::Image { layout: ImageLayout::Hwc }),
        Column::new("d", DType::U8, &[Dim::Ragged]),
    ];
    for c in bad {
        let c = c.with_compression(Compression::Encoded);
        assert_eq!(c.validate().unwrap_err().class(), ErrorClass::Invalid, "{}", c.name);
    }
}

#[test]
fn corrupt_and_truncated_files_are_malformed() {
    let file = jpeg(16, 16, 90, 3);
    let shape = [16, 16, 3];
    let mut out = vec![0u8; 16 * 16 * 3];
    let w = || "t".to_string();
    image_codec::decode_into(Codec::Jpeg, &file, &shape, &mut out, &w).unwrap();
    assert_eq!(out, pixels(&file));
    let cut = &file[..file.len() / 2];
    let e = image_codec::decode_into(Codec::Jpeg, cut, &shape, &mut out, &w).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Malformed, "{e}");
    // A JPEG whose header declares another shape than the row: invalid, before any decoding.
    let e = image_codec::decode_into(Codec::Jpeg, &file, &[16, 16, 1], &mut out[..256], &w).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Invalid, "{e}");
}
