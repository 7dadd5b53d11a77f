//! The valid cases: datasets a reader must accept, each read to its canonical dump.

// Each function below is a flat list of case definitions, one `em.valid` call per case;
// splitting them would scatter related cases without making any of them clearer.
#![allow(clippy::too_many_lines)]

use std::path::Path;

use tessera::Dim::{Fixed, Ragged};
use tessera::{
    BBoxFormat, Codec, Column, ColumnData, Compression, DType, Dataset, Dim, ImageLayout, Kind, Metric, Schema,
    WriteOptions,
};

use super::data::{Row, batch, column, create, dense, le, random_batch, random_column, random_rows};
use super::emit::{Emitter, Spec};
use super::mutate::{Ds, FileLoc, RefUpdate, fix_envelope_crc, fix_header_crc};
use super::options::Clock;
use super::prng::Prng;
use super::{Result, bail};
use crate::case::Args;

/// Writes every valid case.
pub(crate) fn all(em: &mut Emitter) -> Result<()> {
    dtypes(em)?;
    shapes(em)?;
    codecs(em)?;
    layouts(em)?;
    versions(em)?;
    kinds(em)?;
    schemas(em)?;
    multimodal(em)?;
    reading(em)?;
    super::reject::views::valid(em)?;
    super::reject::tree::valid(em)?;
    Ok(())
}

/// Creates a dataset with `schema` and appends `batch` as version 2.
fn one_commit(input: &Path, schema: Schema, batch: &tessera::Batch, opts: WriteOptions) -> Result<Dataset> {
    let mut clock = Clock::new();
    let ds = create(input, schema, &mut clock)?;
    Ok(ds.append(batch, "fixture rows", clock.next(opts))?)
}

/// As [`one_commit`] with random rows for every column.
fn random_commit(input: &Path, schema: Schema, seed: u64, rows: usize, max_ragged: u64) -> Result<Dataset> {
    let mut rng = Prng::new(seed);
    let b = random_batch(&mut rng, &schema, rows, max_ragged)?;
    one_commit(input, schema, &b, WriteOptions::default())
}

/// The fixed-size dtypes (all but utf8 and bytes).
fn fixed_dtypes() -> impl Iterator<Item = DType> {
    DType::ALL.into_iter().filter(|d| !d.is_variable())
}

fn dtypes(em: &mut Emitter) -> Result<()> {
    em.valid(
        Spec::new(
            "v-dtype-0001-all-scalar-dtypes",
            &["DT-01", "DUMP-09", "ENC-01"],
            "one rank-0 column of each of the 15 dtypes, 7 rows of seeded random values",
        ),
        |input| {
            let cols = DType::ALL.iter().map(|d| Column::new(format!("c_{}", d.name()), *d, &[]));
            random_commit(input, Schema::new(cols)?, 1, 7, 6).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-dtype-0002-fixed-vectors-every-dtype",
            &["DT-01", "SHP-01", "DUMP-09"],
            "one column of shape [3] for each fixed-size dtype, 4 rows",
        ),
        |input| {
            let cols = fixed_dtypes().map(|d| Column::new(format!("v_{}", d.name()), d, &[Fixed(3)]));
            random_commit(input, Schema::new(cols)?, 2, 4, 0).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-dtype-0003-float-special-values",
            &["DT-01", "DUMP-09", "DT-03"],
            "f16, bf16, f32 and f64 columns holding +0, -0, ±inf, quiet and signalling NaNs with payloads, the \
             smallest subnormal, the largest finite value and 1.0; every bit pattern must survive",
        ),
        |input| {
            let f16: [u16; 9] = [0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7d01, 0x0001, 0x7bff, 0x3c00];
            let bf16: [u16; 9] = [0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0x0001, 0x7f7f, 0x3f80];
            let f32s: [u32; 9] =
                [0, 0x8000_0000, 0x7f80_0000, 0xff80_0000, 0x7fc0_0000, 0x7f80_0001, 1, 0x7f7f_ffff, 0x3f80_0000];
            let f64s: [u64; 9] = [
                0,
                0x8000_0000_0000_0000,
                0x7ff0_0000_0000_0000,
                0xfff0_0000_0000_0000,
                0x7ff8_0000_0000_0000,
                0x7ff0_0000_0000_0001,
                1,
                0x7fef_ffff_ffff_ffff,
                0x3ff0_0000_0000_0000,
            ];
            let bits16 = |d: DType, v: &[u16]| dense(d, &[], v.iter().map(|x| Row::raw(&[], le(&[*x]))).collect());
            let schema = Schema::new([
                Column::new("f16", DType::F16, &[]),
                Column::new("bf16", DType::Bf16, &[]),
                Column::new("f32", DType::F32, &[]),
                Column::new("f64", DType::F64, &[]),
            ])?;
            let b = batch(vec![
                ("f16", bits16(DType::F16, &f16)?),
                ("bf16", bits16(DType::Bf16, &bf16)?),
                ("f32", ColumnData::from_scalars(&f32s.map(f32::from_bits))),
                ("f64", ColumnData::from_scalars(&f64s.map(f64::from_bits))),
            ])?;
            one_commit(input, schema, &b, WriteOptions::default()).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-dtype-0004-utf8-and-bytes",
            &["DT-01", "DT-05", "DT-04"],
            "utf8 rows with empty, multi-byte, combining, emoji, control and NUL characters; bytes rows with \
             empty, zero and high bytes",
        ),
        |input| {
            let texts = ["", "a", "héllo", "日本語テキスト", "🙂👍🏽", "cafe\u{301}", "tab\tnew\nline", "nul\0byte"];
            let blobs: [&[u8]; 8] = [b"", b"\0", b"\xff\x00\xff", b"abc", b"\x80", &[0u8; 9], b"\xc3\x28", b"z"];
            let schema = Schema::new([Column::new("text", DType::Utf8, &[]), Column::new("blob", DType::Bytes, &[])])?;
            let b = batch(vec![
                ("text", ColumnData::from_strings(&texts)),
                ("blob", ColumnData::from_byte_strings(&blobs)),
            ])?;
            one_commit(input, schema, &b, WriteOptions::default()).map(drop)
        },
    )?;
    em.valid(
        Spec::new("v-dtype-0005-bool-values", &["DT-02"], "bool columns of rank 0 and of shape [2, 3], 0 and 1 bytes"),
        |input| {
            let schema = Schema::new([
                Column::new("flag", DType::Bool, &[]),
                Column::new("grid", DType::Bool, &[Fixed(2), Fixed(3)]),
            ])?;
            random_commit(input, schema, 5, 9, 0).map(drop)
        },
    )?;
    Ok(())
}

