//! Valid cases whose datasets went through more than appends: deletion vectors, schema
//! evolution, updates, compaction, merges, restores, and a few layout rules a reader must
//! follow (opaque object names, ignored keys, garbage statistics).
//!
//! A case that reads the result of an operation of SPEC.md §15 cites that operation's
//! requirement: the case is the evidence that readers read what the operation produces.

// Flat lists of case definitions, as in `valid.rs`.
#![allow(clippy::too_many_lines)]

use std::path::Path;

use tessera::Dim::{Fixed, Ragged};
use tessera::manifest::{ColumnStats, Scalar};
use tessera::{At, Column, ColumnData, Compression, DType, Dataset, Kind, Schema, WriteOptions};

use super::data::{Row, batch, column, create};
use super::emit::{Emitter, Spec};
use super::mutate::Ds;
use super::options::Clock;
use super::{Result, bail};
use crate::case::Args;

/// Writes every case of this module.
pub(crate) fn all(em: &mut Emitter) -> Result<()> {
    deletions(em)?;
    evolution(em)?;
    merges(em)?;
    layout(em)?;
    Ok(())
}

fn at(version: u64) -> Args {
    Args { version: Some(version), ..Args::default() }
}

/// Three columns (`id` i64, `name` utf8 nullable, `xy` f32 [2]) and `n` rows starting at id
/// `first`; every fourth name is null.
fn rows3(first: i64, n: i64) -> Result<tessera::Batch> {
    let ids: Vec<i64> = (first..first + n).collect();
    let names = column(
        DType::Utf8,
        &[],
        true,
        ids.iter().map(|i| (i % 4 != 3).then(|| Row::text(&format!("row {i}")))).collect(),
    )?;
    let xy: Vec<f32> = ids.iter().flat_map(|&i| [i as f32, -0.5 * i as f32]).collect();
    batch(vec![("id", ColumnData::from_scalars(&ids)), ("name", names), ("xy", ColumnData::from_fixed(&[2], &xy)?)])
}

fn schema3() -> Result<Schema> {
    Ok(Schema::new([
        Column::new("id", DType::I64, &[]),
        Column::new("name", DType::Utf8, &[]).nullable(),
        Column::new("xy", DType::F32, &[Fixed(2)]).with_compression(Compression::Lz4),
    ])?)
}

/// main@1 create; main@2 twelve rows in four fragments of three rows.
fn four_fragments(input: &Path) -> Result<(Dataset, Clock)> {
    let mut clock = Clock::new();
    let ds = create(input, schema3()?, &mut clock)?;
    let opts = WriteOptions { target_file_bytes: 64, ..WriteOptions::default() };
    let v2 = ds.append(&rows3(0, 12)?, "twelve rows", clock.next(opts))?;
    if v2.fragments().len() != 4 || v2.fragments().iter().any(|f| f.fragment.row_count != 3) {
        bail!("expected four fragments of three rows, got {}", v2.fragments().len());
    }
    Ok((v2, clock))
}

/// The deletion history the deletion cases read:
/// main@2 twelve rows in fragments 0..=3; main@3 deletes rows 1, 4, 5 (fragments 0 and 1);
/// main@4 deletes every row of fragment 2 (global rows 3..=5 of main@3), so it is removed;
/// main@5 deletes one more row of fragment 0, whose deletion vector then holds the union.
fn deletion_history(input: &Path) -> Result<()> {
    let (v2, mut clock) = four_fragments(input)?;
    let v3 = v2.delete_rows(&[1, 4, 5], "delete three rows", &clock.tick())?;
    let v4 = v3.delete_rows(&[3, 4, 5], "delete fragment 2", &clock.tick())?;
    if v4.fragments().iter().any(|f| f.fragment.id == 2) || v4.fragments().len() != 3 {
        bail!("fragment 2 should be gone");
    }
    let v5 = v4.delete_rows(&[0], "delete another row of fragment 0", &clock.tick())?;
    let f0 = &v5.fragments()[0].fragment;
    if f0.id != 0 || f0.deletion.as_ref().map(|d| d.deleted_count) != Some(2) {
        bail!("fragment 0 should have two deleted rows");
    }
    Ok(())
}

