//! Tables in and out: Parquet and Arrow IPC ingest (the Hugging Face datasets layout with
//! encoded images and class names), `export --format parquet`, and the round trip
//! ingest → export → ingest giving the same canonical dump. Inputs are written here with
//! arrow-rs, the way `datasets` lays them out.

mod common;

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Decimal128Array, FixedSizeListArray, Float32Array, Int16Array,
    Int64Array, ListArray, RecordBatch, StringArray, StructArray, UInt8Array,
};
use arrow::datatypes::{DataType, Field, Fields, Int32Type, Schema};
use common::*;
use tessera::{DType, Dataset, Dim, ImageLayout, Kind};

/// The pictures of the test table.
fn pictures() -> Vec<image::RgbImage> {
    (0..6).map(|i| picture(5 + i, 4 + 2 * (i % 2), i)).collect()
}

/// A Hugging Face style table: `image` {bytes: PNG, path}, `label` `ClassLabel`, `caption`
/// with a null, `emb` list<f32> of one length, `tokens` list<i32> of varying lengths,
/// `pair` fixed-size list<i16>, `flag` bool, `small` u8.
fn hf_batch(corrupt_row: Option<usize>) -> RecordBatch {
    let pngs: Vec<Option<Vec<u8>>> = pictures()
        .iter()
        .enumerate()
        .map(|(i, p)| Some(if Some(i) == corrupt_row { b"\x89PNG not really".to_vec() } else { png_bytes(p) }))
        .collect();
    let image_fields =
        Fields::from(vec![Field::new("bytes", DataType::Binary, true), Field::new("path", DataType::Utf8, true)]);
    let paths: ArrayRef = Arc::new((0..6).map(|i| Some(format!("img{i}.png"))).collect::<StringArray>());
    let image = StructArray::new(image_fields, vec![Arc::new(pngs.into_iter().collect::<BinaryArray>()), paths], None);
    let label = Int64Array::from(vec![0, 2, 1, 1, 0, 2]);
    let caption = StringArray::from(vec![Some("a cat"), Some("ü"), None, Some(""), Some("dog"), Some("x")]);
    let emb = ListArray::from_iter_primitive::<arrow::datatypes::Float32Type, _, _>(
        (0..6).map(|i| Some(vec![Some(i as f32), Some(0.5), Some(-1.0)])),
    );
    let tokens =
        ListArray::from_iter_primitive::<Int32Type, _, _>((0..6).map(|i| Some((0..i).map(move |t| Some(t * 10 + i)))));
    let pair = FixedSizeListArray::new(
        Arc::new(Field::new("item", DataType::Int16, true)),
        2,
        Arc::new(Int16Array::from((0..12).collect::<Vec<i16>>())),
        None,
    );
    let flag = BooleanArray::from(vec![true, false, true, true, false, false]);
    let small = UInt8Array::from(vec![1, 2, 3, 4, 5, 255]);
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("image", Arc::new(image)),
        ("label", Arc::new(label)),
        ("caption", Arc::new(caption)),
        ("emb", Arc::new(emb)),
        ("tokens", Arc::new(tokens)),
        ("pair", Arc::new(pair)),
        ("flag", Arc::new(flag)),
        ("small", Arc::new(small)),
    ];
    let fields: Vec<Field> =
        columns.iter().map(|(n, a)| Field::new(*n, a.data_type().clone(), *n == "caption")).collect();
    let features = r#"{"info": {"features": {"image": {"_type": "Image"}, "label": {"names": ["cat", "dog", "bird"], "_type": "ClassLabel"}, "caption": {"dtype": "string", "_type": "Value"}}}}"#;
    let schema = Schema::new(fields).with_metadata([("huggingface".to_string(), features.to_string())].into());
    RecordBatch::try_new(Arc::new(schema), columns.into_iter().map(|(_, a)| a).collect()).unwrap()
}

fn write_parquet(path: &Path, batch: &RecordBatch) {
    let mut w =
        parquet::arrow::ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), None).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
}

