//! Must-reject cases for deletion vectors, the fragment log, lineage, tags and base
//! resolution. As in `reject.rs`, each starts from a valid dataset and changes exactly one
//! thing, re-sealing what refers to it.

// Flat lists of case definitions, as in `reject.rs`.
#![allow(clippy::too_many_lines)]

use std::path::Path;

use tessera::Dim::Fixed;
use tessera::envelope::{self, ObjectKind};
use tessera::manifest::{Tag, VersionRef};
use tessera::{Column, ColumnData, Compression, DType, Schema, WriteOptions};

use super::data::{Row, batch, column, create};
use super::emit::{Emitter, Spec};
use super::mutate::{Ds, FileLoc, fix_envelope_crc};
use super::options::Clock;
use super::{Result, bail};
use crate::case::Args;

/// Writes every case of this module.
pub(crate) fn all(em: &mut Emitter) -> Result<()> {
    deletions(em)?;
    lineage(em)?;
    log(em)?;
    refs(em)?;
    resolution(em)?;
    Ok(())
}

fn schema3() -> Result<Schema> {
    Ok(Schema::new([
        Column::new("id", DType::I64, &[]),
        Column::new("name", DType::Utf8, &[]).nullable(),
        Column::new("xy", DType::F32, &[Fixed(2)]).with_compression(Compression::Lz4),
    ])?)
}

/// `n` rows of the three columns, ids from `first`; every fourth name is null.
fn rows3(first: i64, n: i64) -> Result<tessera::Batch> {
    let ids: Vec<i64> = (first..first + n).collect();
    let names = column(
        DType::Utf8,
        &[],
        true,
        ids.iter().map(|i| (i % 4 != 3).then(|| Row::text(&format!("row {i}")))).collect(),
    )?;
    let xy: Vec<f32> = ids.iter().flat_map(|&i| [i as f32, 0.25]).collect();
    batch(vec![("id", ColumnData::from_scalars(&ids)), ("name", names), ("xy", ColumnData::from_fixed(&[2], &xy)?)])
}

/// main@1 create; main@2 six rows in fragments 0 and 1 (three rows each, one segment).
fn plain(input: &Path) -> Result<Clock> {
    let mut clock = Clock::new();
    let ds = create(input, schema3()?, &mut clock)?;
    let v2 = ds.append(
        &rows3(0, 6)?,
        "six rows",
        clock.next(WriteOptions { target_file_bytes: 64, ..WriteOptions::default() }),
    )?;
    if v2.fragments().len() != 2 || v2.manifest().segments.len() != 1 {
        bail!("expected two fragments in one segment");
    }
    Ok(clock)
}

/// The plain dataset with main@3 deleting rows 0, 2 and 4: fragment 0's deletion vector holds
/// rows [0, 2], fragment 1's holds [1]; 3 live rows.
fn deleted(input: &Path) -> Result<(Ds, String)> {
    let mut clock = plain(input)?;
    let store = tessera::Store::open(super::data::loc(input)?)?;
    let v2 = tessera::Dataset::open_at(&store, &tessera::At::Latest, tessera::Limits::default())?;
    let v3 = v2.delete_rows(&[0, 2, 4], "delete three rows", &clock.tick())?;
    let dels: Vec<Option<u64>> =
        v3.fragments().iter().map(|f| f.fragment.deletion.as_ref().map(|d| d.deleted_count)).collect();
    if dels != [Some(2), Some(1)] {
        bail!("unexpected deletion vectors {dels:?}");
    }
    let ds = Ds::new(input);
    let m = ds.main()?;
    Ok((ds, m))
}

/// Rewrites the raw bytes of fragment `id`'s deletion vector, re-sealing its CRC, and stores it
/// under its new content name (the reference follows).
fn edit_dv_bytes(input: &Path, id: u64, f: impl FnOnce(&mut Vec<u8>)) -> Result<()> {
    let (ds, m) = deleted(input)?;
    let mut b = ds.read(&ds.deletion_ref(&m, id)?.path)?;
    f(&mut b);
    ds.replace_deletion(&m, id, &b, true)
}

