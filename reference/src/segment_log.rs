//! The segment log: writes a commit's index segment and keeps the manifest's segment list
//! logarithmic by merging segments in tiers (SPEC.md §"The fragment log", SEG-09 and SEG-10).

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::envelope::{self, ObjectKind};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::manifest::{Fragment, Segment, SegmentRef};
use crate::paths;
use crate::store::Store;

/// Writes an index segment (content-addressed) and returns its reference.
pub(crate) fn write_segment(store: &Store, seg: &Segment) -> Result<SegmentRef> {
    let bytes = envelope::seal(ObjectKind::Segment, seg)?;
    let key = paths::content_key(paths::INDEX_DIR, "tsi", &bytes);
    let sref = SegmentRef {
        path: key.clone(),
        size: bytes.len() as u64,
        crc32: envelope::stored_crc(&bytes),
        fragment_count: seg.fragments.len() as u64,
        row_count: seg.fragments.iter().map(|f| f.row_count).sum(),
    };
    store.put_if_absent(&key, Bytes::from(bytes))?;
    Ok(sref)
}

/// Keeps the segment list logarithmic: while the newest segment is at least half the size of
/// the one before it, the two are merged into one (a binary counter over segment sizes). A
/// commit therefore rewrites O(change) index entries amortised, and a reader opens
/// O(log fragments) segments `[SEG-10]`.
pub(crate) fn merge_tiers(store: &Store, segments: &mut Vec<SegmentRef>, limits: &Limits) -> Result<()> {
    let weight = |s: &SegmentRef| s.fragment_count.max(1);
    while segments.len() >= 2 && weight(&segments[segments.len() - 1]) * 2 >= weight(&segments[segments.len() - 2]) {
        let newer = segments.pop().ok_or_else(|| Error::usage("segment list empty"))?;
        let older = segments.pop().ok_or_else(|| Error::usage("segment list empty"))?;
        let read = |r: &SegmentRef| -> Result<Segment> {
            let bytes = store.get_bounded(&r.path, envelope::max_object_len(limits.max_segment_body()))?;
            envelope::open(ObjectKind::Segment, &bytes, limits.max_segment_body(), &r.path)
        };
        let (a, b) = (read(&older)?, read(&newer)?);
        let mut map: BTreeMap<u64, Fragment> = a.fragments.into_iter().map(|f| (f.id, f)).collect();
        let mut removed = a.removed;
        for id in b.removed {
            // The id may also be listed by a segment older than `older`: keep the removal.
            map.remove(&id);
            removed.push(id);
        }
        map.extend(b.fragments.into_iter().map(|f| (f.id, f)));
        // Applying removals before listings makes a removal of a listed id redundant [SEG-03].
        removed.retain(|id| !map.contains_key(id));
        removed.sort_unstable();
        removed.dedup();
        segments.push(write_segment(store, &Segment { fragments: map.into_values().collect(), removed })?);
    }
    Ok(())
}
