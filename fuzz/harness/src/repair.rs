//! "Repair" passes: recompute the length fields and CRCs that a mutation broke, so the fuzzer
//! gets past the checksums to the semantic checks behind them. Inputs select repair with bit 0
//! of their flags byte; without it the bytes reach the reader as they are.
//!
//! Repairs only rewrite derived fields (lengths, CRCs, references' sizes and CRCs), never the
//! structure, and leave objects they cannot parse unchanged.

use std::collections::HashMap;

use tessera::datafile::{self, Footer};
use tessera::envelope::{self, HEADER_LEN, TRAILER_LEN};
use tessera::manifest::{Manifest, Segment, Tag};

use crate::known_bugs::bounded_decode;

/// Sets an enveloped object's `body_len` to what it holds and recomputes its CRC.
pub fn envelope(obj: &mut [u8]) {
    if obj.len() < HEADER_LEN + TRAILER_LEN {
        return;
    }
    let body_len = (obj.len() - HEADER_LEN - TRAILER_LEN) as u64;
    obj[16..24].copy_from_slice(&body_len.to_le_bytes());
    let end = obj.len() - TRAILER_LEN;
    let crc = crc32fast::hash(&obj[..end]);
    obj[end..].copy_from_slice(&crc.to_le_bytes());
}

/// Replaces an enveloped object's body, keeping its header (with the new length), and seals it.
fn rebody(obj: &mut Vec<u8>, body: &[u8]) {
    if obj.len() < HEADER_LEN {
        return;
    }
    obj.truncate(HEADER_LEN);
    obj.extend_from_slice(body);
    obj.extend_from_slice(&[0; TRAILER_LEN]);
    envelope(obj);
}

/// The footer range `footer_offset..size-24` a data file's trailer declares, if it fits.
fn footer_range(file: &[u8]) -> Option<std::ops::Range<usize>> {
    let n = file.len();
    let t = n.checked_sub(datafile::TRAILER_LEN as usize)?;
    let footer_len = u64::from_le_bytes(file[t..t + 8].try_into().ok()?);
    let start = (t as u64).checked_sub(footer_len)?;
    (start >= datafile::HEADER_LEN).then_some(start as usize..t)
}

/// Recomputes a data file's header CRC, every in-bounds block CRC in the footer, the footer CRC
/// in the trailer and the trailer CRC. The file keeps its length.
pub fn data_file(file: &mut [u8]) {
    if file.len() >= datafile::HEADER_LEN as usize {
        let crc = crc32fast::hash(&file[..28]);
        file[28..32].copy_from_slice(&crc.to_le_bytes());
    }
    let Some(fr) = footer_range(file) else { return };
    if let Ok(mut footer) = bounded_decode::<Footer>(&file[fr.clone()]) {
        for chunk in &mut footer.columns {
            let blocks = chunk
                .validity
                .iter_mut()
                .chain(chunk.shapes.iter_mut())
                .chain(chunk.pages.iter_mut().map(|p| &mut p.block));
            for b in blocks {
                let r = b.range();
                if r.end <= fr.start as u64 && r.start <= r.end {
                    b.crc32 = crc32fast::hash(&file[r.start as usize..r.end as usize]);
                }
            }
        }
        if let Ok(enc) = envelope::encode_body(&footer)
            && enc.len() == fr.len()
        {
            file[fr.clone()].copy_from_slice(&enc);
        }
    }
    let t = file.len() - datafile::TRAILER_LEN as usize;
    let crc = crc32fast::hash(&file[fr]);
    file[t + 8..t + 12].copy_from_slice(&crc.to_le_bytes());
    let tcrc = crc32fast::hash(&file[t..t + 12]);
    file[t + 12..t + 16].copy_from_slice(&tcrc.to_le_bytes());
}

/// The CRC of a data file's footer bytes (what `DataFileRef.footer_crc32` records).
fn footer_crc(file: &[u8]) -> Option<u32> {
    footer_range(file).map(|r| crc32fast::hash(&file[r]))
}

fn magic_kind(obj: &[u8]) -> Option<u8> {
    (obj.len() >= 8 && obj[0] == 0x89 && &obj[1..3] == b"TS").then(|| obj[3])
}