#[test]
fn hugging_face_parquet_decodes_images_and_class_names() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("hf");
    std::fs::create_dir_all(&src).unwrap();
    write_parquet(&src.join("train-00000-of-00001.parquet"), &hf_batch(None));
    let ds = dir.path().join("ds");
    let out = json(&["ingest", s(&ds), s(&src)]);
    assert_eq!(
        (out["rows"].as_u64(), out["images"].as_u64(), out["format"].as_str()),
        (Some(6), Some(6), Some("parquet"))
    );
    let d = Dataset::open(s(&ds)).unwrap();
    let col = |n: &str| d.schema().column(n).unwrap().clone();
    assert_eq!(col("image").kind, Kind::Image { layout: ImageLayout::Hwc });
    assert_eq!(col("image").shape, [Dim::Ragged, Dim::Ragged, Dim::Fixed(3)]);
    assert_eq!(col("label").kind, Kind::ClassLabel { names: vec!["cat".into(), "dog".into(), "bird".into()] });
    assert_eq!((col("caption").dtype, col("caption").nullable), (DType::Utf8, true));
    assert_eq!((col("emb").dtype, col("emb").shape), (DType::F32, vec![Dim::Fixed(3)]));
    assert_eq!((col("tokens").dtype, col("tokens").shape), (DType::I32, vec![Dim::Ragged]));
    assert_eq!((col("pair").dtype, col("pair").shape), (DType::I16, vec![Dim::Fixed(2)]));
    assert_eq!((col("flag").dtype, col("small").dtype), (DType::Bool, DType::U8));
    let rows = d.read_rows(0..6, None).unwrap();
    for (i, p) in pictures().iter().enumerate() {
        assert_eq!(rows.get("image").unwrap().row(i), p.as_raw().as_slice(), "PNG pixels of row {i}");
        assert_eq!(rows.get("image").unwrap().row_shape(i), vec![u64::from(p.height()), u64::from(p.width()), 3]);
    }
    assert_eq!(rows.get("label").unwrap().to_vec::<i64>().unwrap(), vec![0, 2, 1, 1, 0, 2]);
    assert_eq!(rows.get("caption").unwrap().str_row(1), Some("ü"));
    assert!(!rows.get("caption").unwrap().is_valid(2));
    let tokens = rows.get("tokens").unwrap();
    assert_eq!(tokens.row_shape(0), vec![0]);
    assert_eq!(tokens.row(3), [3i32, 13, 23].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>());
    assert_eq!(rows.get("pair").unwrap().to_vec::<i16>().unwrap(), (0..12).collect::<Vec<i16>>());
    assert_eq!(rows.get("small").unwrap().values(), [1, 2, 3, 4, 5, 255]);
    assert_eq!(rows.get("flag").unwrap().to_vec::<bool>().unwrap(), [true, false, true, true, false, false]);
}

#[test]
fn parquet_round_trip_gives_the_same_dump() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("in.parquet");
    write_parquet(&src, &hf_batch(None));
    let first = dir.path().join("first");
    ok(&["ingest", s(&first), s(&src), "-q", "--kind", "emb=embedding"]);
    let out = dir.path().join("out");
    let exported = json(&["export", s(&first), "-o", s(&out), "--format", "parquet"]);
    assert_eq!(exported["files"], serde_json::json!(["data.parquet"]));
    let second = dir.path().join("second");
    ok(&["ingest", s(&second), s(&out), "-q"]);
    assert_eq!(digest(&first), digest(&second), "ingest -> export -> ingest keeps schema and values");

    // The sidecar follows --rename: the renamed column keeps its exported schema.
    let renamed = dir.path().join("renamed");
    ok(&["ingest", s(&renamed), s(&out), "-q", "--rename", "label=class"]);
    let d = Dataset::open(s(&renamed)).unwrap();
    assert!(d.schema().column("label").is_none());
    assert_eq!(
        d.schema().column("class").unwrap().kind,
        Dataset::open(s(&first)).unwrap().schema().column("label").unwrap().kind
    );
    assert_eq!(d.schema().column("emb").unwrap().kind, Kind::Embedding { metric: tessera::Metric::Unspecified });

    // The exported file is an ordinary Hugging Face table: without the sidecar, the images,
    // class names and tensors still come back (only tessera's kinds beyond those are lost).
    std::fs::remove_file(out.join("tessera.schema.json")).unwrap();
    let third = dir.path().join("third");
    ok(&["ingest", s(&third), s(&out), "-q"]);
    let (a, b) = (Dataset::open(s(&first)).unwrap(), Dataset::open(s(&third)).unwrap());
    for name in ["image", "label", "caption", "tokens", "pair", "flag", "small"] {
        assert_eq!(a.schema().column(name), b.schema().column(name), "{name}");
    }
    assert_eq!(digest(&first).1, digest(&third).1, "the same values");
}

