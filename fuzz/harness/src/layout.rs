//! The `store_layout` input: arbitrary bytes laid out as objects of a dataset root.
//!
//! ```text
//! flags u8 | { key_len u8 | key (UTF-8) | len u32 LE | bytes } …
//! ```
//! `flags` bit 0 asks for [`crate::repair::layout`]; bits 1–3 choose the version to open
//! ([`tessera::At`], see [`at`]). A truncated last record keeps what is there; at most
//! [`MAX_OBJECTS`] records are read.

use tessera::At;

/// Most objects one input lays out.
pub const MAX_OBJECTS: usize = 32;

/// A decoded layout.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// The flags byte.
    pub flags: u8,
    /// `(key, bytes)` in input order.
    pub objects: Vec<(String, Vec<u8>)>,
}

/// The version a flags byte asks to open.
#[must_use]
pub fn at(flags: u8) -> At {
    match (flags >> 1) & 7 {
        1 => At::Version(1),
        2 => At::Version(2),
        3 => At::Branch("dev".into()),
        4 => At::BranchVersion("dev".into(), 2),
        5 => At::Tag("t".into()),
        6 => At::Version(3),
        _ => At::Latest,
    }
}

/// The flags bits that select `at` (inverse of [`at`] for the seeds).
#[must_use]
pub fn at_bits(at: &At) -> u8 {
    let n = match at {
        At::Version(1) => 1,
        At::Version(2) => 2,
        At::Branch(_) => 3,
        At::BranchVersion(..) => 4,
        At::Tag(_) => 5,
        At::Version(_) => 6,
        At::Latest => 0,
    };
    n << 1
}

/// Parses an input; never fails (garbage gives fewer objects).
#[must_use]
pub fn decode(data: &[u8]) -> Layout {
    let Some((&flags, mut rest)) = data.split_first() else { return Layout::default() };
    let mut objects = Vec::new();
    while objects.len() < MAX_OBJECTS {
        let Some((&klen, r)) = rest.split_first() else { break };
        let klen = usize::from(klen).min(r.len());
        let (key, r) = r.split_at(klen);
        let Some((len, r)) = r.split_first_chunk::<4>() else { break };
        let len = (u32::from_le_bytes(*len) as usize).min(r.len());
        let (bytes, r) = r.split_at(len);
        rest = r;
        if let Ok(key) = std::str::from_utf8(key)
            && !key.is_empty()
        {
            objects.push((key.to_string(), bytes.to_vec()));
        }
    }
    Layout { flags, objects }
}

/// Encodes a layout (keys longer than 255 bytes are cut).
#[must_use]
pub fn encode(layout: &Layout) -> Vec<u8> {
    let mut out = vec![layout.flags];
    for (k, v) in layout.objects.iter().take(MAX_OBJECTS) {
        let k = &k.as_bytes()[..k.len().min(255)];
        out.push(k.len() as u8);
        out.extend_from_slice(k);
        out.extend_from_slice(&u32::try_from(v.len()).unwrap_or(u32::MAX).to_le_bytes());
        out.extend_from_slice(v);
    }
    out
}
