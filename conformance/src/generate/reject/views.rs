//! View cases (SPEC.md §"Views"): the valid ones, read with `args = { view = … }` to the dump
//! of the view's rows of its pinned version, and the must-reject ones, each a valid view with
//! one fault (re-sealed, so the envelope CRC is right unless the CRC is the fault). Views of
//! both encodings (VIEW-11): a list (major 1) and runs (major 2).

use std::path::Path;

use tessera::envelope::ObjectKind;
use tessera::view::{RawRows, RawView, Run, View, view_key};
use tessera::{Column, ColumnData, DType, Dataset, Schema};

use crate::case::Args;
use crate::generate::Result;
use crate::generate::data::{batch, create};
use crate::generate::emit::{Emitter, Spec};
use crate::generate::mutate::{Ds, FileLoc, RefUpdate, fix_envelope_crc};
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

/// The base of the must-reject cases of runs: view `sel` = rows 0, 1, 2, 4, 5 of main@2,
/// stored as runs (0, 3), (4, 2) (VIEW-12: 2 runs for 5 ascending rows).
fn runs_base(input: &Path) -> Result<()> {
    viewed(input, &[0, 1, 2, 4, 5], "six rows")
}

/// Builds the dataset with `make`, changes its view record and re-seals it.
fn edit_raw(input: &Path, make: fn(&Path) -> Result<()>, f: impl FnOnce(&mut RawView)) -> Result<()> {
    make(input)?;
    let ds = Ds::new(input);
    let key = view_key(NAME);
    let mut view = RawView::decode(&ds.read(&key)?, u64::MAX, &key)?;
    f(&mut view);
    ds.write(&key, &view.to_object()?)
}

/// Changes the list view record of [`base`] and re-seals it.
fn edit_view(input: &Path, f: impl FnOnce(&mut RawView)) -> Result<()> {
    edit_raw(input, base, f)
}

/// As [`edit_view`], recomputing `rows_sha256` so that the rows are the only fault.
fn edit_rows(input: &Path, rows: &[u64]) -> Result<()> {
    edit_view(input, |v| {
        v.rows = RawRows::List(rows.to_vec());
        v.rows_sha256 = View::digest_rows(rows);
    })
}