fn shapes(em: &mut Emitter) -> Result<()> {
    em.valid(
        Spec::new(
            "v-shape-0001-fixed-multidim",
            &["SHP-01", "SHP-05"],
            "fixed shapes [2, 3, 4] (u16), [1, 5] (f32) and [2, 2, 2, 2] (i8), 3 rows",
        ),
        |input| {
            let schema = Schema::new([
                Column::new("cube", DType::U16, &[Fixed(2), Fixed(3), Fixed(4)]),
                Column::new("row", DType::F32, &[Fixed(1), Fixed(5)]),
                Column::new("tesseract", DType::I8, &[Fixed(2), Fixed(2), Fixed(2), Fixed(2)]),
            ])?;
            random_commit(input, schema, 11, 3, 0).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-shape-0002-ragged-one-dim",
            &["SHP-01", "SHP-02", "DF-17"],
            "one ragged dim: i32 [?], f64 [?] and u8 [?, 3]; lengths 0 to 5",
        ),
        |input| {
            let schema = Schema::new([
                Column::new("seq", DType::I32, &[Ragged]),
                Column::new("series", DType::F64, &[Ragged]),
                Column::new("points", DType::U8, &[Ragged, Fixed(3)]),
            ])?;
            random_commit(input, schema, 12, 6, 5).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-shape-0003-ragged-two-dims",
            &["SHP-01", "SHP-02", "DF-17"],
            "two ragged dims: f32 [?, ?] and u16 [2, ?, ?]; the shapes block holds two sizes per row",
        ),
        |input| {
            let schema = Schema::new([
                Column::new("matrix", DType::F32, &[Ragged, Ragged]),
                Column::new("stack", DType::U16, &[Fixed(2), Ragged, Ragged]),
            ])?;
            random_commit(input, schema, 13, 5, 3).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-shape-0004-zero-length-rows",
            &["SHP-02", "SHP-04", "CMP-04"],
            "rows of length 0 among others (i64 [?], utf8, bytes, f32 [?, 2]) and a column whose every row is \
             empty, so its page has 0 raw bytes",
        ),
        |input| {
            let schema = Schema::new([
                Column::new("some_empty", DType::I64, &[Ragged]),
                Column::new("text", DType::Utf8, &[]),
                Column::new("blob", DType::Bytes, &[]).with_compression(Compression::Zstd { level: 3 }),
                Column::new("pairs", DType::F32, &[Ragged, Fixed(2)]),
                Column::new("all_empty", DType::U32, &[Ragged]).with_compression(Compression::Lz4),
            ])?;
            let pairs = dense(
                DType::F32,
                &[Ragged, Fixed(2)],
                vec![
                    Row::of::<f32>(&[0, 2], &[]),
                    Row::of(&[1, 2], &[1.5f32, -2.0]),
                    Row::of::<f32>(&[0, 2], &[]),
                    Row::of::<f32>(&[0, 2], &[]),
                    Row::of(&[2, 2], &[0.0f32, 0.25, -0.0, 8.0]),
                ],
            )?;
            let b = batch(vec![
                ("some_empty", ColumnData::from_sequences::<i64>(&[&[], &[1, -1], &[], &[i64::MIN], &[]])),
                ("text", ColumnData::from_strings(&["", "x", "", "", "yz"])),
                ("blob", ColumnData::from_byte_strings::<&[u8]>(&[b"", b"", b"\x01", b"", b""])),
                ("pairs", pairs),
                ("all_empty", ColumnData::from_sequences::<u32>(&[&[], &[], &[], &[], &[]])),
            ])?;
            one_commit(input, schema, &b, WriteOptions::default()).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-shape-0005-zero-size-fixed-dims",
            &["SHP-01", "SHP-06", "CMP-04"],
            "fixed dims of size 0 ([0], [3, 0], [0, ?]): every row has 0 elements",
        ),
        |input| {
            let schema = Schema::new([
                Column::new("none", DType::I32, &[Fixed(0)]),
                Column::new("wide", DType::F32, &[Fixed(3), Fixed(0)]).with_compression(Compression::Lz4),
                Column::new("mixed", DType::U8, &[Fixed(0), Ragged]),
                Column::new("id", DType::U8, &[]),
            ])?;
            let rows = 4u64;
            let b = batch(vec![
                ("none", dense(DType::I32, &[Fixed(0)], (0..rows).map(|_| Row::raw(&[0], vec![])).collect())?),
                (
                    "wide",
                    dense(DType::F32, &[Fixed(3), Fixed(0)], (0..rows).map(|_| Row::raw(&[3, 0], vec![])).collect())?,
                ),
                (
                    "mixed",
                    dense(DType::U8, &[Fixed(0), Ragged], (0..rows).map(|i| Row::raw(&[0, i], vec![])).collect())?,
                ),
                ("id", ColumnData::from_scalars(&[0u8, 1, 2, 3])),
            ])?;
            one_commit(input, schema, &b, WriteOptions::default()).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-shape-0006-nullable-columns",
            &["MOD-05", "MOD-06", "DF-15", "DF-16"],
            "nullable columns (i64, f32 [2, 2], i32 [?], utf8, bytes) with nulls at the first, last and middle \
             rows, one column all null; 11 rows, so the validity bitmap has padding bits",
        ),
        |input| {
            let mut rng = Prng::new(16);
            let n = 11;
            let nulls = |i: usize| i == 0 || i == 4 || i == 5 || i == n - 1;
            let mut cols = Vec::new();
            let specs: [(&str, DType, Vec<Dim>); 5] = [
                ("num", DType::I64, vec![]),
                ("grid", DType::F32, vec![Fixed(2), Fixed(2)]),
                ("seq", DType::I32, vec![Ragged]),
                ("text", DType::Utf8, vec![]),
                ("blob", DType::Bytes, vec![]),
            ];
            for (name, d, shape) in &specs {
                let rows = random_rows(&mut rng, *d, shape, n, 4);
                let rows = rows.into_iter().enumerate().map(|(i, r)| (!nulls(i)).then_some(r)).collect();
                cols.push((*name, column(*d, shape, true, rows)?));
            }
            cols.push(("nothing", column(DType::U16, &[Fixed(3)], true, vec![None; n])?));
            let schema = Schema::new(
                specs.iter().map(|(name, d, shape)| Column::new(*name, *d, shape).nullable()).chain([Column::new(
                    "nothing",
                    DType::U16,
                    &[Fixed(3)],
                )
                .nullable()]),
            )?;
            one_commit(input, schema, &batch(cols)?, WriteOptions::default()).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-shape-0007-rank-8",
            &["SHP-01", "LIM-02"],
            "the largest rank, 8: a fixed u8 [1, 2, 1, 2, 1, 2, 1, 2] and an i8 column with 8 ragged dims",
        ),
        |input| {
            let fixed: Vec<Dim> = [1, 2, 1, 2, 1, 2, 1, 2].into_iter().map(Fixed).collect();
            let schema = Schema::new([
                Column::new("fixed8", DType::U8, &fixed),
                Column::new("ragged8", DType::I8, &[Ragged; 8]),
            ])?;
            random_commit(input, schema, 17, 3, 2).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-shape-0008-large-column-digest-only",
            &["DUMP-05", "DUMP-07"],
            "a u8 [64, 64] column of 2 rows (8192 elements, more than 4096): the dump gives only its digest, \
             the small column next to it lists its rows",
        ),
        |input| {
            let schema = Schema::new([
                Column::new("big", DType::U8, &[Fixed(64), Fixed(64)]).with_compression(Compression::Zstd { level: 3 }),
                Column::new("small", DType::U8, &[Fixed(4)]),
            ])?;
            let big: Vec<u8> = (0..2 * 64 * 64u32).map(|i| ((i / 64) ^ (i % 64)) as u8).collect();
            let b = batch(vec![
                ("big", ColumnData::from_fixed(&[64, 64], &big)?),
                ("small", ColumnData::from_fixed(&[4], &[1u8, 2, 3, 4, 5, 6, 7, 8])?),
            ])?;
            one_commit(input, schema, &b, WriteOptions::default()).map(drop)
        },
    )?;
    Ok(())
}