/// Repairs a whole store layout: data files and envelopes first, then every reference whose
/// target exists in the layout (segment → data files and deletion vectors, manifest →
/// segments, tag → manifest) gets the target's size and CRC. Objects are keyed as in the layout;
/// the first object of a key wins (as a create-if-absent store keeps it).
pub fn layout(objects: &mut [(String, Vec<u8>)]) {
    let mut first: HashMap<String, usize> = HashMap::new();
    for (i, (k, _)) in objects.iter().enumerate() {
        first.entry(k.clone()).or_insert(i);
    }
    for (_, obj) in objects.iter_mut() {
        match magic_kind(obj) {
            Some(b'D') => data_file(obj),
            Some(b'X' | b'T' | b'I' | b'M') => envelope(obj),
            _ => {}
        }
    }
    let get = |objects: &'_ [(String, Vec<u8>)], key: &str| -> Option<usize> {
        first.get(key).copied().filter(|&i| i < objects.len())
    };
    // Segments: data file and deletion vector references.
    let mut updates = Vec::new();
    for (i, (_, obj)) in objects.iter().enumerate() {
        let Some(body) = body_of(obj, b'I') else { continue };
        let Ok(mut seg) = bounded_decode::<Segment>(body) else { continue };
        for f in &mut seg.fragments {
            for file in &mut f.files {
                if let Some(j) = get(objects, &file.path) {
                    let d = &objects[j].1;
                    file.size = d.len() as u64;
                    file.footer_crc32 = footer_crc(d).unwrap_or(file.footer_crc32);
                }
            }
            if let Some(dref) = &mut f.deletion
                && let Some(j) = get(objects, &dref.path)
            {
                let d = &objects[j].1;
                dref.size = d.len() as u64;
                dref.crc32 = envelope::stored_crc(d);
            }
        }
        if let Ok(body) = envelope::encode_body(&seg) {
            updates.push((i, body));
        }
    }
    apply(objects, &mut updates);
    // Manifests: segment references.
    for (i, (_, obj)) in objects.iter().enumerate() {
        let Some(body) = body_of(obj, b'M') else { continue };
        let Ok(mut m) = bounded_decode::<Manifest>(body) else { continue };
        for s in &mut m.segments {
            let Some(j) = get(objects, &s.path) else { continue };
            let d = &objects[j].1;
            s.size = d.len() as u64;
            s.crc32 = envelope::stored_crc(d);
            if let Some(b) = body_of(d, b'I')
                && let Ok(seg) = bounded_decode::<Segment>(b)
            {
                s.fragment_count = seg.fragments.len() as u64;
                s.row_count = seg.fragments.iter().fold(0u64, |a, f| a.wrapping_add(f.row_count));
            }
        }
        if let Ok(body) = envelope::encode_body(&m) {
            updates.push((i, body));
        }
    }
    apply(objects, &mut updates);
    // Tags: the tagged manifest's CRC.
    for (i, (_, obj)) in objects.iter().enumerate() {
        let Some(body) = body_of(obj, b'T') else { continue };
        let Ok(mut t) = bounded_decode::<Tag>(body) else { continue };
        let key = tessera::paths::manifest_key(&t.target.branch, t.target.version);
        if let Some(j) = get(objects, &key) {
            t.manifest_crc32 = envelope::stored_crc(&objects[j].1);
        }
        if let Ok(body) = envelope::encode_body(&t) {
            updates.push((i, body));
        }
    }
    apply(objects, &mut updates);
}

/// The body of an enveloped object of the given magic kind.
fn body_of(obj: &[u8], kind: u8) -> Option<&[u8]> {
    (magic_kind(obj) == Some(kind) && obj.len() >= HEADER_LEN + TRAILER_LEN)
        .then(|| &obj[HEADER_LEN..obj.len() - TRAILER_LEN])
}

fn apply(objects: &mut [(String, Vec<u8>)], updates: &mut Vec<(usize, Vec<u8>)>) {
    for (i, body) in updates.drain(..) {
        rebody(&mut objects[i].1, &body);
    }
}
