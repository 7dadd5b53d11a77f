//! View cases (SPEC.md §"Views"): the valid ones, read with `args = { view = … }` to the dump
//! of the view's rows of its pinned version, and the must-reject ones, each a valid view with
//! one fault (re-sealed, so the envelope CRC is right unless the CRC is the fault).

use std::path::Path;

use tessera::envelope::{self, ObjectKind};
use tessera::view::{View, view_key};
use tessera::{Column, ColumnData, DType, Dataset, Schema};

use crate::case::Args;
use crate::generate::Result;
use crate::generate::data::{batch, create};
use crate::generate::emit::{Emitter, Spec};
use crate::generate::mutate::{Ds, FileLoc, RefUpdate};
use crate::generate::options::Clock;

/// The view every case reads.
const NAME: &str = "sel";

fn args() -> Args {
    Args { view: Some(NAME.into()), ..Args::default() }
}

/// main@1 create; main@2 six rows (`id` 10..=15, `name`); view `sel` = rows `rows` of main@2
/// with the query `query`; main@3 deletes rows 0 and 1 of main@2 and appends two rows, so the
/// latest version's row ids differ from the view's. `message` names main@2's commit, which
/// sets the manifest's bytes (another message, another dataset).
fn viewed(input: &Path, rows: &[u64], message: &str) -> Result<()> {
    let schema = Schema::new([Column::new("id", DType::I64, &[]), Column::new("name", DType::Utf8, &[])])?;
    let data = |ids: &[i64], names: &[&str]| {
        batch(vec![("id", ColumnData::from_scalars(ids)), ("name", ColumnData::from_strings(names))])
    };
    let mut clock = Clock::new();
    let v1 = create(input, schema, &mut clock)?;
    let v2 = v1.append(&data(&[10, 11, 12, 13, 14, 15], &["a", "b", "c", "d", "e", "f"])?, message, clock.tick())?;
    v2.save_view_with(NAME, rows, "SELECT * FROM t WHERE id % 2 = 0 ORDER BY id DESC", &clock.tick())?;
    let v3 = v2.delete_rows(&[0, 1], "drop two", &clock.tick())?;
    v3.append(&data(&[16, 17], &["g", "h"])?, "two more", clock.tick())?;
    Ok(())
}

/// The base of the must-reject cases: view `sel` = rows 4, 2, 0 of main@2.
fn base(input: &Path) -> Result<()> {
    viewed(input, &[4, 2, 0], "six rows")
}

/// Changes the view record and re-seals it.
fn edit_view(input: &Path, f: impl FnOnce(&mut View)) -> Result<()> {
    base(input)?;
    let ds = Ds::new(input);
    let key = view_key(NAME);
    let mut view: View = envelope::open(ObjectKind::View, &ds.read(&key)?, u64::MAX, &key)?;
    f(&mut view);
    ds.write(&key, &envelope::seal(ObjectKind::View, &view)?)
}

/// As [`edit_view`], recomputing `rows_sha256` so that the rows are the only fault.
fn edit_rows(input: &Path, rows: &[u64]) -> Result<()> {
    edit_view(input, |v| {
        v.rows = rows.to_vec();
        v.rows_sha256 = View::digest_rows(rows);
    })
}