/// A compressible schema and batch for the codec cases: token runs, a smooth signal and
/// repetitive text, 8 rows.
fn compressible(compression: Compression) -> Result<(Schema, tessera::Batch)> {
    let schema = Schema::new([
        Column::new("tokens", DType::I32, &[Ragged]).with_compression(compression),
        Column::new("signal", DType::F32, &[Fixed(16)]).with_compression(compression),
        Column::new("text", DType::Utf8, &[]).with_compression(compression),
    ])?;
    let mut rng = Prng::new(31);
    let toks: Vec<Vec<i32>> = (0..8)
        .map(|i| (0..20 + 3 * i).map(|j| [7, 7, 7, 1, 2][(j % 5) as usize] + (rng.below(2) as i32)).collect())
        .collect();
    let tok_refs: Vec<&[i32]> = toks.iter().map(Vec::as_slice).collect();
    let signal: Vec<f32> = (0..8 * 16).map(|i| ((i % 16) as f32) * 0.5).collect();
    let text: Vec<String> = (0..8).map(|i| "the quick brown fox ".repeat(2 + i % 3)).collect();
    let b = batch(vec![
        ("tokens", ColumnData::from_sequences(&tok_refs)),
        ("signal", ColumnData::from_fixed(&[16], &signal)?),
        ("text", ColumnData::from_strings(&text)),
    ])?;
    Ok((schema, b))
}

/// Fails unless some page of some data file under `input` is stored with `codec`.
fn require_codec(input: &Path, codec: Codec) -> Result<()> {
    let used = Ds::new(input)
        .footers()?
        .iter()
        .flat_map(|f| f.columns.iter())
        .flat_map(|c| c.pages.iter())
        .any(|p| p.block.codec == codec);
    if !used {
        bail!("no page is stored with codec {}", codec.name());
    }
    Ok(())
}

fn codecs(em: &mut Emitter) -> Result<()> {
    let cases: [(&str, &str, Compression, Codec); 4] = [
        ("v-codec-0001-none", "uncompressed pages", Compression::None, Codec::None),
        ("v-codec-0002-lz4", "LZ4 block-format pages", Compression::Lz4, Codec::Lz4),
        ("v-codec-0003-zstd-level-1", "zstd pages at level 1", Compression::Zstd { level: 1 }, Codec::Zstd),
        ("v-codec-0004-zstd-level-19", "zstd pages at level 19", Compression::Zstd { level: 19 }, Codec::Zstd),
    ];
    for (id, what, compression, codec) in cases {
        let description = format!(
            "{what}: compressible i32 [?], f32 [16] and utf8 columns, split into pages of at most 256 raw bytes"
        );
        em.valid(Spec::new(id, &["CMP-01", "CMP-02", "CMP-03"], &description), |input| {
            let (schema, b) = compressible(compression)?;
            one_commit(input, schema, &b, WriteOptions { page_bytes: 256, ..WriteOptions::default() })?;
            require_codec(input, codec)
        })?;
    }
    em.valid(
        Spec::new(
            "v-codec-0005-zstd-incompressible-stored-raw",
            &["CMP-02", "CMP-03"],
            "a zstd column of random bytes: the pages did not shrink, so the writer stored them with codec None \
             while the schema still says zstd",
        ),
        |input| {
            let schema =
                Schema::new(
                    [Column::new("noise", DType::Bytes, &[]).with_compression(Compression::Zstd { level: 3 })],
                )?;
            let mut rng = Prng::new(35);
            let rows: Vec<Vec<u8>> = (0..4).map(|_| rng.bytes(48)).collect();
            let b = batch(vec![("noise", ColumnData::from_byte_strings(&rows))])?;
            one_commit(input, schema, &b, WriteOptions { page_bytes: 64, ..WriteOptions::default() })?;
            require_codec(input, Codec::None)
        },
    )?;
    em.valid(
        Spec::new(
            "v-codec-0006-mixed-codecs",
            &["CMP-01", "CMP-02", "CMP-03"],
            "four copies of a compressible column in one data file, stored with none, lz4, zstd 1 and zstd 19",
        ),
        |input| {
            let c = |name: &str, comp| Column::new(name, DType::U16, &[Fixed(32)]).with_compression(comp);
            let schema = Schema::new([
                c("none", Compression::None),
                c("lz4", Compression::Lz4),
                c("zstd1", Compression::Zstd { level: 1 }),
                c("zstd19", Compression::Zstd { level: 19 }),
            ])?;
            let values: Vec<u16> = (0..6 * 32).map(|i| (i % 8) as u16 * 1000).collect();
            let col = ColumnData::from_fixed(&[32], &values)?;
            let b = batch(vec![("none", col.clone()), ("lz4", col.clone()), ("zstd1", col.clone()), ("zstd19", col)])?;
            one_commit(input, schema, &b, WriteOptions::default())?;
            require_codec(input, Codec::Lz4)?;
            require_codec(input, Codec::Zstd)
        },
    )?;
    Ok(())
}

