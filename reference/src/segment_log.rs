//! The segment log: writes a commit's index segments and keeps the manifest's segment list
//! logarithmic by merging segments in tiers (SPEC.md §"The fragment log", SEG-09 and SEG-10).
//! No segment it writes, merged or not, has a body over the segment body limit the writer works
//! under (LIM-05, or a lower configured one, LIM-14).

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::envelope::{self, ObjectKind};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::manifest::{Fragment, Segment, SegmentRef};
use crate::paths;
use crate::store::Store;

/// Body bytes of a segment besides its entries: the lengths of its two lists (`u64` each).
const SEGMENT_FIXED: u64 = 16;
/// Body bytes of one removed id.
const REMOVED_ID: u64 = 8;

/// Stores a sealed segment object under its content key and returns its reference.
async fn put_segment(store: &Store, seg: &Segment, bytes: Vec<u8>) -> Result<SegmentRef> {
    let key = paths::content_key(paths::INDEX_DIR, "tsi", &bytes);
    let sref = SegmentRef {
        path: key.clone(),
        size: bytes.len() as u64,
        crc32: envelope::stored_crc(&bytes),
        fragment_count: seg.fragments.len() as u64,
        row_count: seg.fragments.iter().map(|f| f.row_count).sum(),
    };
    store.put_if_absent_async(&key, Bytes::from(bytes)).await?;
    Ok(sref)
}

/// Reads and decodes one segment of the log.
async fn read_segment(store: &Store, r: &SegmentRef, max_body: u64) -> Result<Segment> {
    let bytes = store.get_bounded_async(&r.path, envelope::max_object_len(max_body)).await?;
    envelope::open(ObjectKind::Segment, &bytes, max_body, &r.path)
}

/// Writes a commit's changes as one segment, or as several when one would have a body over
/// `max_body` `[SEG-09]`, and returns their references with the last segment's contents.
///
/// Split segments hold the removals first, then the fragments in id order, each filled up to
/// the limit: no segment removes an id that an earlier one lists, so applied in order they give
/// the fragments that the single segment would (SEG-08). Every segment is sealed before the
/// first one is stored.
///
/// # Errors
/// `limit` when one fragment record (or one removed id) does not fit in a segment body of
/// `max_body` on its own `[LIM-15]`; storage errors.
pub(crate) async fn write_segments(store: &Store, seg: &Segment, max_body: u64) -> Result<(Vec<SegmentRef>, Segment)> {
    let body = envelope::encode_body(seg)?;
    if body.len() as u64 <= max_body {
        let sref = put_segment(store, seg, envelope::frame(ObjectKind::Segment, &body)).await?;
        return Ok((vec![sref], seg.clone()));
    }
    let mut parts = vec![Segment { fragments: Vec::new(), removed: Vec::new() }];
    let mut used = SEGMENT_FIXED;
    let mut place = |parts: &mut Vec<Segment>, len: u64, what: &dyn Fn() -> String| -> Result<()> {
        Error::check_limit(|| format!("{}: segment body length [LIM-05]", what()), max_body, SEGMENT_FIXED + len)?;
        let last = parts.last().is_some_and(|p| !p.fragments.is_empty() || !p.removed.is_empty());
        if last && used + len > max_body {
            parts.push(Segment { fragments: Vec::new(), removed: Vec::new() });
            used = SEGMENT_FIXED;
        }
        used += len;
        Ok(())
    };
    for &id in &seg.removed {
        place(&mut parts, REMOVED_ID, &|| format!("removal of fragment {id}"))?;
        parts.last_mut().ok_or_else(|| Error::usage("no segment to fill"))?.removed.push(id);
    }
    for f in &seg.fragments {
        let len = envelope::encode_body(f)?.len() as u64;
        place(&mut parts, len, &|| format!("fragment {} record", f.id))?;
        parts.last_mut().ok_or_else(|| Error::usage("no segment to fill"))?.fragments.push(f.clone());
    }
    let sealed = parts
        .iter()
        .map(|p| envelope::seal_within(ObjectKind::Segment, p, max_body, "new index segment"))
        .collect::<Result<Vec<_>>>()?;
    let mut refs = Vec::with_capacity(parts.len());
    for (p, bytes) in parts.iter().zip(sealed) {
        refs.push(put_segment(store, p, bytes).await?);
    }
    let last = parts.pop().ok_or_else(|| Error::usage("no segment written"))?;
    Ok((refs, last))
}

/// The segment that gives the same fragments as `a` then `b` `[SEG-10]`.
fn merge_two(a: Segment, b: Segment) -> Segment {
    let mut map: BTreeMap<u64, Fragment> = a.fragments.into_iter().map(|f| (f.id, f)).collect();
    let mut removed = a.removed;
    for id in b.removed {
        // The id may also be listed by a segment older than `a`: keep the removal.
        map.remove(&id);
        removed.push(id);
    }
    map.extend(b.fragments.into_iter().map(|f| (f.id, f)));
    // Applying removals before listings makes a removal of a listed id redundant [SEG-03].
    removed.retain(|id| !map.contains_key(id));
    removed.sort_unstable();
    removed.dedup();
    Segment { fragments: map.into_values().collect(), removed }
}

/// Keeps the segment list logarithmic: while the newest segment is at least half the size of
/// the one before it, the two are merged into one (a binary counter over segment sizes). A
/// commit therefore rewrites O(change) index entries amortised, and a reader opens
/// O(log fragments) segments `[SEG-10]`.
///
/// A merge whose segment would have a body over `limits`' segment body limit is left undone and
/// ends the cascade: the merged segment is encoded and measured, never stored. The list then
/// starts with segments that could not merge (two neighbours together are over the limit, so
/// there are fewer than two per limit's worth of entries) and ends in tiers as before.
/// `newest`, the contents of the last segment of the list when the caller has them, saves
/// reading it back; each merged segment is kept in memory for the next step likewise.
///
/// # Errors
/// `limit` for a listed segment over the limit; storage and envelope errors.
pub(crate) async fn merge_tiers(
    store: &Store,
    segments: &mut Vec<SegmentRef>,
    mut newest: Option<Segment>,
    limits: &Limits,
) -> Result<()> {
    let max_body = limits.max_segment_body();
    let weight = |s: &SegmentRef| s.fragment_count.max(1);
    while let [.., older, newer] = segments.as_slice()
        && weight(newer) * 2 >= weight(older)
    {
        let b = match newest.take() {
            Some(seg) => seg,
            None => read_segment(store, newer, max_body).await?,
        };
        let merged = merge_two(read_segment(store, older, max_body).await?, b);
        let body = envelope::encode_body(&merged)?;
        if body.len() as u64 > max_body {
            // Leave the two segments as they are [SEG-10]; merging stops at the first such pair.
            break;
        }
        let sref = put_segment(store, &merged, envelope::frame(ObjectKind::Segment, &body)).await?;
        segments.truncate(segments.len() - 2);
        segments.push(sref);
        newest = Some(merged);
    }
    Ok(())
}