/// Replaces the runs of [`runs_base`]'s view by `runs` (pairs of start and length) and its
/// `row_count` by `row_count` (the runs' total when `None`), recomputing `rows_sha256`.
fn edit_runs(input: &Path, runs: &[(u64, u64)], row_count: Option<u64>) -> Result<()> {
    let runs: Vec<Run> = runs.iter().map(|&(start, len)| Run { start, len }).collect();
    let total = runs.iter().fold(0u64, |a, r| a.wrapping_add(r.len));
    edit_raw(input, runs_base, |v| {
        v.rows_sha256 = View::digest_runs(&runs);
        v.rows = RawRows::Runs { row_count: row_count.unwrap_or(total), runs };
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
    em.valid(
        Spec::new(
            "v-view-0006-runs",
            &["VIEW-11", "VIEW-12", "VAL-18", "DUMP-11"],
            "view sel lists rows 0, 1, 2, 4, 5 of main@2 (ids 10, 11, 12, 14, 15), stored as the runs (0, 3), (4, 2) \
             under envelope major 2",
        )
        .with_args(args()),
        runs_base,
    )?;
    em.valid(
        Spec::new(
            "v-view-0007-runs-every-row",
            &["VIEW-11", "VIEW-12"],
            "view sel lists every row of main@2 in order: one run (0, 6)",
        )
        .with_args(args()),
        |input| viewed(input, &[0, 1, 2, 3, 4, 5], "six rows"),
    )?;
    em.valid_unverified(
        Spec::new(
            "v-view-0008-runs-fault-in-another-fragment",
            &["VIEW-11", "VAL-19", "VAL-18"],
            "view sel lists rows 0, 1, 2 of main@3, one run covering fragment 0; a page of fragment 1 is corrupt \
             (stale block CRC). A runs view reads like a list view: only what holds its rows is checked",
        )
        .with_args(args()),
        |input| faulty_page(input, &[0, 1, 2], 1, 1),
    )?;
    Ok(())
}

pub(in crate::generate) fn reject(em: &mut Emitter) -> Result<()> {
    objects(em)?;
    records(em)?;
    in_view_rows(em)?;
    runs(em)
}

/// One fault in the runs of a runs view: the case, and the runs and `row_count` it stores.
struct RunsFault {
    id: &'static str,
    reqs: &'static [&'static str],
    description: &'static str,
    hint: &'static str,
    runs: &'static [(u64, u64)],
    row_count: Option<u64>,
}

/// Faults in a runs view (VIEW-11, VAL-18 steps 3, 7, 8 and 12), each alone: `rows_sha256`
/// recomputed over the edited runs unless the checksum is the fault.
fn runs(em: &mut Emitter) -> Result<()> {
    runs_structure(em)?;
    runs_record(em)
}

/// Faults in the runs themselves (VAL-18 step 12).
fn runs_structure(em: &mut Emitter) -> Result<()> {
    let cases = [
        RunsFault {
            id: "n-view-0011-runs-zero-length",
            reqs: &["VIEW-11", "VAL-18"],
            description: "view sel's runs are (0, 3), (4, 0), (5, 1): a run of no rows",
            hint: "is empty",
            runs: &[(0, 3), (4, 0), (5, 1)],
            row_count: None,
        },
        RunsFault {
            id: "n-view-0012-runs-overlapping",
            reqs: &["VIEW-11", "VIEW-06", "VAL-18"],
            description: "view sel's runs are (0, 3), (2, 3): row 2 is in both",
            hint: "must start after",
            runs: &[(0, 3), (2, 3)],
            row_count: None,
        },
        RunsFault {
            id: "n-view-0013-runs-unsorted",
            reqs: &["VIEW-11", "VAL-18"],
            description: "view sel's runs are (4, 2), (0, 3): the second starts before the first",
            hint: "must start after",
            runs: &[(4, 2), (0, 3)],
            row_count: None,
        },
        RunsFault {
            id: "n-view-0014-runs-adjacent",
            reqs: &["VIEW-11", "VAL-18"],
            description: "view sel's runs are (0, 3), (3, 2): the same rows as one run (0, 5), so not maximal",
            hint: "must start after",
            runs: &[(0, 3), (3, 2)],
            row_count: None,
        },
        RunsFault {
            id: "n-view-0015-run-past-row-count",
            reqs: &["VIEW-06", "VIEW-11", "VAL-18"],
            description: "view sel's runs are (0, 3), (4, 3): row 6 of main@2, which has 6 rows",
            hint: "not below",
            runs: &[(0, 3), (4, 3)],
            row_count: None,
        },
        RunsFault {
            id: "n-view-0016-runs-row-count-mismatch",
            reqs: &["VIEW-11", "VAL-18"],
            description: "view sel's runs (0, 3), (4, 2) hold 5 rows; its row_count says 6",
            hint: "row_count says 6",
            runs: &[(0, 3), (4, 2)],
            row_count: Some(6),
        },
        RunsFault {
            id: "n-view-0017-run-past-u64",
            reqs: &["VIEW-11", "VIEW-06", "VAL-18"],
            description: "view sel's second run starts at 2^64 - 2 and holds 5 rows, past the largest row id",
            hint: "ends past row",
            runs: &[(0, 3), (u64::MAX - 1, 5)],
            row_count: Some(8),
        },
    ];
    for c in cases {
        em.reject(Spec::new(c.id, c.reqs, c.description).with_args(args()), "invalid", c.hint, |input| {
            edit_runs(input, c.runs, c.row_count)
        })?;
    }
    Ok(())
}

/// Faults in the rest of a runs view record: its checksum, row count, size and major.
fn runs_record(em: &mut Emitter) -> Result<()> {
    let key = view_key(NAME);
    em.reject(
        Spec::new(
            "n-view-0018-runs-rows-sha256-mismatch",
            &["VIEW-04", "VIEW-11", "VAL-18"],
            "view sel's runs are (0, 3), (4, 2) but its rows_sha256 is that of the runs (0, 3), (4, 1)",
        )
        .with_args(args()),
        "invalid",
        "rows_sha256 differs",
        |input| {
            edit_raw(input, runs_base, |v| {
                v.rows_sha256 = View::digest_runs(&[Run { start: 0, len: 3 }, Run { start: 4, len: 1 }]);
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-view-0019-runs-row-count-over-limit",
            &["VIEW-03", "LIM-15", "VAL-18"],
            "view sel's row_count is 2^40 + 1, over the runs view's row limit (checked before its runs)",
        )
        .with_args(args()),
        "limit",
        "row_count",
        |input| {
            edit_raw(input, runs_base, |v| {
                if let RawRows::Runs { row_count, .. } = &mut v.rows {
                    *row_count = (1 << 40) + 1;
                }
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-view-0020-runs-body-over-limit",
            &["ENV-04", "VIEW-03", "LIM-05", "VAL-18"],
            "view sel, a runs view (major 2), declares a body_len of 2^28 + 1 bytes, over the view body limit \
             (CRC re-sealed)",
        )
        .with_args(args()),
        "limit",
        "body length",
        |input| {
            runs_base(input)?;
            Ds::new(input)
                .edit_envelope_header(&key, |h| h[16..24].copy_from_slice(&((1u64 << 28) + 1).to_le_bytes()))
                .map(drop)
        },
    )?;
    em.reject(
        Spec::new(
            "u-view-0001-major-3",
            &["FLG-01", "VIEW-11", "VAL-18"],
            "view sel says envelope major version 3, an encoding of rows no reader of this document knows \
             (CRC re-sealed)",
        )
        .with_args(args()),
        "unsupported",
        "format major version 3",
        |input| {
            runs_base(input)?;
            Ds::new(input).edit_envelope_header(&key, |h| h[8] = 3).map(drop)
        },
    )?;
    Ok(())
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
            let mut bytes = ds.read(&key)?;
            bytes[..8].copy_from_slice(&ObjectKind::Tag.magic());
            fix_envelope_crc(&mut bytes);
            ds.write(&key, &bytes)
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
        |input| edit_view(input, |v| v.rows = RawRows::List(vec![4, 0, 2])),
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
