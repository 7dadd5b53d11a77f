//! Must-reject cases for tag records (SPEC.md §"Tags").

use std::path::Path;

use tessera::envelope::{self, ObjectKind};
use tessera::manifest::Tag;

use super::base::{T1, tag_t1, tagged};
use crate::generate::Result;
use crate::generate::emit::{Emitter, Spec};
use crate::generate::mutate::Ds;

/// Changes the tag record `t1` and re-seals it.
fn edit_tag(input: &Path, f: impl FnOnce(&mut Tag)) -> Result<()> {
    tagged(input)?;
    let ds = Ds::new(input);
    let mut tag: Tag = envelope::open(ObjectKind::Tag, &ds.read(T1)?, u64::MAX, T1)?;
    f(&mut tag);
    ds.write(T1, &envelope::seal(ObjectKind::Tag, &tag)?)
}

pub(super) fn refs(em: &mut Emitter) -> Result<()> {
    em.reject(
        Spec::new(
            "n-ref-0001-tag-target-manifest-rewritten",
            &["REF-02", "VAL-13"],
            "main@2's manifest was re-sealed with another commit message after tag t1 recorded its CRC",
        )
        .with_args(tag_t1()),
        "invalid",
        "CRC differs from the tag record",
        |input| {
            tagged(input)?;
            let ds = Ds::new(input);
            ds.edit_manifest(&tessera::paths::manifest_key("main", 2), |m| m.message = "rewritten".into())
        },
    )?;
    em.reject(
        Spec::new(
            "n-ref-0002-tag-records-wrong-manifest-crc",
            &["REF-02"],
            "tag t1 records a manifest CRC one more than the tagged manifest's",
        )
        .with_args(tag_t1()),
        "invalid",
        "CRC differs from the tag record",
        |input| edit_tag(input, |t| t.manifest_crc32 = t.manifest_crc32.wrapping_add(1)),
    )?;
    em.reject(
        Spec::new(
            "n-ref-0003-tag-name-differs-from-key",
            &["REF-01", "VAL-13"],
            "the record at tags/t1.tst names tag t2",
        )
        .with_args(tag_t1()),
        "invalid",
        "tag record names",
        |input| edit_tag(input, |t| t.name = "t2".into()),
    )?;
    em.reject(
        Spec::new(
            "n-ref-0004-tag-target-branch-invalid",
            &["LAY-07", "REF-01"],
            "tag t1's target branch is `../main`, not a valid branch name",
        )
        .with_args(tag_t1()),
        "invalid",
        "bad branch name in tag",
        |input| edit_tag(input, |t| t.target.branch = "../main".into()),
    )?;
    em.reject(
        Spec::new(
            "n-ref-0007-tag-object-over-get-bound",
            &["ENV-10", "VAL-13"],
            "tag record t1 is followed by zero bytes up to 28 + 65536 + 1 bytes: the object is one byte over \
             the bound of a whole-object GET of a tag (its body_len is unchanged and small)",
        )
        .with_args(tag_t1()),
        "limit",
        "size",
        |input| {
            tagged(input)?;
            let ds = Ds::new(input);
            let mut bytes = ds.read(T1)?;
            bytes.resize(28 + 65536 + 1, 0);
            ds.write(T1, &bytes)
        },
    )?;
    Ok(())
}