fn layouts(em: &mut Emitter) -> Result<()> {
    em.valid(
        Spec::new(
            "v-layout-0001-empty-dataset",
            &["VER-01", "MAN-06"],
            "a dataset just created: version 1 of main, a schema and zero rows",
        ),
        |input| {
            let schema = Schema::new([
                Column::new("image", DType::U8, &[Fixed(2), Fixed(2), Fixed(3)])
                    .with_kind(Kind::Image { layout: ImageLayout::Hwc }),
                Column::new("caption", DType::Utf8, &[]).with_kind(Kind::Text).nullable(),
            ])?;
            create(input, schema, &mut Clock::new()).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-layout-0002-many-fragments",
            &["SEG-08", "MAN-06"],
            "24 rows written as 12 fragments of 2 rows (one data file each) in one index segment",
        ),
        |input| {
            let schema = Schema::new([Column::new("id", DType::I64, &[]), Column::new("xy", DType::F32, &[Fixed(2)])])?;
            let mut rng = Prng::new(42);
            let b = random_batch(&mut rng, &schema, 24, 0)?;
            let ds = one_commit(input, schema, &b, WriteOptions { target_file_bytes: 32, ..WriteOptions::default() })?;
            if ds.fragments().len() != 12 {
                bail!("expected 12 fragments, got {}", ds.fragments().len());
            }
            Ok(())
        },
    )?;
    em.valid(
        Spec::new(
            "v-layout-0003-many-pages",
            &["DF-18", "DF-19"],
            "one data file whose columns are split into many small pages (u16 [?] and utf8, pages of at most 16 \
             raw bytes)",
        ),
        |input| {
            let schema = Schema::new([
                Column::new("seq", DType::U16, &[Ragged]).with_compression(Compression::Lz4),
                Column::new("word", DType::Utf8, &[]),
            ])?;
            let mut rng = Prng::new(43);
            let b = random_batch(&mut rng, &schema, 30, 6)?;
            one_commit(input, schema, &b, WriteOptions { page_bytes: 16, ..WriteOptions::default() })?;
            let pages: usize = Ds::new(input).footers()?.iter().flat_map(|f| &f.columns).map(|c| c.pages.len()).sum();
            if pages < 20 {
                bail!("expected many pages, got {pages}");
            }
            Ok(())
        },
    )?;
    em.valid(
        Spec::new(
            "v-layout-0004-column-groups",
            &["SEG-06", "DF-13"],
            "column groups: each fragment stores {a, b}, {c} and the remaining {d} in three data files; two \
             fragments",
        ),
        |input| {
            let schema = Schema::new([
                Column::new("a", DType::U8, &[Fixed(4)]),
                Column::new("b", DType::I32, &[]),
                Column::new("c", DType::Utf8, &[]),
                Column::new("d", DType::F64, &[Fixed(2)]),
            ])?;
            let mut rng = Prng::new(44);
            let b = random_batch(&mut rng, &schema, 6, 5)?;
            let opts = WriteOptions {
                target_file_bytes: 60,
                column_groups: vec![vec!["a".into(), "b".into()], vec!["c".into()]],
                ..WriteOptions::default()
            };
            let ds = one_commit(input, schema, &b, opts)?;
            if ds.fragments().len() < 2 || ds.fragments().iter().any(|f| f.fragment.files.len() != 3) {
                bail!("expected several fragments of three files each");
            }
            Ok(())
        },
    )?;
    em.valid(
        Spec::new(
            "v-layout-0005-many-commits",
            &["SEG-08", "SEG-10", "MAN-06"],
            "six appends of two rows: the manifest lists the index segments left after tiered merging, and \
             superseded segments stay in index/ unreferenced",
        ),
        |input| {
            let schema =
                Schema::new([Column::new("id", DType::I64, &[]), Column::new("note", DType::Utf8, &[]).nullable()])?;
            let mut clock = Clock::new();
            let mut ds = create(input, schema.clone(), &mut clock)?;
            let mut rng = Prng::new(45);
            for _ in 0..6 {
                let b = random_batch(&mut rng, &schema, 2, 4)?;
                let b = batch(vec![
                    ("id", b.get("id").cloned().unwrap_or_else(|| ColumnData::for_column(&schema.columns[0]))),
                    ("note", b.get("note").cloned().unwrap_or_else(|| ColumnData::for_column(&schema.columns[1]))),
                ])?;
                ds = ds.append(&b, "two more rows", clock.tick())?;
            }
            if ds.manifest().segments.len() < 2 {
                bail!("expected several segments, got {}", ds.manifest().segments.len());
            }
            Ok(())
        },
    )?;
    em.valid(
        Spec::new(
            "v-layout-0006-unreferenced-objects-ignored",
            &["LAY-05"],
            "a dataset with stray objects a reader must ignore: a temporary manifest name, a 19-digit manifest \
             name, and garbage in data/ and index/ that no manifest references",
        ),
        |input| {
            let schema = Schema::new([Column::new("id", DType::I64, &[])])?;
            let b = batch(vec![("id", ColumnData::from_scalars(&[10i64, 20, 30]))])?;
            one_commit(input, schema, &b, WriteOptions::default())?;
            let ds = Ds::new(input);
            ds.write("branches/main/00000000000000000003.tsm.tmp", b"not a manifest")?;
            ds.write("branches/main/0000000000000000009.tsm", b"not a manifest either")?;
            ds.write("data/00000000000000000000000000000000.tsd", &[0xAB; 100])?;
            ds.write("index/ffffffffffffffffffffffffffffffff.tsi", b"garbage")?;
            ds.write("README.txt", b"stray file at the root")
        },
    )?;
    em.valid(
        Spec::new(
            "v-layout-0007-higher-minor-versions",
            &["FLG-02"],
            "the manifest, index segment and data file all say minor version 1 (checksums re-sealed); readers \
             must accept any minor",
        ),
        |input| {
            let schema = Schema::new([Column::new("id", DType::I64, &[]), Column::new("t", DType::Utf8, &[])])?;
            random_commit(input, schema, 47, 3, 4)?;
            let ds = Ds::new(input);
            let m = ds.main()?;
            ds.edit_data_file_raw(&m, FileLoc::default(), RefUpdate::Full, |b| {
                b[10] = 1;
                fix_header_crc(b);
            })?;
            let seg = ds.segment_key(&m, 0)?;
            let mut bytes = ds.read(&seg)?;
            bytes[10] = 1;
            fix_envelope_crc(&mut bytes);
            ds.replace_segment(&m, 0, &bytes)?;
            ds.edit_envelope_header(&m, |h| h[10] = 1).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-layout-0008-unknown-writer-flags",
            &["FLG-04"],
            "the manifest sets writer-required flag bits this reader does not know; readers ignore writer flags",
        ),
        |input| {
            let schema = Schema::new([Column::new("id", DType::I64, &[])])?;
            random_commit(input, schema, 48, 3, 0)?;
            let ds = Ds::new(input);
            ds.edit_manifest(&ds.main()?, |m| m.writer_flags = 1 << 63 | 1)
        },
    )?;
    Ok(())
}