fn deletions(em: &mut Emitter) -> Result<()> {
    em.valid(
        Spec::new(
            "v-deletion-0001-rows-deleted",
            &["DEL-01", "DEL-04", "DEL-05", "MAN-09", "MAN-06", "VAL-08"],
            "main@3 of a deletion history: rows 1, 4 and 5 of twelve deleted through deletion vectors on \
             fragments 0 and 1; the data files are unchanged",
        )
        .with_args(at(3)),
        deletion_history,
    )?;
    em.valid(
        Spec::new(
            "v-deletion-0002-fully-deleted-fragment-removed",
            &["DEL-06", "SEG-08", "MAN-09"],
            "main@4: every row of fragment 2 deleted, so the commit's segment removes the fragment's id",
        )
        .with_args(at(4)),
        deletion_history,
    )?;
    em.valid(
        Spec::new(
            "v-deletion-0003-deletes-accumulate",
            &["DEL-06", "DEL-04", "DEL-05"],
            "main@5, the latest: a second delete on fragment 0 writes a deletion vector holding both deleted rows",
        ),
        deletion_history,
    )?;
    em.valid(
        Spec::new(
            "v-deletion-0004-before-deletes",
            &["VER-03", "DEL-05"],
            "main@2 of the deletion history: time travel to before any delete returns all twelve rows",
        )
        .with_args(at(2)),
        deletion_history,
    )?;
    em.valid(
        Spec::new(
            "v-deletion-0005-every-row-deleted",
            &["DEL-06", "MAN-06", "SEG-08"],
            "every row of a two-fragment dataset deleted: both fragments removed, 0 rows",
        ),
        |input| {
            let mut clock = Clock::new();
            let ds = create(input, schema3()?, &mut clock)?;
            let opts = WriteOptions { target_file_bytes: 64, ..WriteOptions::default() };
            let v2 = ds.append(&rows3(0, 6)?, "six rows", clock.next(opts))?;
            let v3 = v2.delete_rows(&[0, 1, 2, 3, 4, 5], "delete everything", &clock.tick())?;
            if v3.row_count() != 0 || !v3.fragments().is_empty() {
                bail!("expected an empty version");
            }
            Ok(())
        },
    )?;
    em.valid(
        Spec::new(
            "v-deletion-0006-deleted-rows-in-later-pages",
            &["DEL-05", "VAL-01", "MAN-09"],
            "one fragment of 40 rows stored in pages of 64 raw bytes; rows deleted at the start, in the middle and \
             at the end, so some pages hold only deleted rows",
        ),
        |input| {
            let mut clock = Clock::new();
            let schema = Schema::new([
                Column::new("id", DType::U32, &[]),
                Column::new("seq", DType::I16, &[Ragged]).with_compression(Compression::Zstd { level: 1 }),
            ])?;
            let ds = create(input, schema, &mut clock)?;
            let ids: Vec<u32> = (0..40).collect();
            let seqs: Vec<Vec<i16>> = (0..40).map(|i| (0..i % 5).map(|j| i * 10 + j).collect()).collect();
            let seqs: Vec<&[i16]> = seqs.iter().map(Vec::as_slice).collect();
            let b = batch(vec![("id", ColumnData::from_scalars(&ids)), ("seq", ColumnData::from_sequences(&seqs))])?;
            let v2 =
                ds.append(&b, "forty rows", clock.next(WriteOptions { page_bytes: 64, ..WriteOptions::default() }))?;
            let doomed: Vec<u64> = (0..6).chain(17..25).chain(35..40).collect();
            v2.delete_rows(&doomed, "delete three runs", &clock.tick())?;
            Ok(())
        },
    )?;
    Ok(())
}

/// The schema evolution history:
/// main@2 twelve rows in four fragments; main@3 deletes row 4; main@4 adds `score` (f64, one value
/// per live row); main@5 adds `note` (nullable utf8, all null); main@6 drops `xy`; main@7
/// renames `name` to `label`; main@8 adds a new `xy` (u8 [?], nullable, all null): another
/// column under a dropped column's name.
fn evolution_history(input: &Path) -> Result<()> {
    let (v2, mut clock) = four_fragments(input)?;
    let v3 = v2.delete_rows(&[4], "delete row 4", &clock.tick())?;
    let scores: Vec<f64> = (0..v3.row_count()).map(|i| i as f64 * 1.5 - 3.0).collect();
    let v4 = v3.add_column(
        Column::new("score", DType::F64, &[]),
        Some(&ColumnData::from_scalars(&scores)),
        "add score",
        &clock.tick(),
    )?;
    let v5 = v4.add_column(
        Column::new("note", DType::Utf8, &[]).with_kind(Kind::Text).nullable(),
        None,
        "add note",
        &clock.tick(),
    )?;
    let v6 = v5.drop_column("xy", "drop xy", &clock.tick())?;
    let v7 = v6.rename_column("name", "label", "rename name to label", &clock.tick())?;
    let v8 = v7.add_column(Column::new("xy", DType::U8, &[Ragged]).nullable(), None, "a new xy", &clock.tick())?;
    let ids: Vec<u32> = v8.schema().columns.iter().map(|c| c.id).collect();
    if ids != [0, 1, 3, 4, 5] || v8.manifest().next_column_id != 6 {
        bail!("unexpected column ids {ids:?}");
    }
    Ok(())
}

