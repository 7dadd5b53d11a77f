//! Unsupported cases: objects from a future format version or with unknown feature flags
//! (SPEC.md §"Feature flags and compatibility").

use super::base::{T1, basic, edit_file_raw, main_key, tag_t1, tagged};
use crate::generate::Result;
use crate::generate::emit::{Emitter, Spec};
use crate::generate::mutate::{Ds, RefUpdate, fix_envelope_crc, fix_header_crc};

pub(super) fn unsupported(em: &mut Emitter) -> Result<()> {
    for (id, major) in [("u-envelope-0001-manifest-major-2", 2u8), ("u-envelope-0002-manifest-major-0", 0)] {
        let description = format!("the latest manifest says format major version {major} (CRC re-sealed)");
        em.reject(
            Spec::new(id, &["FLG-01"], &description),
            "unsupported",
            &format!("format major version {major}"),
            |input| {
                basic(input)?;
                let (ds, m) = main_key(input)?;
                ds.edit_envelope_header(&m, |h| h[8] = major).map(drop)
            },
        )?;
    }
    em.reject(
        Spec::new(
            "u-envelope-0003-segment-major-2",
            &["FLG-01"],
            "the index segment says format major version 2 (CRC and the manifest's reference re-sealed)",
        ),
        "unsupported",
        "format major version 2",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            let mut b = ds.read(&ds.segment_key(&m, 0)?)?;
            b[8] = 2;
            fix_envelope_crc(&mut b);
            ds.replace_segment(&m, 0, &b)
        },
    )?;
    em.reject(
        Spec::new(
            "u-envelope-0004-tag-major-2",
            &["FLG-01"],
            "the tag record says format major version 2 (CRC re-sealed)",
        )
        .with_args(tag_t1()),
        "unsupported",
        "format major version 2",
        |input| {
            tagged(input)?;
            Ds::new(input).edit_envelope_header(T1, |h| h[8] = 2).map(drop)
        },
    )?;
    em.reject(
        Spec::new(
            "u-datafile-0001-major-2",
            &["FLG-01"],
            "the data file header says major version 2 (header CRC re-sealed)",
        ),
        "unsupported",
        "data file major version 2",
        |input| {
            basic(input)?;
            edit_file_raw(input, RefUpdate::Full, |b| {
                b[8] = 2;
                fix_header_crc(b);
            })
        },
    )?;
    for (id, bit) in [("u-flags-0001-reader-flag-bit-2", 2u32), ("u-flags-0002-reader-flag-bit-63", 63)] {
        let description = format!("the latest manifest sets reader-required flag bit {bit}, which no reader knows");
        em.reject(
            Spec::new(id, &["FLG-03", "VAL-05"], &description),
            "unsupported",
            "unknown reader-required flags",
            |input| {
                basic(input)?;
                let (ds, m) = main_key(input)?;
                ds.edit_manifest(&m, |m| m.reader_flags = 1 << bit)
            },
        )?;
    }
    em.reject(
        Spec::new(
            "u-flags-0003-reader-flag-with-future-body",
            &["FLG-03", "VAL-05"],
            "the latest manifest sets a reader flag bit and its body after the flags is in an encoding 1.0 \
             cannot decode: the flags are checked before the body is decoded",
        ),
        "unsupported",
        "unknown reader-required flags",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_body(&m, |b| {
                b.clear();
                b.extend_from_slice(&(1u64 << 7).to_le_bytes());
                b.extend_from_slice(b"future encoding");
            })
            .map(drop)
        },
    )?;
    Ok(())
}