/// The history the version cases read:
/// main@1 create; main@2 +3 rows, tagged `release-1`; main@3 +2 rows; branch `dev` from
/// main@3; dev@4 +2 rows; main@4 +1 row.
fn history(input: &Path) -> Result<()> {
    let schema = Schema::new([Column::new("id", DType::I64, &[]), Column::new("name", DType::Utf8, &[])])?;
    let rows = |ids: &[i64], names: &[&str]| {
        batch(vec![("id", ColumnData::from_scalars(ids)), ("name", ColumnData::from_strings(names))])
    };
    let mut clock = Clock::new();
    let v1 = create(input, schema, &mut clock)?;
    let v2 = v1.append(&rows(&[1, 2, 3], &["one", "two", "three"])?, "first rows", clock.tick())?;
    v2.create_tag("release-1", "the first release", &clock.tick())?;
    let v3 = v2.append(&rows(&[4, 5], &["four", "five"])?, "more rows", clock.tick())?;
    let dev3 = v3.create_branch("dev", &clock.tick())?;
    dev3.append(&rows(&[100, 101], &["dev-a", "dev-b"])?, "dev rows", clock.tick())?;
    v3.append(&rows(&[6], &["six"])?, "main row", clock.tick())?;
    Ok(())
}

fn versions(em: &mut Emitter) -> Result<()> {
    let cases: [(&str, &[&str], &str, Option<Args>); 7] = [
        ("v-version-0001-latest-main", &["VER-02", "REF-03"], "the latest version of main (main@4, 6 rows)", None),
        (
            "v-version-0002-main-version-2",
            &["VER-03"],
            "time travel to main@2 (3 rows) of a history with later versions, a tag and a branch",
            Some(Args { version: Some(2), ..Args::default() }),
        ),
        (
            "v-version-0003-main-version-1-empty",
            &["VER-01", "VER-03"],
            "time travel to main@1, the empty version made by create",
            Some(Args { version: Some(1), ..Args::default() }),
        ),
        (
            "v-version-0004-tag",
            &["REF-01", "REF-02"],
            "the version tag release-1 names (main@2), checked against the manifest CRC the tag records",
            Some(Args { tag: Some("release-1".into()), ..Args::default() }),
        ),
        (
            "v-version-0005-branch-latest",
            &["REF-04", "VER-02"],
            "the latest version of branch dev (dev@4: main@3's rows plus two)",
            Some(Args { branch: Some("dev".into()), ..Args::default() }),
        ),
        (
            "v-version-0006-branch-fork-point",
            &["REF-04"],
            "dev@3, the branch's first manifest (a copy of main@3 with base = main@3)",
            Some(Args { branch: Some("dev".into()), version: Some(3), ..Args::default() }),
        ),
        (
            "v-version-0007-branch-version-before-fork",
            &["VER-03", "REF-04"],
            "dev@2, older than the fork: it resolves through the branch's base to main@2",
            Some(Args { branch: Some("dev".into()), version: Some(2), ..Args::default() }),
        ),
    ];
    for (id, reqs, description, args) in cases {
        let mut spec = Spec::new(id, reqs, description);
        spec.args = args;
        em.valid(spec, history)?;
    }
    Ok(())
}