/// main@1 create; main@2 appends rows `id` 10..=12 (fragment 0), main@3 rows 13..=15 (fragment
/// 1), each `id` row in a page of its own (8-byte pages); view `sel` = rows `rows` of main@3.
/// Then one byte of the `id` page holding physical row `row` of fragment `fragment` is flipped
/// (its block CRC left stale, so reading that page is `malformed`), the reference chain is
/// re-sealed, and the view is re-saved against the new main@3. A read of the view checks only
/// the pages holding its rows (VAL-19).
fn faulty_page(input: &Path, rows: &[u64], fragment: u64, row: u64) -> Result<()> {
    let schema = Schema::new([Column::new("id", DType::I64, &[])])?;
    let data = |ids: &[i64]| batch(vec![("id", ColumnData::from_scalars(ids))]);
    let mut clock = Clock::new();
    let small = |o: tessera::WriteOptions| tessera::WriteOptions { page_bytes: 8, ..o };
    let v1 = create(input, schema, &mut clock)?;
    let v2 = v1.append(&data(&[10, 11, 12])?, "fragment 0", small(clock.tick()))?;
    v2.append(&data(&[13, 14, 15])?, "fragment 1", small(clock.tick()))?;
    let ds = Ds::new(input);
    let mkey = ds.main()?;
    let (seg, frag) = ds.find_fragment(&mkey, fragment)?;
    let loc = FileLoc { seg, frag, file: 0 };
    let mut failed = None;
    ds.edit_data_file_raw(&mkey, loc, RefUpdate::Full, |bytes| match Ds::split_data_file(bytes) {
        Ok((_, footer, _)) => match footer.columns.first().and_then(|c| c.pages.get(row as usize)) {
            Some(p) => bytes[p.block.offset as usize] ^= 0x01,
            None => failed = Some("no such page"),
        },
        Err(_) => failed = Some("data file does not split"),
    })?;
    if let Some(why) = failed {
        crate::generate::bail!("faulty_page: {why}");
    }
    let at = Dataset::open_at(
        &tessera::Store::open(crate::generate::data::loc(input)?)?,
        &tessera::At::Latest,
        tessera::Limits::default(),
    )?;
    at.save_view_with(NAME, rows, "SELECT * FROM t WHERE id < 13", &clock.tick())?;
    Ok(())
}

pub(in crate::generate) fn valid(em: &mut Emitter) -> Result<()> {
    em.valid_unverified(
        Spec::new(
            "v-view-0004-fault-in-another-fragment",
            &["VAL-19", "VAL-18", "DUMP-11"],
            "view sel lists rows 2, 0 of main@3, both in fragment 0; a page of fragment 1 (row 4's) is corrupt \
             (stale block CRC). A view read checks only what holds its rows, so the view reads",
        )
        .with_args(args()),
        |input| faulty_page(input, &[2, 0], 1, 1),
    )?;
    em.valid_unverified(
        Spec::new(
            "v-view-0005-fault-in-another-page",
            &["VAL-19", "VAL-18"],
            "view sel lists rows 2, 0 of main@3 (fragment 0, one row per page); the page of row 1, in the same \
             fragment and data file, is corrupt (stale block CRC). A view read checks only the pages holding its \
             rows, so the view reads",
        )
        .with_args(args()),
        |input| faulty_page(input, &[2, 0], 0, 1),
    )?;
    em.valid(
        Spec::new(
            "v-view-0001-rows-in-view-order",
            &["VIEW-02", "VIEW-05", "VIEW-06", "VAL-18"],
            "view sel lists rows 4, 2, 0 of main@2 (ids 14, 12, 10); main@3 later deletes rows and \
             appends, and the view still reads main@2's rows in its order",
        )
        .with_args(args()),
        base,
    )?;
    em.valid(
        Spec::new(
            "v-view-0002-all-rows-reversed",
            &["VIEW-06", "VIEW-08"],
            "view sel lists every row of main@2, last first",
        )
        .with_args(args()),
        |input| viewed(input, &[5, 4, 3, 2, 1, 0], "six rows"),
    )?;
    em.valid(
        Spec::new("v-view-0003-empty", &["VIEW-06"], "view sel lists no row: a dump of zero rows of main@2")
            .with_args(args()),
        |input| viewed(input, &[], "six rows"),
    )?;
    Ok(())
}

pub(in crate::generate) fn reject(em: &mut Emitter) -> Result<()> {
    objects(em)?;
    records(em)?;
    in_view_rows(em)
}