/// The update and compaction history:
/// main@2 twelve rows in four fragments (`id`, `name` in one file, `xy` in another); main@3
/// updates `name` of rows 1 and 7; main@4 updates `xy` of every row of fragment 0 (its `xy`
/// file is superseded); main@5 deletes rows 2 and 9; main@6 compacts with a target of 8 rows.
fn update_history(input: &Path) -> Result<()> {
    let mut clock = Clock::new();
    let ds = create(input, schema3()?, &mut clock)?;
    let opts = WriteOptions {
        target_file_bytes: 64,
        column_groups: vec![vec!["id".into(), "name".into()]],
        ..WriteOptions::default()
    };
    let v2 = ds.append(&rows3(0, 12)?, "twelve rows", clock.next(opts))?;
    if v2.fragments().len() != 4 || v2.fragments().iter().any(|f| f.fragment.files.len() != 2) {
        bail!("expected four fragments of two files");
    }
    let names = column(DType::Utf8, &[], true, vec![Some(Row::text("updated one")), None])?;
    let v3 = v2.update_rows(&[1, 7], &batch(vec![("name", names)])?, "update two names", &clock.tick())?;
    let f1 = &v3.fragments()[0].fragment;
    if f1.files.len() != 3 || f1.files[0].column_ids != [0] {
        bail!("the update should leave fragment 0 with three files, the first listing only column 0");
    }
    let old_xy = f1.files.iter().find(|f| f.column_ids == [2]).map(|f| f.path.clone());
    let xy = ColumnData::from_fixed(&[2], &[9.0f32, 9.5, 10.0, 10.5, 11.0, 11.5])?;
    let v4 = v3.update_rows(&[0, 1, 2], &batch(vec![("xy", xy)])?, "update xy of fragment 0", &clock.tick())?;
    let f0 = &v4.fragments()[0].fragment;
    if old_xy.is_none() || f0.files.iter().any(|f| Some(&f.path) == old_xy.as_ref()) || f0.files.len() != 3 {
        bail!("the old xy file of fragment 0 should be dropped");
    }
    let v5 = v4.delete_rows(&[2, 9], "delete two rows", &clock.tick())?;
    let v6 = v5.compact(8, "compact", &clock.tick())?;
    if v6.fragments().len() >= v5.fragments().len() || v6.fragments().iter().any(|f| f.fragment.deletion.is_some()) {
        bail!("compaction should merge fragments and drop deletion vectors");
    }
    Ok(())
}

