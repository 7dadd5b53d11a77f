//! Must-reject cases for index segments and their references (SPEC.md §"Index segment").

// Each function below is a flat list of case definitions, one `em.reject` call per case;
// splitting them would scatter related cases without making any of them clearer.
#![allow(clippy::too_many_lines)]

use std::path::Path;

use tessera::envelope::{self, ObjectKind};
use tessera::{Column, ColumnData, DType, Schema, WriteOptions};

use super::base::{FEAT, basic, main_key};
use crate::generate::data::{batch, create};
use crate::generate::emit::{Emitter, Spec};
use crate::generate::mutate::{Ds, FileLoc};
use crate::generate::options::Clock;
use crate::generate::{Result, bail};

/// 8 rows of one i64 column in two fragments of one segment.
fn two_fragments(input: &Path) -> Result<()> {
    let schema = Schema::new([Column::new("id", DType::I64, &[])])?;
    let mut clock = Clock::new();
    let ds = create(input, schema, &mut clock)?;
    let b = batch(vec![("id", ColumnData::from_scalars(&[1i64, 2, 3, 4, 5, 6, 7, 8]))])?;
    let v2 =
        ds.append(&b, "two fragments", clock.next(WriteOptions { target_file_bytes: 32, ..WriteOptions::default() }))?;
    if v2.fragments().len() != 2 || v2.manifest().segments.len() != 1 {
        bail!("expected two fragments in one segment");
    }
    Ok(())
}

pub(super) fn segments(em: &mut Emitter) -> Result<()> {
    em.reject(
        Spec::new(
            "n-segment-0001-crc-differs-from-ref",
            &["SEG-01", "VAL-07"],
            "the index segment was re-sealed with other content under the same name; the manifest's reference \
             records the old CRC",
        ),
        "invalid",
        "size or CRC differs",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            let key = ds.segment_key(&m, 0)?;
            let mut seg = ds.segment(&key)?;
            seg.fragments[0].stats[0].null_count += 1;
            ds.write(&key, &envelope::seal(ObjectKind::Segment, &seg)?)
        },
    )?;
    em.reject(
        Spec::new(
            "n-segment-0002-size-differs-from-ref",
            &["SEG-01"],
            "the manifest's reference gives the index segment a size one byte larger than the object",
        ),
        "invalid",
        "size or CRC differs",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_manifest(&m, |m| m.segments[0].size += 1)
        },
    )?;
    em.reject(
        Spec::new(
            "n-segment-0003-missing",
            &["VAL-15", "VAL-07"],
            "the index segment the manifest references does not exist",
        ),
        "invalid",
        "does not exist",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.remove(&ds.segment_key(&m, 0)?)
        },
    )?;
    em.reject(
        Spec::new(
            "n-segment-0004-fragment-id-not-below-next",
            &["SEG-03"],
            "the only fragment has id 1 while the manifest's next_fragment_id is 1",
        ),
        "invalid",
        "below next_fragment_id",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_segment(&m, 0, |s| s.fragments[0].id = 1)
        },
    )?;
    em.reject(
        Spec::new(
            "n-segment-0005-fragment-ids-descending",
            &["SEG-03"],
            "the segment lists fragment 1 before fragment 0",
        ),
        "invalid",
        "fragment ids must ascend",
        |input| {
            two_fragments(input)?;
            let ds = Ds::new(input);
            ds.edit_segment(&ds.main()?, 0, |s| s.fragments.swap(0, 1))
        },
    )?;
    em.reject(
        Spec::new(
            "n-segment-0006-column-in-no-file",
            &["SEG-06"],
            "the fragment's data file reference omits column 4, so no file holds it",
        ),
        "invalid",
        "column 4 is in 0 of the fragment's files",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_file_ref(&m, FileLoc::default(), |r| r.column_ids.retain(|&c| c != FEAT))
        },
    )?;
    em.reject(
        Spec::new(
            "n-segment-0007-column-in-two-files",
            &["SEG-06"],
            "the fragment references its data file a second time for column 4, so two files claim it",
        ),
        "invalid",
        "column 4 is in 2 of the fragment's files",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_segment(&m, 0, |s| {
                let mut again = s.fragments[0].files[0].clone();
                again.column_ids = vec![FEAT];
                s.fragments[0].files.push(again);
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-segment-0008-file-column-ids-descending",
            &["SEG-05"],
            "the data file reference lists its column ids in descending order",
        ),
        "invalid",
        "column ids must ascend",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_file_ref(&m, FileLoc::default(), |r| r.column_ids.reverse())
        },
    )?;
    em.reject(
        Spec::new(
            "n-segment-0009-fragment-rows-differ-from-file",
            &["DF-11"],
            "the fragment (and the segment reference and manifest) say 7 rows; its data file holds 6",
        ),
        "invalid",
        "file has 6 rows, fragment has 7",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_segment(&m, 0, |s| s.fragments[0].row_count = 7)?;
            ds.edit_manifest(&m, |m| {
                m.segments[0].row_count = 7;
                m.row_count = 7;
            })
        },
    )?;
    Ok(())
}
