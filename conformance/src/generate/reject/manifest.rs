//! Must-reject cases for manifest semantics: schema, kinds, counters and flags
//! (SPEC.md §"Manifest").

// Each function below is a flat list of case definitions, one `em.reject` call per case;
// splitting them would scatter related cases without making any of them clearer.
#![allow(clippy::too_many_lines)]

use tessera::Dim::Fixed;
use tessera::envelope;
use tessera::{Compression, DType, Kind};

use super::base::{CAPTION, FEAT, ID, TOKENS, basic, main_key, put_u32};
use crate::generate::Result;
use crate::generate::emit::{Emitter, Spec};
use crate::generate::mutate::field_offset;

/// A manifest case: the basic dataset with one change to its latest manifest.
pub(super) fn manifest_case(
    em: &mut Emitter,
    spec: Spec<'_>,
    class: &str,
    hint: &str,
    f: impl FnOnce(&mut tessera::manifest::Manifest),
) -> Result<()> {
    em.reject(spec, class, hint, |input| {
        basic(input)?;
        let (ds, m) = main_key(input)?;
        ds.edit_manifest(&m, f)
    })
}

/// A manifest case whose change the manifest type cannot express: `value` is written at the
/// offset where encoding `a` and `b` (the manifest with one field changed to another known
/// variant) first differ.
fn manifest_variant_case(
    em: &mut Emitter,
    spec: Spec<'_>,
    change: impl FnOnce(&mut tessera::manifest::Manifest),
    value: u32,
) -> Result<()> {
    em.reject(spec, "malformed", "does not decode", |input| {
        basic(input)?;
        let (ds, m) = main_key(input)?;
        let a = ds.manifest(&m)?;
        let mut b = a.clone();
        change(&mut b);
        let at = field_offset(&envelope::encode_body(&a)?, &envelope::encode_body(&b)?)?;
        ds.edit_body(&m, |body| put_u32(body, at, value)).map(drop)
    })
}