fn kinds(em: &mut Emitter) -> Result<()> {
    em.valid(
        Spec::new(
            "v-kind-0001-image-layouts",
            &["KND-01", "KND-02"],
            "images in every layout: u8 [4, 4, 3] hwc (zstd), f32 [3, 2, 2] chw, u16 [3, 3] hw, bf16 [2, 2, 1] hwc",
        ),
        |input| {
            let img =
                |name: &str, d, shape: &[Dim], layout| Column::new(name, d, shape).with_kind(Kind::Image { layout });
            let schema = Schema::new([
                img("rgb", DType::U8, &[Fixed(4), Fixed(4), Fixed(3)], ImageLayout::Hwc)
                    .with_compression(Compression::Zstd { level: 3 }),
                img("planar", DType::F32, &[Fixed(3), Fixed(2), Fixed(2)], ImageLayout::Chw),
                img("depth", DType::U16, &[Fixed(3), Fixed(3)], ImageLayout::Hw),
                img("half", DType::Bf16, &[Fixed(2), Fixed(2), Fixed(1)], ImageLayout::Hwc),
            ])?;
            random_commit(input, schema, 51, 2, 0).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-kind-0002-video",
            &["KND-01", "KND-03"],
            "video clips u8 [2, 3, 3, 3] (T, H, W, C) at 29.97 fps, and u8 [?, 2, 2, 1] clips of varying length",
        ),
        |input| {
            let schema = Schema::new([
                Column::new("clip", DType::U8, &[Fixed(2), Fixed(3), Fixed(3), Fixed(3)])
                    .with_kind(Kind::Video { fps_milli: 29_970 }),
                Column::new("var_clip", DType::U8, &[Ragged, Fixed(2), Fixed(2), Fixed(1)])
                    .with_kind(Kind::Video { fps_milli: 0 }),
            ])?;
            random_commit(input, schema, 52, 2, 3).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-kind-0003-audio",
            &["KND-01", "KND-04"],
            "audio: mono i16 [?] at 16 kHz and stereo f32 [?, 2] at 44.1 kHz",
        ),
        |input| {
            let schema = Schema::new([
                Column::new("mono", DType::I16, &[Ragged]).with_kind(Kind::Audio { sample_rate: 16_000 }),
                Column::new("stereo", DType::F32, &[Ragged, Fixed(2)]).with_kind(Kind::Audio { sample_rate: 44_100 }),
            ])?;
            random_commit(input, schema, 53, 3, 6).map(drop)
        },
    )?;
    em.valid(
        Spec::new("v-kind-0004-text", &["KND-01", "KND-05"], "a nullable text column in several scripts"),
        |input| {
            let schema = Schema::new([Column::new("caption", DType::Utf8, &[]).with_kind(Kind::Text).nullable()])?;
            let rows = vec![
                Some(Row::text("A cat on a mat.")),
                None,
                Some(Row::text("Un chat sur un tapis.")),
                Some(Row::text("マットの上の猫。")),
                Some(Row::text("قطة على حصيرة")),
                Some(Row::text("")),
            ];
            let b = batch(vec![("caption", column(DType::Utf8, &[], true, rows)?)])?;
            one_commit(input, schema, &b, WriteOptions::default()).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-kind-0005-json",
            &["KND-01", "KND-05", "KND-11"],
            "a json column: objects, arrays, scalars and unicode escapes, each row a valid JSON document",
        ),
        |input| {
            let schema = Schema::new([Column::new("meta", DType::Utf8, &[]).with_kind(Kind::Json)])?;
            let docs = [
                r#"{"a":1,"b":[true,null,"x"]}"#,
                "[]",
                "42",
                r#""caf\u00e9""#,
                r#"{"nested":{"deep":[1.5e3,-0.0]}}"#,
                "null",
            ];
            let b = batch(vec![("meta", ColumnData::from_strings(&docs))])?;
            one_commit(input, schema, &b, WriteOptions::default()).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-kind-0006-tokens",
            &["KND-01", "KND-06", "KND-11"],
            "token sequences: u16 [?] with vocab_size 512 (every id below it) and i64 [?] without a vocabulary",
        ),
        |input| {
            let schema = Schema::new([
                Column::new("ids", DType::U16, &[Ragged])
                    .with_kind(Kind::Tokens { vocab_size: Some(512) })
                    .with_compression(Compression::Lz4),
                Column::new("wide", DType::I64, &[Ragged]).with_kind(Kind::Tokens { vocab_size: None }),
            ])?;
            let mut rng = Prng::new(56);
            let ids: Vec<Vec<u16>> = (0..5).map(|i| (0..i * 3).map(|_| rng.below(512) as u16).collect()).collect();
            let ids: Vec<&[u16]> = ids.iter().map(Vec::as_slice).collect();
            let b = batch(vec![
                ("ids", ColumnData::from_sequences(&ids)),
                ("wide", random_column(&mut rng, DType::I64, &[Ragged], 5, 4)?),
            ])?;
            one_commit(input, schema, &b, WriteOptions::default()).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-kind-0007-embedding",
            &["KND-01", "KND-07"],
            "embeddings: f16 [8] cosine, bf16 [4] dot, f32 [6] l2, f64 [3] unspecified metric",
        ),
        |input| {
            let e = |name: &str, d, n, metric| Column::new(name, d, &[Fixed(n)]).with_kind(Kind::Embedding { metric });
            let schema = Schema::new([
                e("e16", DType::F16, 8, Metric::Cosine),
                e("ebf16", DType::Bf16, 4, Metric::Dot),
                e("e32", DType::F32, 6, Metric::L2),
                e("e64", DType::F64, 3, Metric::Unspecified),
            ])?;
            random_commit(input, schema, 57, 3, 0).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-kind-0008-class-label",
            &["KND-01", "KND-08", "KND-11"],
            "class labels: one i64 label per row among 3 names, and u8 [?] multi-labels among 5 names",
        ),
        |input| {
            let names = |v: &[&str]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
            let schema = Schema::new([
                Column::new("label", DType::I64, &[])
                    .with_kind(Kind::ClassLabel { names: names(&["cat", "dog", "bird"]) }),
                Column::new("tags", DType::U8, &[Ragged])
                    .with_kind(Kind::ClassLabel { names: names(&["indoor", "outdoor", "day", "night", "blurry"]) }),
            ])?;
            let b = batch(vec![
                ("label", ColumnData::from_scalars(&[0i64, 2, 1, 1, 0])),
                ("tags", ColumnData::from_sequences::<u8>(&[&[0, 2], &[1], &[], &[1, 3, 4], &[0]])),
            ])?;
            one_commit(input, schema, &b, WriteOptions::default()).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-kind-0009-bbox",
            &["KND-01", "KND-09"],
            "bounding boxes: f32 [?, 4] xyxy normalized (0 to 3 boxes per row), i32 [4] xywh, f64 [2, 4] cxcywh",
        ),
        |input| {
            let bb = |name: &str, d, shape: &[Dim], format, normalized| {
                Column::new(name, d, shape).with_kind(Kind::BBox { format, normalized })
            };
            let schema = Schema::new([
                bb("boxes", DType::F32, &[Ragged, Fixed(4)], BBoxFormat::Xyxy, true),
                bb("one_box", DType::I32, &[Fixed(4)], BBoxFormat::Xywh, false),
                bb("two_boxes", DType::F64, &[Fixed(2), Fixed(4)], BBoxFormat::Cxcywh, false),
            ])?;
            random_commit(input, schema, 59, 4, 3).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-kind-0010-mask",
            &["KND-01", "KND-10"],
            "segmentation masks: bool [4, 4], u8 [3, 3, 2] and u16 [?, ?] instance ids",
        ),
        |input| {
            let schema = Schema::new([
                Column::new("binary", DType::Bool, &[Fixed(4), Fixed(4)]).with_kind(Kind::Mask),
                Column::new("multi", DType::U8, &[Fixed(3), Fixed(3), Fixed(2)]).with_kind(Kind::Mask),
                Column::new("instances", DType::U16, &[Ragged, Ragged]).with_kind(Kind::Mask),
            ])?;
            random_commit(input, schema, 60, 3, 3).map(drop)
        },
    )?;
    Ok(())
}

