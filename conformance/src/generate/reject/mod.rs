//! The must-reject and unsupported cases. Each starts from a small valid dataset and changes
//! exactly one thing; the checksums and references around the change are re-sealed so the
//! reader meets the intended fault and no other.
//!
//! One file per area; `base.rs` holds the datasets the cases start from. The areas are
//! generated in the order of `all`, which fixes the order of the fixture tree.

mod base;
mod codec;
mod datafile;
mod encoded;
mod envelope;
mod limits;
mod manifest;
mod paths;
mod segment;
mod tags;
pub(super) mod tree;
mod unsupported;
pub(super) mod views;

use super::Result;
use super::emit::Emitter;

/// Writes every reject and unsupported case.
pub(crate) fn all(em: &mut Emitter) -> Result<()> {
    envelope::envelopes(em)?;
    unsupported::unsupported(em)?;
    manifest::manifests(em)?;
    segment::segments(em)?;
    paths::path_cases(em)?;
    limits::limits(em)?;
    datafile::datafiles(em)?;
    datafile::reading(em)?;
    codec::codecs(em)?;
    encoded::encoded(em)?;
    tags::refs(em)?;
    views::reject(em)?;
    tree::reject(em)?;
    Ok(())
}