/// Faults in the view object as a whole: its bytes, its magic, its dataset.
fn objects(em: &mut Emitter) -> Result<()> {
    let key = view_key(NAME);
    em.reject(
        Spec::new(
            "n-view-0001-crc",
            &["ENV-06", "VAL-18"],
            "one byte of view sel's body is flipped; its CRC is not redone",
        )
        .with_args(args()),
        "malformed",
        "CRC-32 mismatch",
        |input| {
            base(input)?;
            let ds = Ds::new(input);
            let mut bytes = ds.read(&key)?;
            let at = bytes.len() - 12; // inside the last row id
            bytes[at] ^= 0x01;
            ds.write(&key, &bytes)
        },
    )?;
    em.reject(
        Spec::new("n-view-0002-tag-magic", &["ENV-02", "VAL-18"], "view sel carries a tag record's magic")
            .with_args(args()),
        "malformed",
        "bad magic",
        |input| {
            base(input)?;
            let ds = Ds::new(input);
            let view: View = envelope::open(ObjectKind::View, &ds.read(&key)?, u64::MAX, &key)?;
            ds.write(&key, &envelope::seal(ObjectKind::Tag, &view)?)
        },
    )?;
    em.reject(
        Spec::new(
            "n-view-0003-from-another-dataset",
            &["VIEW-02", "VIEW-05"],
            "view sel was saved in another dataset whose main@2 has the same rows but another commit \
             message; copied here, its manifest_sha256 does not match this dataset's main@2",
        )
        .with_args(args()),
        "invalid",
        "is not the manifest the view was saved from",
        |input| {
            base(input)?;
            let other = input.with_file_name("other-dataset");
            viewed(&other, &[4, 2, 0], "six rows, elsewhere")?;
            let bytes = Ds::new(&other).read(&key)?;
            std::fs::remove_dir_all(&other)?;
            Ds::new(input).write(&key, &bytes)
        },
    )?;
    Ok(())
}

/// Faults in the version that a view read must find: in a page holding a view row.
fn in_view_rows(em: &mut Emitter) -> Result<()> {
    em.reject(
        Spec::new(
            "n-view-0010-fault-in-a-viewed-page",
            &["VAL-19", "DF-26"],
            "view sel lists rows 2, 0, 4 of main@3; the page of row 4 (fragment 1) is corrupt (stale block CRC), \
             and a view read checks every page holding a view row",
        )
        .with_args(args()),
        "malformed",
        "CRC",
        |input| faulty_page(input, &[2, 0, 4], 1, 1),
    )
}

/// Faults in the decoded record: its rows, name and target.
fn records(em: &mut Emitter) -> Result<()> {
    em.reject(
        Spec::new(
            "n-view-0004-row-out-of-range",
            &["VIEW-06", "VAL-18"],
            "view sel lists row 6 of main@2, which has 6 rows (rows_sha256 recomputed)",
        )
        .with_args(args()),
        "invalid",
        "is not below",
        |input| edit_rows(input, &[4, 6, 0]),
    )?;
    em.reject(
        Spec::new(
            "n-view-0005-duplicate-row",
            &["VIEW-06", "VAL-18"],
            "view sel lists row 2 twice (rows_sha256 recomputed)",
        )
        .with_args(args()),
        "invalid",
        "listed twice",
        |input| edit_rows(input, &[4, 2, 0, 2]),
    )?;
    em.reject(
        Spec::new(
            "n-view-0006-name-differs-from-key",
            &["VIEW-04", "VAL-18"],
            "the record at views/sel.tsview names view other",
        )
        .with_args(args()),
        "invalid",
        "view record names",
        |input| edit_view(input, |v| v.name = "other".into()),
    )?;
    em.reject(
        Spec::new(
            "n-view-0007-target-branch-invalid",
            &["LAY-07", "VIEW-04"],
            "view sel's target branch is `../main`, not a valid branch name",
        )
        .with_args(args()),
        "invalid",
        "not a valid branch and version",
        |input| edit_view(input, |v| v.target.branch = "../main".into()),
    )?;
    em.reject(
        Spec::new(
            "n-view-0008-rows-sha256-mismatch",
            &["VIEW-04", "VAL-18"],
            "view sel's rows are 4, 0, 2 but its rows_sha256 is that of 4, 2, 0",
        )
        .with_args(args()),
        "invalid",
        "rows_sha256 differs",
        |input| edit_view(input, |v| v.rows = vec![4, 0, 2]),
    )?;
    em.reject(
        Spec::new(
            "n-view-0009-target-missing",
            &["VIEW-05", "VAL-15", "VAL-18"],
            "view sel targets main@9, which does not exist",
        )
        .with_args(args()),
        "invalid",
        "does not exist",
        |input| edit_view(input, |v| v.target.version = 9),
    )?;
    Ok(())
}