fn schemas(em: &mut Emitter) -> Result<()> {
    em.valid(
        Spec::new(
            "v-schema-0001-unicode-column-names",
            &["MOD-03", "GEN-07", "DUMP-02"],
            "column names in several scripts, with emoji, spaces, a zero-width space, and both the composed and \
             the decomposed spelling of café (distinct names: names compare by bytes)",
        ),
        |input| {
            let names = [
                "画像",
                "étiquette",
                "emoji 🙂 column",
                "Ελληνικά",
                "نص",
                "with space-and_dash.dot",
                "zero\u{200b}width",
                "café",
                "cafe\u{301}",
            ];
            let schema = Schema::new(names.iter().map(|n| Column::new(*n, DType::U8, &[])))?;
            random_commit(input, schema, 61, 3, 0).map(drop)
        },
    )?;
    em.valid(
        Spec::new(
            "v-schema-0002-metadata",
            &["MOD-04", "DUMP-02"],
            "schema-level and column-level metadata with unicode keys and values, sorted by key bytes",
        ),
        |input| {
            let schema = Schema::new([
                Column::new("x", DType::F32, &[Fixed(2)])
                    .with_metadata("unit", "metre")
                    .with_metadata("Ünïcode", "✓")
                    .with_metadata("", "empty key"),
                Column::new("y", DType::I8, &[]),
            ])?
            .with_metadata("license", "CC-BY-4.0")
            .with_metadata("source", "synthetic 🧪")
            .with_metadata("z-empty", "");
            random_commit(input, schema, 62, 2, 0).map(drop)
        },
    )?;
    Ok(())
}

fn multimodal(em: &mut Emitter) -> Result<()> {
    em.valid(
        Spec::new(
            "v-multimodal-0001-image-label-tokens-embedding-text",
            &["KND-01", "MOD-01", "SEG-06"],
            "a multimodal row set: image u8 [8, 8, 3] (zstd), class label, tokens u32 [?] (lz4, vocab 1000), \
             embedding f32 [16] and a nullable caption; 6 rows in 2 fragments, image and embedding in their own \
             column groups",
        ),
        |input| {
            let schema = Schema::new([
                Column::new("image", DType::U8, &[Fixed(8), Fixed(8), Fixed(3)])
                    .with_kind(Kind::Image { layout: ImageLayout::Hwc })
                    .with_compression(Compression::Zstd { level: 3 }),
                Column::new("label", DType::I64, &[])
                    .with_kind(Kind::ClassLabel { names: vec!["cat".into(), "dog".into()] }),
                Column::new("tokens", DType::U32, &[Ragged])
                    .with_kind(Kind::Tokens { vocab_size: Some(1000) })
                    .with_compression(Compression::Lz4),
                Column::new("embedding", DType::F32, &[Fixed(16)])
                    .with_kind(Kind::Embedding { metric: Metric::Cosine }),
                Column::new("caption", DType::Utf8, &[]).with_kind(Kind::Text).nullable(),
            ])?;
            let mut rng = Prng::new(71);
            let n = 6;
            let image: Vec<u8> = (0..n * 8 * 8 * 3).map(|i| ((i / 3) % 8 * 30) as u8).collect();
            let toks: Vec<Vec<u32>> = (0..n).map(|i| (0..2 + i).map(|_| rng.below(1000) as u32).collect()).collect();
            let toks: Vec<&[u32]> = toks.iter().map(Vec::as_slice).collect();
            let caps = ["a red square", "", "deux chats", "犬", "🙂", "last"];
            let caption = column(
                DType::Utf8,
                &[],
                true,
                caps.iter().enumerate().map(|(i, c)| (i != 1).then(|| Row::text(c))).collect(),
            )?;
            let b = batch(vec![
                ("image", ColumnData::from_fixed(&[8, 8, 3], &image)?),
                ("label", ColumnData::from_scalars(&[0i64, 1, 1, 0, 1, 0])),
                ("tokens", ColumnData::from_sequences(&toks)),
                ("embedding", random_column(&mut rng, DType::F32, &[Fixed(16)], n, 0)?),
                ("caption", caption),
            ])?;
            let opts = WriteOptions {
                target_file_bytes: 900,
                column_groups: vec![vec!["image".into()], vec!["embedding".into()]],
                ..WriteOptions::default()
            };
            let ds = one_commit(input, schema, &b, opts)?;
            if ds.fragments().len() != 2 {
                bail!("expected 2 fragments, got {}", ds.fragments().len());
            }
            Ok(())
        },
    )
}