fn evolution(em: &mut Emitter) -> Result<()> {
    let evo: [(&str, &[&str], &str, Option<u64>); 8] = [
        (
            "v-evolve-0001-add-column-with-values",
            &["EVO-01", "SEG-06", "DF-13", "MOD-02", "DEL-05"],
            "main@4 of the evolution history: column `score` added with one value per live row; each fragment got \
             a data file holding only the new column, with a placeholder for fragment 1's deleted row",
            Some(4),
        ),
        (
            "v-evolve-0002-add-nullable-column-all-null",
            &["EVO-01", "MOD-05", "DF-15"],
            "main@5: nullable column `note` added without values, so every row is null",
            Some(5),
        ),
        (
            "v-evolve-0003-before-add-column",
            &["VER-03", "EVO-01"],
            "main@3, before the columns were added: a deleted row and the original three columns",
            Some(3),
        ),
        (
            "v-evolve-0004-drop-column",
            &["EVO-02", "SEG-06", "STAT-01"],
            "main@6: column `xy` dropped; data files, column_ids and fragment statistics still name its id, and \
             readers ignore them",
            Some(6),
        ),
        (
            "v-evolve-0005-before-drop-column",
            &["EVO-02", "VER-03"],
            "main@5: time travel to before the drop still reads column `xy`",
            Some(5),
        ),
        (
            "v-evolve-0006-rename-column",
            &["EVO-03", "MOD-03"],
            "main@7: column `name` renamed to `label`; its id and data stay",
            Some(7),
        ),
        (
            "v-evolve-0007-readd-dropped-name",
            &["EVO-02", "MOD-02", "EVO-01"],
            "main@8, the latest: a new column named `xy` (id 5, u8 [?], all null) while the dropped `xy` (id 2) \
             still sits in the old data files",
            None,
        ),
        (
            "v-evolve-0008-time-travel-to-create",
            &["VER-03", "VER-01"],
            "main@1 of the evolution history: the original schema and no rows",
            Some(1),
        ),
    ];
    for (id, reqs, description, version) in evo {
        let mut spec = Spec::new(id, reqs, description);
        spec.args = version.map(at);
        em.valid(spec, evolution_history)?;
    }
    let upd: [(&str, &[&str], &str, Option<u64>); 5] = [
        (
            "v-evolve-0009-update-column",
            &["EVO-04", "DF-13", "SEG-06"],
            "main@3 of the update history: `name` of rows 1 and 7 updated; the old files still hold `name`, but \
             their references no longer list it",
            Some(3),
        ),
        (
            "v-evolve-0010-update-supersedes-file",
            &["EVO-04", "SEG-06"],
            "main@4: `xy` of every row of fragment 0 updated, so the fragment's old `xy` file is no longer referenced",
            Some(4),
        ),
        ("v-evolve-0011-before-update", &["EVO-04", "VER-03"], "main@2: time travel to before the updates", Some(2)),
        (
            "v-evolve-0012-compaction",
            &["EVO-05", "MAN-09", "SEG-08"],
            "main@6, the latest: small fragments and fragments with deletion vectors compacted into fragments of \
             at most 8 live rows, same rows in the same order",
            None,
        ),
        (
            "v-evolve-0013-before-compaction",
            &["EVO-05", "DEL-05", "VER-03"],
            "main@5: the deletes before the compaction, through deletion vectors on updated fragments",
            Some(5),
        ),
    ];
    for (id, reqs, description, version) in upd {
        let mut spec = Spec::new(id, reqs, description);
        spec.args = version.map(at);
        em.valid(spec, update_history)?;
    }
    Ok(())
}

/// main@2 four rows (fragment 0); branch `dev` from main@2; dev@3 appends three rows
/// (fragment 1 of dev); dev@4 deletes dev's row 5 (in fragment 1) and row 0 (fragment 0);
/// main@3 appends two rows (fragment 1 of main); main@4 merges dev@4: fragment 0 replaced by
/// dev's, dev's fragment 1 appended as fragment 2 with its deletion vector renumbered.
fn merge_history(input: &Path) -> Result<()> {
    let mut clock = Clock::new();
    let ds = create(input, schema3()?, &mut clock)?;
    let v2 = ds.append(&rows3(0, 4)?, "four rows", clock.tick())?;
    let dev2 = v2.create_branch("dev", &clock.tick())?;
    let dev3 = dev2.append(&rows3(100, 3)?, "dev rows", clock.tick())?;
    let dev4 = dev3.delete_rows(&[5, 0], "dev deletes", &clock.tick())?;
    let v3 = v2.append(&rows3(200, 2)?, "main rows", clock.tick())?;
    let merged = dev4.merge_into("main", "merge dev", &clock.tick())?;
    let m = merged.dataset.manifest();
    if merged.fast_forward
        || m.version != 4
        || m.merged.as_ref().map(|r| (r.branch.as_str(), r.version)) != Some(("dev", 4))
    {
        bail!("expected a three-way merge commit main@4 with merged = dev@4");
    }
    let f2 = merged.dataset.fragments().iter().find(|f| f.fragment.id == 2);
    if f2.and_then(|f| f.fragment.deletion.as_ref()).is_none() {
        bail!("the merged-in fragment should carry a deletion vector");
    }
    drop(v3);
    Ok(())
}