pub(super) fn manifests(em: &mut Emitter) -> Result<()> {
    manifest_case(
        em,
        Spec::new("n-manifest-0001-version-differs-from-key", &["MAN-01"], "main@2's manifest says version 3"),
        "invalid",
        "its key says main@2",
        |m| m.version = 3,
    )?;
    manifest_case(
        em,
        Spec::new("n-manifest-0002-branch-differs-from-key", &["MAN-01"], "main@2's manifest says branch dev"),
        "invalid",
        "its key says main@2",
        |m| m.branch = "dev".into(),
    )?;
    manifest_case(
        em,
        Spec::new("n-manifest-0003-row-count-not-sum", &["MAN-06"], "the manifest says 7 rows; its fragments hold 6"),
        "invalid",
        "manifest says 7",
        |m| m.row_count = 7,
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0004-duplicate-column-name",
            &["MOD-03", "MAN-04"],
            "two columns of the schema are named `id`",
        ),
        "invalid",
        "duplicate column name",
        |m| m.schema.columns[FEAT as usize].name = "id".into(),
    )?;
    manifest_case(
        em,
        Spec::new("n-manifest-0005-duplicate-column-id", &["MOD-02"], "two columns of the schema have id 0"),
        "invalid",
        "duplicate column id",
        |m| m.schema.columns[FEAT as usize].id = ID,
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0006-text-kind-on-i32",
            &["KND-05"],
            "the i32 [?] column `tokens` has kind Text, which requires utf8",
        ),
        "invalid",
        "dtype must be utf8",
        |m| m.schema.columns[TOKENS as usize].kind = Kind::Text,
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0007-next-column-id-not-above",
            &["MAN-05"],
            "next_column_id is 4 while the schema has a column with id 4",
        ),
        "invalid",
        "next_column_id",
        |m| m.next_column_id = FEAT,
    )?;
    manifest_case(
        em,
        Spec::new("n-manifest-0008-zstd-level-23", &["CMP-01"], "a column's zstd level is 23 (allowed: 1..=22)"),
        "invalid",
        "zstd level 23",
        |m| m.schema.columns[TOKENS as usize].compression = Compression::Zstd { level: 23 },
    )?;
    manifest_case(
        em,
        Spec::new("n-manifest-0009-zstd-level-0", &["CMP-01"], "a column's zstd level is 0 (allowed: 1..=22)"),
        "invalid",
        "zstd level 0",
        |m| m.schema.columns[TOKENS as usize].compression = Compression::Zstd { level: 0 },
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0010-utf8-column-rank-1",
            &["DT-04", "MAN-04"],
            "the utf8 column `caption` has shape [1]",
        ),
        "invalid",
        "must have rank 0",
        |m| m.schema.columns[CAPTION as usize].shape = vec![Fixed(1)],
    )?;
    manifest_case(
        em,
        Spec::new("n-manifest-0011-column-name-control-char", &["MOD-03"], "a column name ends in a newline"),
        "invalid",
        "control characters",
        |m| m.schema.columns[ID as usize].name = "id\n".into(),
    )?;
    manifest_case(
        em,
        Spec::new("n-manifest-0012-empty-column-name", &["MOD-03"], "a column name is empty"),
        "invalid",
        "non-empty",
        |m| m.schema.columns[ID as usize].name = String::new(),
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0013-segment-fragment-count-differs",
            &["SEG-02"],
            "the manifest's segment reference says 2 fragments; the segment has 1",
        ),
        "invalid",
        "fragment count differs",
        |m| m.segments[0].fragment_count = 2,
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0014-segment-row-count-differs",
            &["SEG-02"],
            "the manifest's segment reference says 7 rows; the segment's fragments hold 6",
        ),
        "invalid",
        "row count differs",
        |m| m.segments[0].row_count = 7,
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0015-metadata-not-sorted",
            &["MOD-04"],
            "the schema metadata lists key `b` before key `a`",
        ),
        "invalid",
        "unique and sorted",
        |m| m.schema.metadata = vec![("b".into(), "1".into()), ("a".into(), "2".into())],
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0016-class-names-duplicate",
            &["KND-08"],
            "the class_label kind of column `id` names the class `cat` twice",
        ),
        "invalid",
        "class names must be unique",
        |m| m.schema.columns[ID as usize].kind = Kind::ClassLabel { names: vec!["cat".into(), "cat".into()] },
    )?;
    manifest_case(
        em,
        Spec::new("n-manifest-0017-image-rank-1", &["KND-02"], "the f32 [4] column `feat` has kind image (hwc)"),
        "invalid",
        "rank must be 3",
        |m| m.schema.columns[FEAT as usize].kind = Kind::Image { layout: tessera::ImageLayout::Hwc },
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0018-embedding-not-float",
            &["KND-07"],
            "the i32 [?] column `tokens` has kind embedding, which needs a float dtype and one fixed dim",
        ),
        "invalid",
        "float dtype with one fixed dim",
        |m| m.schema.columns[TOKENS as usize].kind = Kind::Embedding { metric: tessera::Metric::Cosine },
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0019-audio-sample-rate-0",
            &["KND-04"],
            "the f32 [4] column `feat` has kind audio with sample_rate 0",
        ),
        "invalid",
        "sample_rate must be > 0",
        |m| m.schema.columns[FEAT as usize].kind = Kind::Audio { sample_rate: 0 },
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0020-bbox-wrong-shape",
            &["KND-09"],
            "the i32 [?] column `tokens` has kind bbox, which needs shape [4] or [N, 4]",
        ),
        "invalid",
        "shape [4] or [N, 4]",
        |m| {
            m.schema.columns[TOKENS as usize].kind = Kind::BBox { format: tessera::BBoxFormat::Xyxy, normalized: false }
        },
    )?;
    manifest_variant_case(
        em,
        Spec::new(
            "n-manifest-0021-unknown-dtype-code",
            &["ENC-02", "DT-01", "FLG-06"],
            "a schema column's dtype has variant index 15, which no dtype has (CRC re-sealed)",
        ),
        |m| m.schema.columns[ID as usize].dtype = DType::U8,
        15,
    )?;
    manifest_variant_case(
        em,
        Spec::new(
            "n-manifest-0022-unknown-compression-variant",
            &["ENC-02", "CMP-02", "FLG-06"],
            "a schema column's compression has variant index 4, one past Encoded (CRC re-sealed)",
        ),
        |m| m.schema.columns[ID as usize].compression = Compression::Lz4,
        4,
    )?;
    manifest_variant_case(
        em,
        Spec::new(
            "n-manifest-0023-unknown-kind-variant",
            &["ENC-02", "KND-01", "FLG-06"],
            "a schema column's kind has variant index 11, one past Json (CRC re-sealed)",
        ),
        |m| m.schema.columns[ID as usize].kind = Kind::Mask,
        11,
    )?;
    manifest_variant_case(
        em,
        Spec::new(
            "n-manifest-0033-unknown-statistics-scalar-variant",
            &["STAT-07", "ENC-02"],
            "the manifest's statistics of column `id` have a min whose Scalar variant index is 4, one past Float \
             (CRC re-sealed): statistics are not validated, but they must decode",
        ),
        |m| {
            if let Some(s) = m.stats.iter_mut().find(|s| s.column_id == ID)
                && let Some(tessera::manifest::Scalar::Int(v)) = s.min
            {
                s.min = Some(tessera::manifest::Scalar::UInt(v.cast_unsigned()));
            }
        },
        4,
    )?;
    Ok(())
}