/// Issue 27: one Arrow bridge, bf16 as Float32. Export widens every bf16 bit pattern
/// (signalling NaN, -0, subnormals, ±∞, the largest finite) exactly, other tools read the
/// numbers, and ingest with the sidecar narrows them back bit for bit.
#[test]
fn bf16_exports_as_float32_and_comes_back_exact() {
    use tessera::{Batch, Column, ColumnData, Schema, WriteOptions};

    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first");
    let bits: [u16; 8] = [0x7f81, 0xffc1, 0x8000, 0x0001, 0x7f80, 0xff80, 0x7f7f, 0x3fc0];
    let schema = Schema::new([
        Column::new("s", DType::Bf16, &[]).nullable(),
        Column::new("v", DType::Bf16, &[Dim::Fixed(4)]),
        Column::new("r", DType::Bf16, &[Dim::Ragged]),
    ])
    .unwrap();
    let ds = Dataset::create(s(&first), schema, &WriteOptions::default()).unwrap();
    let le = |b: &[u16]| b.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let values = bits.map(half::bf16::from_bits);
    let mut scalars = ColumnData::empty(DType::Bf16, &[], true);
    scalars.push_row(&[], &le(&bits[..1])).unwrap();
    scalars.push_null().unwrap();
    let vectors = ColumnData::from_fixed(&[4], &values).unwrap();
    let ragged = ColumnData::from_sequences(&[&values[..5], &values[7..]]);
    let batch = Batch::new().with("s", scalars).unwrap().with("v", vectors).unwrap().with("r", ragged).unwrap();
    ds.append(&batch, "bf16 edge values", WriteOptions::default()).unwrap();

    let out = dir.path().join("out");
    ok(&["export", s(&first), "-o", s(&out), "--format", "parquet"]);
    let file = std::fs::File::open(out.join("data.parquet")).unwrap();
    let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let features = builder.schema().metadata()["huggingface"].clone();
    let mut reader = builder.build().unwrap();
    let rb = reader.next().unwrap().unwrap();
    assert_eq!(rb.column(0).data_type(), &DataType::Float32, "bf16 is Float32 in the file");
    let widened = rb.column(0).as_any().downcast_ref::<Float32Array>().unwrap();
    assert_eq!(widened.value(0).to_bits(), u32::from(bits[0]) << 16);
    assert!(widened.is_null(1));
    assert!(features.contains(r#""dtype":"float32""#), "{features}");

    let second = dir.path().join("second");
    ok(&["ingest", s(&second), s(&out), "-q"]);
    assert_eq!(digest(&first), digest(&second), "ingest -> export -> ingest keeps every bit");
    let back = Dataset::open(s(&second)).unwrap();
    assert_eq!(back.schema().column("v").unwrap().dtype, DType::Bf16);
    assert_eq!(back.read_rows(0..1, Some(&["v"])).unwrap().get("v").unwrap().values(), le(&bits[..4]));
}

#[test]
fn arrow_ipc_files_and_streams_ingest() {
    let dir = tempfile::tempdir().unwrap();
    let batch = hf_batch(None);
    let file = dir.path().join("t.arrow");
    let mut w =
        arrow::ipc::writer::FileWriter::try_new(std::fs::File::create(&file).unwrap(), &batch.schema()).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
    let stream = dir.path().join("s.arrows");
    let mut w =
        arrow::ipc::writer::StreamWriter::try_new(std::fs::File::create(&stream).unwrap(), &batch.schema()).unwrap();
    w.write(&batch).unwrap();
    w.write(&batch.slice(0, 2)).unwrap();
    w.finish().unwrap();
    let a = dir.path().join("a");
    assert_eq!(json(&["ingest", s(&a), s(&file)])["rows"], 6);
    let b = dir.path().join("b");
    assert_eq!(json(&["ingest", s(&b), s(&stream)])["rows"], 8);
    let d = Dataset::open(s(&b)).unwrap();
    let rows = d.read_rows(6..8, Some(&["image", "label"])).unwrap();
    assert_eq!(rows.get("image").unwrap().row(1), pictures()[1].as_raw().as_slice());
    assert_eq!(rows.get("label").unwrap().to_vec::<i64>().unwrap(), vec![0, 2]);
}

#[test]
fn bad_tables_fail_with_the_row_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // An image that does not decode: a data fault naming the file and row; --skip-bad skips it.
    let src = dir.path().join("bad.parquet");
    write_parquet(&src, &hf_batch(Some(4)));
    let ds = dir.path().join("ds");
    let (code, _, stderr) = fails(&["ingest", s(&ds), s(&src)]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("bad.parquet:4") && stderr.contains("\"image\""), "{stderr}");
    assert!(!ds.exists(), "{stderr}");
    let out = json(&["ingest", s(&ds), s(&src), "--skip-bad"]);
    assert_eq!(out["rows"], 5);
    assert!(out["skipped"][0]["input"].as_str().unwrap().ends_with("bad.parquet:4"));

    // A truncated file: a data fault, nothing left behind.
    let good = dir.path().join("good.parquet");
    write_parquet(&good, &hf_batch(None));
    let bytes = std::fs::read(&good).unwrap();
    let cut = dir.path().join("cut.parquet");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let ds2 = dir.path().join("ds2");
    let (code, _, stderr) = fails(&["ingest", s(&ds2), s(&cut)]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("cut.parquet") && !ds2.exists(), "{stderr}");

    // A column type ingest does not map: a schema question (exit 2) naming the column.
    let dec = Decimal128Array::from(vec![1, 2]).with_precision_and_scale(10, 2).unwrap();
    let schema = Schema::new(vec![Field::new("price", dec.data_type().clone(), false)]);
    let batch = RecordBatch::try_new(Arc::new(schema), vec![Arc::new(dec)]).unwrap();
    let dec_file = dir.path().join("dec.parquet");
    write_parquet(&dec_file, &batch);
    let (code, _, stderr) = fails(&["ingest", s(&dir.path().join("ds3")), s(&dec_file)]);
    assert!(code == 2 && stderr.contains("price"), "{stderr}");

    // Files of different schemas in one ingest: a schema question too.
    let other = dir.path().join("mixed");
    std::fs::create_dir_all(&other).unwrap();
    write_parquet(&other.join("a.parquet"), &hf_batch(None));
    let f32s = Float32Array::from(vec![1.0]);
    let schema = Schema::new(vec![Field::new("x", DataType::Float32, false)]);
    write_parquet(&other.join("b.parquet"), &RecordBatch::try_new(Arc::new(schema), vec![Arc::new(f32s)]).unwrap());
    assert_eq!(fails(&["ingest", s(&dir.path().join("ds4")), s(&other)]).0, 2);
}

#[test]
fn hugging_face_audio_structs_decode_to_the_samples() {
    let dir = tempfile::tempdir().unwrap();
    let clips: Vec<Vec<i16>> = (0..3).map(|i| (0..100 + 50 * i).map(|t| (t * 37 - 900 * i) as i16).collect()).collect();
    let fields =
        Fields::from(vec![Field::new("bytes", DataType::Binary, true), Field::new("path", DataType::Utf8, true)]);
    let bytes: BinaryArray = clips.iter().map(|c| Some(wav(16_000, c))).collect();
    let paths: StringArray = (0..3).map(|i| Some(format!("clip{i}.wav"))).collect();
    let audio = StructArray::new(fields, vec![Arc::new(bytes), Arc::new(paths)], None);
    let features = r#"{"info": {"features": {"speech": {"sampling_rate": 16000, "_type": "Audio"}}}}"#;
    let schema = Schema::new(vec![Field::new("speech", audio.data_type().clone(), false)])
        .with_metadata([("huggingface".to_string(), features.to_string())].into());
    let src = dir.path().join("speech.parquet");
    write_parquet(&src, &RecordBatch::try_new(Arc::new(schema), vec![Arc::new(audio)]).unwrap());
    let ds = dir.path().join("ds");
    ok(&["ingest", s(&ds), s(&src), "-q", "--audio-dtype", "i16"]);
    let d = Dataset::open(s(&ds)).unwrap();
    let col = d.schema().column("speech").unwrap();
    assert_eq!((col.dtype, &col.kind), (DType::I16, &Kind::Audio { sample_rate: 16_000 }));
    let rows = d.read_rows(0..3, None).unwrap();
    for (i, clip) in clips.iter().enumerate() {
        let got = rows.get("speech").unwrap().row(i);
        assert_eq!(got, clip.iter().flat_map(|s| s.to_le_bytes()).collect::<Vec<u8>>().as_slice(), "clip {i}");
    }
}