fn merges(em: &mut Emitter) -> Result<()> {
    em.valid(
        Spec::new(
            "v-merge-0001-three-way-merge",
            &["MRG-01", "MRG-02", "DEL-04", "MAN-02"],
            "main@4, a merge commit (merged = dev@4): dev's change to fragment 0 taken over, and dev's fragment 1 \
             appended as fragment 2 with its deletion vector rewritten for the new id",
        ),
        merge_history,
    )?;
    em.valid(
        Spec::new(
            "v-merge-0002-merge-source",
            &["MRG-01", "VER-03", "DEL-05"],
            "dev@4, the merge's source: its fragment 1 with the deletion vector of the old id",
        )
        .with_args(Args { branch: Some("dev".into()), ..Args::default() }),
        merge_history,
    )?;
    em.valid(
        Spec::new(
            "v-merge-0003-fast-forward",
            &["MRG-01", "MAN-02", "SEG-09"],
            "main@3, a fast-forward merge of dev@3 (dev branched from main@2 and appended): a copy of dev@3's \
             manifest with parent main@2 and merged dev@3",
        ),
        |input| {
            let mut clock = Clock::new();
            let ds = create(input, schema3()?, &mut clock)?;
            let v2 = ds.append(&rows3(0, 3)?, "three rows", clock.tick())?;
            let dev2 = v2.create_branch("dev", &clock.tick())?;
            let dev3 = dev2.append(&rows3(10, 2)?, "dev rows", clock.tick())?;
            let out = dev3.merge_into("main", "fast-forward", &clock.tick())?;
            if !out.fast_forward || out.dataset.version() != 3 {
                bail!("expected a fast-forward to main@3");
            }
            Ok(())
        },
    )?;
    em.valid(
        Spec::new(
            "v-version-0008-restored-version",
            &["VER-13", "MAN-02"],
            "main@4 restores main@2: a copy of its manifest on top of main@3, with main@2's rows",
        ),
        |input| {
            let mut clock = Clock::new();
            let ds = create(input, schema3()?, &mut clock)?;
            let v2 = ds.append(&rows3(0, 3)?, "three rows", clock.tick())?;
            let v3 = v2.append(&rows3(3, 3)?, "three more", clock.tick())?;
            let v4 = v2.restore("restore main@2", &clock.tick())?;
            if v4.version() != 4 || v4.row_count() != 3 || v3.row_count() != 6 {
                bail!("unexpected restore");
            }
            Ok(())
        },
    )?;
    Ok(())
}

