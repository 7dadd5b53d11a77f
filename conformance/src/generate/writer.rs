//! The writer cases: logical descriptions an implementation writes, and the reference reads
//! back (and the reverse). Each case's `expected.json` is computed from the description alone
//! (`logical::Logical::expected_document`); the emitter checks that the reference writer's
//! dataset of it reads back to exactly that, verifies, and passes the writer lint.

use tessera::Dim::{Fixed, Ragged};
use tessera::{BBoxFormat, Column, Compression, DType, ImageLayout, Kind, Metric, Schema};

use super::Result;
use super::data::random_row;
use super::emit::{Emitter, Spec};
use super::prng::Prng;
use crate::logical::{Commit, Logical, Row, TagSpec};

/// Requirements every writer case exercises: the write direction reads every version back
/// with full verification and runs the writer lint (`writer_lint`).
const WRITER: [&str; 14] = [
    "GEN-03", "LAY-02", "ENV-08", "ENC-01", "FLG-05", "DF-05", "DF-25", "MAN-03", "VER-01", "VER-06", "VER-12",
    "SEG-09", "STAT-04", "STAT-06",
];

/// The requirement list of a writer case: the common ones and `extra`.
fn reqs(extra: &[&'static str]) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = extra.to_vec();
    v.extend(WRITER.iter().filter(|r| !extra.contains(r)));
    v
}

fn row(r: super::data::Row) -> Row {
    Row { shape: r.shape, bytes: r.bytes }
}

/// `n` random rows of a column; every `null_every`-th row (from the first) is null when the
/// column is nullable.
fn random_rows(rng: &mut Prng, c: &Column, n: usize, max_ragged: u64, null_every: usize) -> Vec<Option<Row>> {
    (0..n)
        .map(|i| {
            let r = random_row(rng, c.dtype, &c.shape, max_ragged);
            if c.nullable && null_every > 0 && i % null_every == 0 { None } else { Some(row(r)) }
        })
        .collect()
}

/// A description with random rows: `sizes[k]` rows in commit `k`.
fn random_logical(schema: Schema, seed: u64, sizes: &[usize], max_ragged: u64, null_every: usize) -> Logical {
    let mut rng = Prng::new(seed);
    let commits = sizes
        .iter()
        .enumerate()
        .map(|(k, &n)| Commit {
            message: format!("commit {}", k + 1),
            columns: schema.columns.iter().map(|c| random_rows(&mut rng, c, n, max_ragged, null_every)).collect(),
        })
        .collect();
    Logical { schema, commits, tags: Vec::new() }
}

fn scalar_row<const N: usize>(bytes: [u8; N]) -> Row {
    Row { shape: vec![], bytes: bytes.to_vec() }
}

fn text(s: &str) -> Row {
    Row { shape: vec![s.len() as u64], bytes: s.as_bytes().to_vec() }
}

fn ints<T: tessera::Element>(shape: &[u64], values: &[T]) -> Row {
    Row { shape: shape.to_vec(), bytes: super::data::le(values) }
}

/// Writes every writer case.
pub(crate) fn all(em: &mut Emitter) -> Result<()> {
    dtype_cases(em)?;
    shape_case(em)?;
    null_case(em)?;
    codec_case(em)?;
    history_cases(em)?;
    kind_case(em)?;
    schema_case(em)?;
    large_column_case(em)?;
    encoded_case(em)?;
    Ok(())
}

/// The dtype cases: a column of every dtype, and float bit patterns that must survive exactly.
fn dtype_cases(em: &mut Emitter) -> Result<()> {
    let every_dtype = Schema::new(DType::ALL.iter().map(|d| Column::new(format!("c_{}", d.name()), *d, &[])))?;
    em.writer(
        Spec::new(
            "w-dtype-0001-every-dtype",
            &reqs(&["DT-01", "STAT-01", "STAT-02", "STAT-03", "STAT-05", "DUMP-09"]),
            "one rank-0 column of each of the 15 dtypes; two commits of 6 and 3 random rows",
        ),
        &random_logical(every_dtype, 9001, &[6, 3], 7, 0),
    )?;
    let floats = Schema::new([
        Column::new("f16", DType::F16, &[]),
        Column::new("bf16", DType::Bf16, &[]),
        Column::new("f32", DType::F32, &[]).with_compression(Compression::Lz4),
        Column::new("f64", DType::F64, &[Fixed(2)]),
    ])?;
    let f16: [u16; 8] = [0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7d01, 0x0001, 0xfbff];
    let bf16: [u16; 8] = [0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x0001, 0x7f7f];
    let f32s: [u32; 8] = [0, 0x8000_0000, 0x7f80_0000, 0xff80_0000, 0x7fc0_0000, 0x7f80_0001, 1, 0xff7f_ffff];
    let f64s: [u64; 8] = [
        0,
        0x8000_0000_0000_0000,
        0x7ff0_0000_0000_0000,
        0xfff8_0000_0000_0001,
        0x7ff0_0000_0000_0001,
        1,
        0x8000_0000_0000_0001,
        0x7fef_ffff_ffff_ffff,
    ];
    let specials = Logical {
        schema: floats,
        commits: vec![Commit {
            message: "special float bit patterns".into(),
            columns: vec![
                f16.iter().map(|x| Some(scalar_row(x.to_le_bytes()))).collect(),
                bf16.iter().map(|x| Some(scalar_row(x.to_le_bytes()))).collect(),
                f32s.iter().map(|x| Some(scalar_row(x.to_le_bytes()))).collect(),
                f64s.iter().map(|x| Some(ints(&[2], &[*x, !*x]))).collect(),
            ],
        }],
        tags: Vec::new(),
    };
    em.writer(
        Spec::new(
            "w-dtype-0002-float-bit-patterns",
            &reqs(&["DT-03", "STAT-02", "STAT-03"]),
            "f16, bf16, f32 and f64 values that must survive bit for bit: signed zeros, infinities, NaNs with \
             payloads and signs, subnormals, extremes",
        ),
        &specials,
    )?;
    Ok(())
}

/// Fixed, ragged, empty and rank-8 shapes.
fn shape_case(em: &mut Emitter) -> Result<()> {
    let shapes = Schema::new([
        Column::new("cube", DType::U16, &[Fixed(2), Fixed(3), Fixed(2)]),
        Column::new("seq", DType::I32, &[Ragged]).with_compression(Compression::Zstd { level: 3 }),
        Column::new("points", DType::F32, &[Ragged, Fixed(3)]),
        Column::new("grid", DType::I8, &[Ragged, Ragged]),
        Column::new("empty", DType::U8, &[Fixed(0)]),
        Column::new("wide_empty", DType::U64, &[Fixed(3), Fixed(0), Ragged]),
        Column::new("rank8", DType::U8, &[Fixed(1), Ragged, Fixed(1), Fixed(2), Fixed(1), Fixed(1), Ragged, Fixed(1)]),
    ])?;
    em.writer(
        Spec::new(
            "w-shape-0001-fixed-ragged-and-empty",
            &reqs(&["SHP-01", "SHP-02", "SHP-04", "SHP-05", "DF-17", "DF-19", "CMP-04"]),
            "fixed multi-dim, one and two ragged dims, fixed dims of size 0, rank 8, ragged rows of length 0; \
             three commits",
        ),
        &random_logical(shapes, 9003, &[5, 1, 4], 3, 0),
    )?;
    Ok(())
}

/// Nullable columns of every shape category.
fn null_case(em: &mut Emitter) -> Result<()> {
    let nullable = Schema::new([
        Column::new("num", DType::I64, &[]).nullable(),
        Column::new("grid", DType::F32, &[Fixed(2), Fixed(2)]).nullable(),
        Column::new("seq", DType::U16, &[Ragged]).nullable().with_compression(Compression::Lz4),
        Column::new("text", DType::Utf8, &[]).nullable(),
        Column::new("blob", DType::Bytes, &[]).nullable(),
        Column::new("flag", DType::Bool, &[]).nullable(),
    ])?;
    let mut nulls = random_logical(nullable, 9004, &[11, 6], 4, 3);
    // One commit in which a whole column is null.
    nulls.commits[1].columns[3] = vec![None; 6];
    em.writer(
        Spec::new(
            "w-null-0001-nullable-columns",
            &reqs(&["MOD-05", "MOD-06", "DF-15", "DF-16", "STAT-03"]),
            "nullable columns of every shape category with nulls every third row, 11 rows in the first commit (the \
             validity bitmap has padding bits), a commit in which one column is all null",
        ),
        &nulls,
    )?;
    Ok(())
}

/// Columns under every codec, compressible and not.
fn codec_case(em: &mut Emitter) -> Result<()> {
    let codecs = Schema::new([
        Column::new("none", DType::U16, &[Fixed(16)]),
        Column::new("lz4", DType::U16, &[Fixed(16)]).with_compression(Compression::Lz4),
        Column::new("zstd1", DType::I32, &[Ragged]).with_compression(Compression::Zstd { level: 1 }),
        Column::new("zstd19", DType::Utf8, &[]).with_compression(Compression::Zstd { level: 19 }),
        Column::new("noise", DType::Bytes, &[]).with_compression(Compression::Zstd { level: 3 }),
    ])?;
    let mut rng = Prng::new(9005);
    let n = 12;
    let codec_rows = Commit {
        message: "compressible and incompressible rows".into(),
        columns: vec![
            (0..n).map(|i| Some(ints(&[16], &[(i % 3) as u16 * 7; 16]))).collect(),
            (0..n)
                .map(|i| Some(ints(&[16], &(0..16).map(|j| (j % 4) as u16 + i as u16).collect::<Vec<_>>())))
                .collect(),
            (0..n).map(|i| Some(ints(&[20 + i as u64], &vec![i as i32; 20 + i]))).collect(),
            (0..n).map(|i| Some(text(&"the quick brown fox ".repeat(1 + i % 4)))).collect(),
            (0..n).map(|_| Some(Row { shape: vec![40], bytes: rng.bytes(40) })).collect(),
        ],
    };
    em.writer(
        Spec::new(
            "w-codec-0001-none-lz4-zstd",
            &reqs(&["CMP-01", "CMP-02", "CMP-03", "DF-27", "DF-28"]),
            "columns compressed with none, lz4, zstd 1, zstd 19, and random bytes under zstd (which a writer may \
             store uncompressed)",
        ),
        &Logical { schema: codecs, commits: vec![codec_rows], tags: Vec::new() },
    )?;
    Ok(())
}

/// `Encoded` image columns given as pixels: the writer sets `ENCODED_IMAGES` from version 1 on
/// and stores the pixels losslessly (CMP-10), with plain codecs or lossless image pages.
fn encoded_case(em: &mut Emitter) -> Result<()> {
    let schema = Schema::new([
        Column::new("rgb", DType::U8, &[Ragged, Ragged, Fixed(3)])
            .with_kind(Kind::Image { layout: ImageLayout::Hwc })
            .with_compression(Compression::Encoded),
        Column::new("grey", DType::U8, &[Fixed(4), Fixed(5)])
            .with_kind(Kind::Image { layout: ImageLayout::Hw })
            .with_compression(Compression::Encoded)
            .nullable(),
        Column::new("label", DType::U8, &[]),
    ])?;
    em.writer(
        Spec::new(
            "w-encoded-0001-pixel-rows",
            &reqs(&["CMP-02", "CMP-05", "CMP-10", "FLG-08", "DUMP-04"]),
            "two Encoded image columns (hwc with ragged height and width, and a nullable 4x5 hw) and a plain \
             column, rows given as pixels: every manifest sets ENCODED_IMAGES, and the pixels read back exactly",
        ),
        &random_logical(schema, 9012, &[5, 3], 6, 3),
    )?;
    Ok(())
}

/// Commits and tags, and a description without commits.
fn history_cases(em: &mut Emitter) -> Result<()> {
    let hist_schema =
        Schema::new([Column::new("id", DType::U32, &[]), Column::new("name", DType::Utf8, &[]).nullable()])?;
    let mut hist = random_logical(hist_schema, 9006, &[3, 0, 4, 2], 5, 4);
    hist.commits[1].message = "an empty commit".into();
    hist.commits[2].message = "unicode message: ünïcødé 🙂".into();
    hist.tags = vec![
        TagSpec { name: "empty".into(), version: 1, message: "the created dataset".into() },
        TagSpec { name: "v1.0".into(), version: 3, message: String::new() },
        TagSpec { name: "latest_".into(), version: 5, message: "tag of the last version".into() },
    ];
    em.writer(
        Spec::new(
            "w-history-0001-commits-and-tags",
            &reqs(&["REF-05", "VER-02", "VER-03", "LAY-06", "MAN-05", "MOD-04"]),
            "four commits (one of them empty) and three tags, one on the created dataset; every version and tag \
             must read back as it was when it was written",
        ),
        &hist,
    )?;
    em.writer(
        Spec::new(
            "w-history-0002-created-only",
            &reqs(&["VER-12", "REF-05"]),
            "a description without commits: the created dataset (schema, no rows) and a tag on it",
        ),
        &Logical {
            schema: Schema::new([
                Column::new("image", DType::U8, &[Fixed(2), Fixed(2), Fixed(3)])
                    .with_kind(Kind::Image { layout: ImageLayout::Hwc }),
                Column::new("caption", DType::Utf8, &[]).nullable().with_kind(Kind::Text),
            ])?,
            commits: Vec::new(),
            tags: vec![TagSpec { name: "t".into(), version: 1, message: "only version".into() }],
        },
    )?;
    Ok(())
}

/// A column of every kind.
fn kind_case(em: &mut Emitter) -> Result<()> {
    em.writer(
        Spec::new(
            "w-kind-0001-every-kind",
            &reqs(&["KND-01", "KND-11", "DUMP-03", "STAT-01"]),
            "a column of every kind with values that keep the kind's value rules (class ids and token ids in range, \
             JSON text)",
        ),
        &kinds()?,
    )?;
    Ok(())
}

/// Column names in several scripts, schema and column metadata.
fn schema_case(em: &mut Emitter) -> Result<()> {
    let meta = Schema::new([
        Column::new("画像 ID", DType::I16, &[])
            .with_metadata("unit", "px")
            .with_metadata("", "empty key")
            .with_metadata("Ünïcode", "✓"),
        Column::new("café", DType::U8, &[]),
        Column::new("cafe\u{301}", DType::U8, &[]),
    ])?
    .with_metadata("license", "CC0")
    .with_metadata("z", "");
    em.writer(
        Spec::new(
            "w-schema-0001-names-and-metadata",
            &reqs(&["MOD-03", "MOD-04", "GEN-07", "DUMP-02"]),
            "column names in several scripts (composed and decomposed café are two columns), schema and column \
             metadata with unicode and empty keys and values",
        ),
        &random_logical(meta, 9008, &[4, 2], 0, 0),
    )?;
    Ok(())
}

/// A column large enough that the dump gives only its digest.
fn large_column_case(em: &mut Emitter) -> Result<()> {
    let big = Schema::new([
        Column::new("pixels", DType::U8, &[Fixed(48), Fixed(48)]).with_compression(Compression::Zstd { level: 3 }),
        Column::new("label", DType::I64, &[]),
    ])?;
    em.writer(
        Spec::new(
            "w-shape-0002-large-column-digest-only",
            &reqs(&["DUMP-06", "DUMP-07", "SHP-05"]),
            "a u8 [48, 48] column of 3 rows (6912 elements: the dump gives only its digest) next to a small one",
        ),
        &random_logical(big, 9009, &[2, 1], 0, 0),
    )?;
    Ok(())
}

/// One column of every kind, two commits.
fn kinds() -> Result<Logical> {
    let names = |v: &[&str]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
    let schema = Schema::new([
        Column::new("image", DType::U8, &[Fixed(2), Fixed(2), Fixed(3)])
            .with_kind(Kind::Image { layout: ImageLayout::Hwc }),
        Column::new("planar", DType::F16, &[Fixed(1), Fixed(2), Fixed(2)])
            .with_kind(Kind::Image { layout: ImageLayout::Chw }),
        Column::new("clip", DType::U8, &[Ragged, Fixed(1), Fixed(1), Fixed(2)])
            .with_kind(Kind::Video { fps_milli: 25_000 }),
        Column::new("audio", DType::I16, &[Ragged]).with_kind(Kind::Audio { sample_rate: 8_000 }),
        Column::new("caption", DType::Utf8, &[]).with_kind(Kind::Text),
        Column::new("tokens", DType::U16, &[Ragged]).with_kind(Kind::Tokens { vocab_size: Some(50) }),
        Column::new("emb", DType::Bf16, &[Fixed(4)]).with_kind(Kind::Embedding { metric: Metric::Cosine }),
        Column::new("label", DType::U8, &[]).with_kind(Kind::ClassLabel { names: names(&["a", "b", "c"]) }),
        Column::new("boxes", DType::F32, &[Ragged, Fixed(4)])
            .with_kind(Kind::BBox { format: BBoxFormat::Cxcywh, normalized: true }),
        Column::new("mask", DType::Bool, &[Fixed(2), Fixed(2)]).with_kind(Kind::Mask),
        Column::new("meta", DType::Utf8, &[]).with_kind(Kind::Json),
    ])?;
    let mut rng = Prng::new(9007);
    let mut commits = Vec::new();
    for (k, n) in [3usize, 2].into_iter().enumerate() {
        let mut columns = Vec::new();
        for c in &schema.columns {
            let rows = (0..n)
                .map(|i| {
                    Some(match &c.kind {
                        Kind::Tokens { .. } => {
                            let ids: Vec<u16> = (0..=i).map(|_| rng.below(50) as u16).collect();
                            ints(&[ids.len() as u64], &ids)
                        }
                        Kind::ClassLabel { .. } => ints::<u8>(&[], &[rng.below(3) as u8]),
                        Kind::Json => text(&format!("{{\"k\":{k},\"i\":[{i},null,\"é\"]}}")),
                        Kind::Text => text(&format!("caption {k}.{i}")),
                        _ => row(random_row(&mut rng, c.dtype, &c.shape, 3)),
                    })
                })
                .collect();
            columns.push(rows);
        }
        commits.push(Commit { message: format!("kinds {k}"), columns });
    }
    Ok(Logical { schema, commits, tags: Vec::new() })
}