fn deletions(em: &mut Emitter) -> Result<()> {
    em.reject(
        Spec::new(
            "n-deletion-0001-crc-differs-from-ref",
            &["DEL-03", "VAL-08"],
            "fragment 0's deletion vector was re-sealed with other rows ([0, 1] for [0, 2]) under the same name and \
             size; its reference records the old CRC",
        ),
        "invalid",
        "size or CRC differs",
        |input| {
            let (ds, m) = deleted(input)?;
            let d = ds.deletion_ref(&m, 0)?;
            let mut dv: tessera::manifest::DeletionVector =
                envelope::open(ObjectKind::Deletion, &ds.read(&d.path)?, u64::MAX, &d.path)?;
            dv.rows = vec![0, 1];
            ds.replace_deletion(&m, 0, &envelope::seal(ObjectKind::Deletion, &dv)?, false)
        },
    )?;
    em.reject(
        Spec::new(
            "n-deletion-0002-size-differs-from-ref",
            &["DEL-03", "VAL-08"],
            "fragment 1's deletion reference gives a size one byte larger than the object",
        ),
        "invalid",
        "size or CRC differs",
        |input| {
            let (ds, m) = deleted(input)?;
            ds.edit_deletion_ref(&m, 1, |d| d.size += 1)
        },
    )?;
    em.reject(
        Spec::new(
            "n-deletion-0003-rows-not-ascending",
            &["DEL-04", "VAL-08"],
            "fragment 0's deletion vector lists rows [2, 0] (re-sealed, reference updated)",
        ),
        "invalid",
        "deleted rows must ascend",
        |input| {
            let (ds, m) = deleted(input)?;
            ds.edit_deletion(&m, 0, |dv| dv.rows.reverse())
        },
    )?;
    em.reject(
        Spec::new(
            "n-deletion-0004-duplicate-row",
            &["DEL-04"],
            "fragment 0's deletion vector lists row 2 twice ([2, 2]), so the rows do not strictly ascend",
        ),
        "invalid",
        "deleted rows must ascend",
        |input| {
            let (ds, m) = deleted(input)?;
            ds.edit_deletion(&m, 0, |dv| dv.rows = vec![2, 2])
        },
    )?;
    em.reject(
        Spec::new(
            "n-deletion-0005-row-not-below-fragment-rows",
            &["DEL-04", "VAL-08"],
            "fragment 1 has 3 rows; its deletion vector lists row 3",
        ),
        "invalid",
        "stay below the fragment's rows",
        |input| {
            let (ds, m) = deleted(input)?;
            ds.edit_deletion(&m, 1, |dv| dv.rows = vec![3])
        },
    )?;
    em.reject(
        Spec::new(
            "n-deletion-0006-count-differs-from-ref",
            &["DEL-04"],
            "fragment 0's deletion vector lists one row ([0]) while its reference's deleted_count is 2",
        ),
        "invalid",
        "match the count",
        |input| {
            let (ds, m) = deleted(input)?;
            ds.edit_deletion(&m, 0, |dv| {
                dv.rows.pop();
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-deletion-0007-wrong-fragment-id",
            &["DEL-04", "VAL-08"],
            "fragment 1's deletion vector says it belongs to fragment 0",
        ),
        "invalid",
        "belongs to another fragment",
        |input| {
            let (ds, m) = deleted(input)?;
            ds.edit_deletion(&m, 1, |dv| dv.fragment_id = 0)
        },
    )?;
    em.reject(
        Spec::new(
            "n-deletion-0008-missing",
            &["VAL-15", "VAL-08", "VAL-01"],
            "the deletion vector fragment 0 references does not exist",
        ),
        "invalid",
        "does not exist",
        |input| {
            let (ds, m) = deleted(input)?;
            ds.remove(&ds.deletion_ref(&m, 0)?.path)
        },
    )?;
    em.reject(
        Spec::new(
            "n-deletion-0009-deleted-count-zero",
            &["DEL-02", "VAL-07"],
            "fragment 1's deletion reference has deleted_count 0 (the manifest's row_count counts its rows as live)",
        ),
        "invalid",
        "deleted_count must be in 1..=row_count",
        |input| {
            let (ds, m) = deleted(input)?;
            ds.edit_deletion_ref(&m, 1, |d| d.deleted_count = 0)?;
            ds.edit_manifest(&m, |m| m.row_count += 1)
        },
    )?;
    em.reject(
        Spec::new(
            "n-deletion-0010-deleted-count-above-rows",
            &["DEL-02", "VAL-07"],
            "fragment 1 has 3 rows; its deletion reference has deleted_count 4",
        ),
        "invalid",
        "deleted_count must be in 1..=row_count",
        |input| {
            let (ds, m) = deleted(input)?;
            ds.edit_deletion_ref(&m, 1, |d| d.deleted_count = 4)
        },
    )?;
    em.reject(
        Spec::new(
            "n-deletion-0011-path-traversal",
            &["DEL-02", "LAY-09", "SEC-02"],
            "fragment 0's deletion reference path is `deletions/../../x.tsx`",
        ),
        "invalid",
        "[LAY-09]",
        |input| {
            let (ds, m) = deleted(input)?;
            ds.edit_deletion_ref(&m, 0, |d| d.path = "deletions/../../x.tsx".into())
        },
    )?;
    em.reject(
        Spec::new(
            "n-deletion-0012-path-9-segments",
            &["DEL-02", "LIM-12", "LIM-15"],
            "fragment 0's deletion reference path has 9 segments",
        ),
        "limit",
        "path segments",
        |input| {
            let (ds, m) = deleted(input)?;
            ds.edit_deletion_ref(&m, 0, |d| d.path = "deletions/a/b/c/d/e/f/g/x.tsx".into())
        },
    )?;
    em.reject(
        Spec::new(
            "n-deletion-0013-bad-magic",
            &["DEL-01", "ENV-02", "ENV-01"],
            "fragment 0's deletion vector carries the index segment magic \\x89TSI (CRC and reference re-sealed)",
        ),
        "malformed",
        "bad magic",
        |input| {
            edit_dv_bytes(input, 0, |b| {
                b[3] = b'I';
                fix_envelope_crc(b);
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-deletion-0014-trailing-body-byte",
            &["DEL-01", "ENV-07", "ENC-03"],
            "fragment 0's deletion vector body has one byte after the encoded struct (body_len, CRC and reference \
             agree)",
        ),
        "malformed",
        "trailing bytes",
        |input| {
            edit_dv_bytes(input, 0, |b| {
                let n = b.len();
                b.insert(n - 4, 0);
                let len = (n - 4 + 1 - 24) as u64;
                b[16..24].copy_from_slice(&len.to_le_bytes());
                fix_envelope_crc(b);
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-deletion-0015-body-len-huge",
            &["DEL-01", "LIM-05", "ENV-04", "LIM-15"],
            "fragment 0's deletion vector declares a body of 2^40 bytes (CRC and reference re-sealed)",
        ),
        "limit",
        "body length",
        |input| {
            edit_dv_bytes(input, 0, |b| {
                b[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
                fix_envelope_crc(b);
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-deletion-0016-truncated",
            &["ENV-05", "DEL-01"],
            "fragment 1's deletion vector is cut to 20 bytes (the reference follows the new size)",
        ),
        "malformed",
        "shorter than the envelope",
        |input| edit_dv_bytes(input, 1, |b| b.truncate(20)),
    )?;
    em.reject(
        Spec::new(
            "u-deletion-0001-major-2",
            &["FLG-01", "DEL-01"],
            "fragment 0's deletion vector says format major version 2 (CRC and reference re-sealed)",
        ),
        "unsupported",
        "format major version 2",
        |input| {
            edit_dv_bytes(input, 0, |b| {
                b[8] = 2;
                fix_envelope_crc(b);
            })
        },
    )?;
    Ok(())
}

/// A manifest case on the plain dataset: one change to main@2.
fn lineage_case(
    em: &mut Emitter,
    spec: Spec<'_>,
    hint: &str,
    f: impl FnOnce(&mut tessera::manifest::Manifest),
) -> Result<()> {
    em.reject(spec, "invalid", hint, |input| {
        plain(input)?;
        let ds = Ds::new(input);
        ds.edit_manifest(&ds.main()?, f)
    })
}

fn vref(branch: &str, version: u64) -> VersionRef {
    VersionRef { branch: branch.into(), version }
}

fn lineage(em: &mut Emitter) -> Result<()> {
    const FIT: &str = "do not fit the version's place in its branch";
    lineage_case(
        em,
        Spec::new("n-manifest-0024-version-2-without-parent", &["MAN-02"], "main@2 has no parent and no base"),
        FIT,
        |m| m.parent = None,
    )?;
    lineage_case(
        em,
        Spec::new("n-manifest-0025-parent-is-itself", &["MAN-02"], "main@2's parent is main@2, not main@1"),
        FIT,
        |m| m.parent = Some(vref("main", 2)),
    )?;
    lineage_case(
        em,
        Spec::new("n-manifest-0026-parent-on-other-branch", &["MAN-02"], "main@2's parent is dev@1, not main@1"),
        FIT,
        |m| m.parent = Some(vref("dev", 1)),
    )?;
    lineage_case(
        em,
        Spec::new(
            "n-manifest-0027-base-version-differs",
            &["MAN-02"],
            "main@2 has base dev@1: a base must have the manifest's own version",
        ),
        FIT,
        |m| m.base = Some(vref("dev", 1)),
    )?;
    lineage_case(
        em,
        Spec::new(
            "n-manifest-0028-base-on-same-branch",
            &["MAN-02"],
            "main@2 has base main@2: a base must name another branch",
        ),
        FIT,
        |m| m.base = Some(vref("main", 2)),
    )?;
    em.reject(
        Spec::new(
            "n-manifest-0029-version-1-with-parent",
            &["MAN-02"],
            "main@1 (no base) has parent dev@1; a first version without a base has no parent",
        )
        .with_args(Args { version: Some(1), ..Args::default() }),
        "invalid",
        FIT,
        |input| {
            plain(input)?;
            Ds::new(input).edit_manifest("branches/main/00000000000000000001.tsm", |m| m.parent = Some(vref("dev", 1)))
        },
    )?;
    lineage_case(
        em,
        Spec::new("n-manifest-0030-merged-version-0", &["MAN-02", "LAY-08"], "main@2's merged names main@0"),
        "bad version reference",
        |m| m.merged = Some(vref("main", 0)),
    )?;
    lineage_case(
        em,
        Spec::new(
            "n-manifest-0031-parent-branch-name-invalid",
            &["MAN-02", "LAY-07"],
            "main@2's parent names the branch `.hidden`, which LAY-07 does not allow",
        ),
        "bad version reference",
        |m| m.parent = Some(vref(".hidden", 1)),
    )?;
    em.reject(
        Spec::new(
            "n-manifest-0034-branch-first-parent-name-invalid",
            &["MAN-02", "LAY-07"],
            "dev@3, the first manifest of branch dev (base main@3), has a parent naming the branch `.hidden`: \
             a base frees parent from its relation to the manifest's own branch and version, not from the rule \
             that every VersionRef is well formed",
        )
        .with_args(Args { branch: Some("dev".into()), ..Args::default() }),
        "invalid",
        "bad version reference",
        |input| {
            branched(input)?;
            Ds::new(input)
                .edit_manifest("branches/dev/00000000000000000003.tsm", |m| m.parent = Some(vref(".hidden", 2)))
        },
    )?;
    em.reject(
        Spec::new(
            "n-manifest-0032-version-1-parent-is-itself",
            &["MAN-02"],
            "main@1 (no base) names itself as its parent: a reader that follows parent links without checking \
             them walks this cycle forever",
        )
        .with_args(Args { version: Some(1), ..Args::default() })
        .found_by("TFZ-4"),
        "invalid",
        FIT,
        |input| {
            plain(input)?;
            Ds::new(input).edit_manifest("branches/main/00000000000000000001.tsm", |m| m.parent = Some(vref("main", 1)))
        },
    )?;
    Ok(())
}

fn log(em: &mut Emitter) -> Result<()> {
    em.reject(
        Spec::new(
            "n-segment-0010-id-removed-and-listed",
            &["SEG-03", "VAL-07"],
            "the segment lists fragment 0 and also removes id 0",
        ),
        "invalid",
        "both removed and listed",
        |input| {
            plain(input)?;
            let ds = Ds::new(input);
            ds.edit_segment(&ds.main()?, 0, |s| s.removed = vec![0])
        },
    )?;
    em.reject(
        Spec::new(
            "n-segment-0011-removed-ids-descending",
            &["SEG-03"],
            "the segment removes ids [7, 5] (neither listed, both below next_fragment_id 10)",
        ),
        "invalid",
        "fragment ids must ascend",
        |input| {
            plain(input)?;
            let ds = Ds::new(input);
            let m = ds.main()?;
            ds.edit_segment(&m, 0, |s| s.removed = vec![7, 5])?;
            ds.edit_manifest(&m, |m| m.next_fragment_id = 10)
        },
    )?;
    em.reject(
        Spec::new(
            "n-segment-0012-removed-id-not-below-next",
            &["SEG-03"],
            "the segment removes id 2 while the manifest's next_fragment_id is 2",
        ),
        "invalid",
        "below next_fragment_id",
        |input| {
            plain(input)?;
            let ds = Ds::new(input);
            ds.edit_segment(&ds.main()?, 0, |s| s.removed = vec![2])
        },
    )?;
    em.reject(
        Spec::new(
            "n-limits-0014-fragment-rows-over-2-24",
            &["SEG-04", "LIM-10", "LIM-15"],
            "fragment 0 says 2^24 + 1 rows (the segment reference and the manifest's row_count agree)",
        ),
        "limit",
        "rows",
        |input| {
            plain(input)?;
            let ds = Ds::new(input);
            let m = ds.main()?;
            let extra = (1u64 << 24) + 1 - 3;
            ds.edit_segment(&m, 0, |s| s.fragments[0].row_count = (1 << 24) + 1)?;
            ds.edit_manifest(&m, |m| {
                m.segments[0].row_count += extra;
                m.row_count += extra;
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-path-0012-limit-checked-before-grammar",
            &["LAY-10", "LIM-12", "MAN-07"],
            "a segment path both has 9 segments and starts with `..`: the segment count is checked first, so the \
             class is limit",
        ),
        "limit",
        "path segments",
        |input| {
            plain(input)?;
            let ds = Ds::new(input);
            ds.edit_manifest(&ds.main()?, |m| m.segments[0].path = "../a/b/c/d/e/f/g/x.tsi".into())
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0037-fault-in-second-fragment",
            &["VAL-01", "VAL-03", "DF-26"],
            "the first fragment is intact; a page of the second fragment's data file has one flipped byte (block \
             CRC not re-sealed), so reading the version must fail",
        ),
        "malformed",
        "CRC-32 mismatch",
        |input| {
            plain(input)?;
            let ds = Ds::new(input);
            ds.edit_data_file(&ds.main()?, FileLoc { seg: 0, frag: 1, file: 0 }, |p, f| {
                let b = f.columns[0].pages[0].block;
                p[b.offset as usize] ^= 0x01;
                Ok(())
            })
        },
    )?;
    Ok(())
}

/// The plain dataset tagged `t1` at main@2, with the tag record changed by `f` and re-sealed.
fn edit_tag(input: &Path, f: impl FnOnce(&mut Tag)) -> Result<()> {
    let mut clock = plain(input)?;
    let store = tessera::Store::open(super::data::loc(input)?)?;
    let v2 = tessera::Dataset::open_at(&store, &tessera::At::Latest, tessera::Limits::default())?;
    v2.create_tag("t1", "a tag", &clock.tick())?;
    let ds = Ds::new(input);
    let mut tag: Tag = envelope::open(ObjectKind::Tag, &ds.read("tags/t1.tst")?, u64::MAX, "tag")?;
    f(&mut tag);
    ds.write("tags/t1.tst", &envelope::seal(ObjectKind::Tag, &tag)?)
}

fn refs(em: &mut Emitter) -> Result<()> {
    let t1 = || Args { tag: Some("t1".into()), ..Args::default() };
    em.reject(
        Spec::new(
            "n-ref-0005-tag-target-missing",
            &["REF-02", "VAL-13", "VAL-15"],
            "tag t1 names main@9, which does not exist (a tag's target is loaded directly, without base resolution)",
        )
        .with_args(t1()),
        "invalid",
        "tagged version does not exist",
        |input| edit_tag(input, |t| t.target.version = 9),
    )?;
    em.reject(
        Spec::new("n-ref-0006-tag-target-version-0", &["REF-01", "VAL-13"], "tag t1 names main@0").with_args(t1()),
        "invalid",
        "version 0",
        |input| edit_tag(input, |t| t.target.version = 0),
    )?;
    Ok(())
}

/// main@1 create; main@2 three rows; main@3 two rows; branch `dev` from main@3 (dev@3, base
/// main@3).
fn branched(input: &Path) -> Result<()> {
    let mut clock = Clock::new();
    let ds = create(input, schema3()?, &mut clock)?;
    let v2 = ds.append(&rows3(0, 3)?, "three rows", clock.tick())?;
    let v3 = v2.append(&rows3(3, 2)?, "two rows", clock.tick())?;
    v3.create_branch("dev", &clock.tick())?;
    Ok(())
}

fn resolution(em: &mut Emitter) -> Result<()> {
    em.reject(
        Spec::new(
            "n-version-0001-base-promises-missing-version",
            &["VER-03", "VAL-15"],
            "dev@2 resolves through dev's base (main@3) to main@2, whose manifest has been deleted: the base \
             promised it, so the result is invalid, not not_found",
        )
        .with_args(Args { branch: Some("dev".into()), version: Some(2), ..Args::default() }),
        "invalid",
        "base version 2 is missing",
        |input| {
            branched(input)?;
            Ds::new(input).remove("branches/main/00000000000000000002.tsm")
        },
    )?;
    em.reject(
        Spec::new(
            "n-version-0002-base-cycle",
            &["VER-03"],
            "dev@1 resolves to main (dev's base is main@3); main@1 is gone and main's earliest manifest, main@2, \
             has base dev@2 (re-sealed): resolution would visit dev again",
        )
        .with_args(Args { branch: Some("dev".into()), version: Some(1), ..Args::default() }),
        "invalid",
        "cycle",
        |input| {
            branched(input)?;
            let ds = Ds::new(input);
            ds.remove("branches/main/00000000000000000001.tsm")?;
            ds.edit_manifest("branches/main/00000000000000000002.tsm", |m| {
                m.base = Some(vref("dev", 2));
            })
        },
    )?;
    Ok(())
}