/// Edges of reading a version (SPEC.md issue 15): the final fragment map `[SEG-06]`, what a
/// read does not open `[VAL-16]`, kind edge values `[KND-03]` `[KND-06]` `[KND-08]`, exact
/// integers and user `x-` keys in dumps `[DUMP-10]`, and directories on a local file system
/// `[LAY-11]`.
fn reading(em: &mut Emitter) -> Result<()> {
    em.valid(
        Spec::new(
            "v-layout-0012-column-added-segments-unmerged",
            &["SEG-06", "SEG-08", "EVO-01"],
            "main@3 after column `b` was added to a fragment written without it, with the segments left unmerged: \
             the append's segment, whose entry for fragment 0 lacks `b`, then the segment that replaces fragment 0 \
             with `b`; SEG-06 holds on the final fragment map",
        ),
        |input| {
            let mut clock = Clock::new();
            let v1 = create(input, Schema::new([Column::new("a", DType::I32, &[])])?, &mut clock)?;
            let v2 =
                v1.append(&batch(vec![("a", ColumnData::from_scalars(&[1i32, 2, 3]))])?, "three rows", clock.tick())?;
            let b = ColumnData::from_scalars(&[10i64, 20, 30]);
            v2.add_column(Column::new("b", DType::I64, &[]), Some(&b), "add b", &clock.tick())?;
            let d = Ds::new(input);
            let m2 = d.manifest(&tessera::paths::manifest_key("main", 2))?;
            let key = d.main()?;
            let m3 = d.manifest(&key)?;
            if m2.segments.len() != 1 || m3.segments.len() != 1 || m3.segments == m2.segments {
                bail!("expected one segment in each of main@2 and main@3");
            }
            d.edit_manifest(&key, |m| m.segments.insert(0, m2.segments[0].clone()))
        },
    )?;
    em.valid(
        Spec::new(
            "v-kind-0011-edge-values",
            &["KND-03", "KND-06", "KND-08", "DUMP-01", "DUMP-10"],
            "kind edge values: video with fps_milli 0, tokens with vocab_size 0 (empty rows) and 2^53 + 1, class \
             names that are empty or hold control characters, a u8 [2^53 + 1, 0] column (exact integers above \
             2^53 in the dump), and a column `x-score` with metadata key `x-note` (user keys, compared)",
        ),
        |input| {
            let big = (1u64 << 53) + 1;
            let schema = Schema::new([
                Column::new("clip", DType::U8, &[Fixed(1), Fixed(2), Fixed(2), Fixed(1)])
                    .with_kind(Kind::Video { fps_milli: 0 }),
                Column::new("no_vocab", DType::U32, &[Ragged]).with_kind(Kind::Tokens { vocab_size: Some(0) }),
                Column::new("big_vocab", DType::U64, &[Ragged]).with_kind(Kind::Tokens { vocab_size: Some(big) }),
                Column::new("label", DType::U8, &[])
                    .with_kind(Kind::ClassLabel { names: vec![String::new(), "tab\there".into(), "\u{7f}".into()] }),
                Column::new("huge_empty", DType::U8, &[Fixed(big), Fixed(0)]),
                Column::new("x-score", DType::F32, &[]).with_metadata("x-note", "a user key: compared"),
            ])?
            .with_metadata("x-source", "a user key: compared");
            let empty: &[u32] = &[];
            let b = batch(vec![
                ("clip", ColumnData::from_fixed(&[1, 2, 2, 1], &[1u8, 2, 3, 4, 5, 6, 7, 8])?),
                ("no_vocab", ColumnData::from_sequences(&[empty, empty])),
                ("big_vocab", ColumnData::from_sequences(&[&[0u64, big - 1][..], &[7u64][..]])),
                ("label", ColumnData::from_scalars(&[0u8, 2])),
                ("huge_empty", dense(DType::U8, &[Fixed(big), Fixed(0)], vec![Row::raw(&[big, 0], Vec::new()); 2])?),
                ("x-score", ColumnData::from_scalars(&[0.5f32, -2.0])),
            ])?;
            one_commit(input, schema, &b, WriteOptions::default()).map(drop)
        },
    )?;
    em.valid_unverified(
        Spec::new(
            "v-deletion-0007-fully-deleted-fragment-not-read",
            &["VAL-16", "DEL-05"],
            "fragment 0 lists deleted_count = row_count = 3 and its deletion vector object is absent: a fragment \
             with no live row is not read (a verifier rejects the version)",
        ),
        |input| {
            let mut clock = Clock::new();
            let v1 = create(input, Schema::new([Column::new("v", DType::I32, &[])])?, &mut clock)?;
            let v2 = v1.append(&batch(vec![("v", ColumnData::from_scalars(&[1i32, 2, 3]))])?, "a", clock.tick())?;
            let v3 = v2.append(&batch(vec![("v", ColumnData::from_scalars(&[4i32, 5]))])?, "b", clock.tick())?;
            v3.delete_rows(&[1], "delete a row of fragment 0", &clock.tick())?;
            let d = Ds::new(input);
            let key = d.main()?;
            let dref = d.deletion_ref(&key, 0)?;
            d.edit_deletion_ref(&key, 0, |r| r.deleted_count = 3)?;
            d.edit_manifest(&key, |m| m.row_count = 2)?;
            d.remove(&dref.path)
        },
    )?;
    em.valid_unverified(
        Spec::new(
            "v-layout-0013-zero-row-fragment-not-read",
            &["VAL-16", "SEG-04"],
            "a fragment of 0 rows whose data file reference names an object that does not exist: a fragment with no \
             live row is not read (a verifier rejects the version)",
        ),
        |input| {
            let mut clock = Clock::new();
            let v1 = create(input, Schema::new([Column::new("v", DType::I32, &[])])?, &mut clock)?;
            v1.append(&batch(vec![("v", ColumnData::from_scalars(&[1i32, 2]))])?, "two rows", clock.tick())?;
            let d = Ds::new(input);
            let key = d.main()?;
            let m = d.manifest(&key)?;
            let (next, last) = (m.next_fragment_id, m.segments.len() - 1);
            d.edit_segment(&key, last, |s| {
                s.fragments.push(tessera::manifest::Fragment {
                    id: next,
                    row_count: 0,
                    files: vec![tessera::manifest::DataFileRef {
                        path: "data/never-written.tsd".into(),
                        size: 4096,
                        footer_crc32: 0,
                        column_ids: vec![0],
                    }],
                    deletion: None,
                    stats: Vec::new(),
                });
            })?;
            d.edit_manifest(&key, |m| {
                m.next_fragment_id = next + 1;
                m.segments[last].fragment_count += 1;
            })
        },
    )?;
    em.valid_unverified(
        Spec::new(
            "v-evolve-0014-dropped-column-file-not-read",
            &["VAL-16", "EVO-02", "SEG-06"],
            "column `gone` was stored in its own data file and then dropped; that file no longer exists: a \
             DataFileRef that lists no schema column is not read (a verifier rejects the version)",
        ),
        |input| {
            let mut clock = Clock::new();
            let schema = Schema::new([Column::new("keep", DType::I32, &[]), Column::new("gone", DType::F64, &[])])?;
            let v1 = create(input, schema, &mut clock)?;
            let b = batch(vec![
                ("keep", ColumnData::from_scalars(&[1i32, 2, 3])),
                ("gone", ColumnData::from_scalars(&[0.5f64, 1.5, 2.5])),
            ])?;
            let opts = WriteOptions { column_groups: vec![vec!["gone".into()]], ..clock.tick() };
            let v2 = v1.append(&b, "three rows", opts)?;
            v2.drop_column("gone", "drop gone", &clock.tick())?;
            let d = Ds::new(input);
            let key = d.main()?;
            let seg = d.segment(&d.segment_key(&key, 0)?)?;
            let Some(r) = seg.fragments[0].files.iter().find(|f| f.column_ids == [1]) else {
                bail!("no data file holding only `gone`");
            };
            d.remove(&r.path)
        },
    )?;
    em.valid(
        Spec::new(
            "v-layout-0014-directories-are-not-keys",
            &["LAY-11", "VER-02", "LAY-05"],
            "branches/main/ also holds a directory named 00000000000000000009.tsm (with a file in it) and a \
             subdirectory holding 00000000000000000008.tsm: neither is a version, so the latest is main@2",
        ),
        |input| {
            random_commit(input, Schema::new([Column::new("v", DType::U16, &[])])?, 81, 3, 0)?;
            let d = Ds::new(input);
            d.write("branches/main/00000000000000000009.tsm/stray", b"a file inside a directory\n")?;
            d.write("branches/main/old/00000000000000000008.tsm", b"not directly under branches/main/\n")
        },
    )?;
    Ok(())
}