fn layout(em: &mut Emitter) -> Result<()> {
    em.valid(
        Spec::new(
            "v-layout-0009-merged-segment-carries-removal",
            &["SEG-08", "SEG-10"],
            "two appends and a delete of all of fragment 0, merged in tiers into one segment that lists fragment 1 \
             and removes id 0, which is absent where the log starts: the removal does nothing",
        ),
        |input| {
            let mut clock = Clock::new();
            let ds = create(input, schema3()?, &mut clock)?;
            let v2 = ds.append(&rows3(0, 2)?, "fragment 0", clock.tick())?;
            let v3 = v2.append(&rows3(2, 2)?, "fragment 1", clock.tick())?;
            let v4 = v3.delete_rows(&[0, 1], "delete fragment 0", &clock.tick())?;
            let ds = Ds::new(input);
            let first = ds.segment(&ds.segment_key(&ds.main()?, 0)?)?;
            if v4.manifest().segments.len() != 1 || first.removed != [0] || first.fragments.len() != 1 {
                bail!("expected one merged segment listing fragment 1 and removing 0");
            }
            Ok(())
        },
    )?;
    em.valid(
        Spec::new(
            "v-layout-0010-opaque-object-names",
            &["LAY-03", "LAY-09"],
            "the latest version's data files, index segment and deletion vector are stored under names that are \
             not content hashes and not under data/, index/ or deletions/ (e.g. `x/parts/file-0.bin`)",
        ),
        |input| {
            let mut clock = Clock::new();
            let ds = create(input, schema3()?, &mut clock)?;
            let opts = WriteOptions { target_file_bytes: 64, ..WriteOptions::default() };
            let v2 = ds.append(&rows3(0, 6)?, "six rows", clock.next(opts))?;
            v2.delete_rows(&[1], "delete a row", &clock.tick())?;
            rename_objects(input)
        },
    )?;
    em.valid(
        Spec::new(
            "v-layout-0011-non-version-keys-ignored",
            &["LAY-08", "LAY-05", "VER-02"],
            "branches/main also holds 00000000000000000000.tsm (version 0) and 99999999999999999999.tsm (above \
             2^64-1), both garbage: neither names a version, so the latest is main@2",
        ),
        |input| {
            let mut clock = Clock::new();
            let ds = create(input, schema3()?, &mut clock)?;
            ds.append(&rows3(0, 3)?, "three rows", clock.tick())?;
            let ds = Ds::new(input);
            ds.write("branches/main/00000000000000000000.tsm", b"version zero is not a version")?;
            ds.write("branches/main/99999999999999999999.tsm", b"above u64::MAX")
        },
    )?;
    em.valid(
        Spec::new(
            "v-version-0009-timestamps-not-ordered",
            &["MAN-08", "VER-02"],
            "main@3's timestamp is older than main@1's and main@2's (manifests re-sealed): versions are ordered by \
             number, so the latest is still main@3",
        ),
        |input| {
            let mut clock = Clock::new();
            let ds = create(input, schema3()?, &mut clock)?;
            let v2 = ds.append(&rows3(0, 2)?, "two rows", clock.tick())?;
            v2.append(&rows3(2, 1)?, "one row", clock.tick())?;
            let ds = Ds::new(input);
            ds.edit_manifest("branches/main/00000000000000000003.tsm", |m| m.timestamp_ms = 1_000)?;
            ds.edit_manifest("branches/main/00000000000000000001.tsm", |m| m.timestamp_ms = u64::MAX)
        },
    )?;
    em.valid_unverified(
        Spec::new(
            "v-stats-0001-broken-statistics-ignored",
            &["STAT-07"],
            "fragment and manifest statistics that break every statistics rule (min above max, NaN, wrong Scalar \
             variant, min on a utf8 column, wrong null counts, ids out of order, an unknown column id): readers \
             must not reject the version or change its values",
        ),
        |input| {
            let mut clock = Clock::new();
            let schema = Schema::new([
                Column::new("i", DType::I32, &[]),
                Column::new("f", DType::F32, &[]),
                Column::new("t", DType::Utf8, &[]).nullable(),
            ])?;
            let ds = create(input, schema, &mut clock)?;
            let t = column(DType::Utf8, &[], true, vec![Some(Row::text("a")), None, Some(Row::text("c"))])?;
            let b = batch(vec![
                ("i", ColumnData::from_scalars(&[1i32, -5, 9])),
                ("f", ColumnData::from_scalars(&[0.5f32, f32::NAN, -2.0])),
                ("t", t),
            ])?;
            ds.append(&b, "three rows", clock.tick())?;
            let garbage = vec![
                ColumnStats { column_id: 2, null_count: 7, min: Some(Scalar::Int(3)), max: Some(Scalar::Bool(true)) },
                ColumnStats { column_id: 0, null_count: 5, min: Some(Scalar::Int(100)), max: Some(Scalar::Int(-100)) },
                ColumnStats {
                    column_id: 1,
                    null_count: 0,
                    min: Some(Scalar::Float(f64::NAN)),
                    max: Some(Scalar::UInt(3)),
                },
                ColumnStats { column_id: 99, null_count: 1, min: None, max: Some(Scalar::Float(1.0)) },
            ];
            let ds = Ds::new(input);
            let m = ds.main()?;
            let g = garbage.clone();
            ds.edit_segment(&m, 0, |s| s.fragments[0].stats = g)?;
            ds.edit_manifest(&m, |m| m.stats = garbage)
        },
    )?;
    Ok(())
}

/// Copies the latest version's data files, segment and deletion vectors to non-content names
/// outside the usual directories, and points the latest manifest at the copies. Older versions
/// keep the original objects.
fn rename_objects(input: &Path) -> Result<()> {
    let ds = Ds::new(input);
    let mkey = ds.main()?;
    let mut m = ds.manifest(&mkey)?;
    let mut n = 0;
    for (i, sref) in m.segments.iter_mut().enumerate() {
        let mut seg = ds.segment(&sref.path)?;
        for f in &mut seg.fragments {
            for file in &mut f.files {
                let new = format!("x/parts/file-{n}.bin");
                n += 1;
                ds.write(&new, &ds.read(&file.path)?)?;
                file.path = new;
            }
            if let Some(d) = &mut f.deletion {
                let new = format!("dv_{}.del", f.id);
                ds.write(&new, &ds.read(&d.path)?)?;
                d.path = new;
            }
        }
        let bytes = tessera::envelope::seal(tessera::envelope::ObjectKind::Segment, &seg)?;
        let new = format!("log/segment.{i}");
        ds.write(&new, &bytes)?;
        sref.path = new;
        sref.size = bytes.len() as u64;
        sref.crc32 = tessera::envelope::stored_crc(&bytes);
    }
    if n == 0 {
        bail!("nothing to rename");
    }
    ds.put_manifest(&mkey, &m)?;
    // The renamed version must not depend on the old names: a check, not part of the case.
    let store = tessera::Store::open(super::data::loc(input)?)?;
    Dataset::open_at(&store, &At::Latest, tessera::Limits::default())?;
    Ok(())
}
