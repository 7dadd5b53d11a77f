//! The metadata envelope and the pinned bincode configuration (SPEC.md §"Metadata envelope",
//! §"Binary encoding").
//!
//! Manifests, index segments and tag records are serde structs encoded with bincode 2 in
//! little-endian, fixed-width-integer mode, framed as
//! `magic(8) | major u16 | minor u16 | reserved u32 | body_len u64 | body | crc32 u32`.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// Format major version this implementation reads and writes `[FLG-01]`.
pub const MAJOR: u16 = 1;
/// Format minor version this implementation writes.
pub const MINOR: u16 = 0;
/// Bytes before the body.
pub const HEADER_LEN: usize = 24;
/// Bytes after the body (the CRC).
pub const TRAILER_LEN: usize = 4;

/// The kinds of enveloped object, each with its magic number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    /// A version manifest (`.tsm`).
    Manifest,
    /// An index segment (`.tsi`).
    Segment,
    /// A tag record (`.tst`).
    Tag,
    /// A deletion vector (`.tsx`).
    Deletion,
    /// A view: a query's answer saved by name (`.tsview`).
    View,
    /// A node of a fragment tree (`.tsn`).
    Node,
    /// A vector index record (`.tsann`).
    VectorIndex,
}

impl ObjectKind {
    /// The eight magic bytes.
    #[must_use]
    pub fn magic(self) -> [u8; 8] {
        let c = match self {
            Self::Manifest => b'M',
            Self::Segment => b'I',
            Self::Tag => b'T',
            Self::Deletion => b'X',
            Self::View => b'V',
            Self::Node => b'N',
            Self::VectorIndex => b'A',
        };
        [0x89, b'T', b'S', c, b'\r', b'\n', 0x1a, b'\n']
    }

    fn name(self) -> &'static str {
        match self {
            Self::Manifest => "manifest",
            Self::Segment => "index segment",
            Self::Tag => "tag record",
            Self::Deletion => "deletion vector",
            Self::View => "view",
            Self::Node => "index node",
            Self::VectorIndex => "vector index",
        }
    }
}

/// The pinned bincode configuration `[ENC-01]`.
fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_little_endian().with_fixed_int_encoding()
}

/// Encodes a value with the pinned configuration (no framing).
///
/// # Errors
/// Only if serde reports an error, which the crate's own types never do.
pub fn encode_body<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    bincode::serde::encode_to_vec(value, config()).map_err(|e| Error::usage(format!("encoding failed: {e}")))
}

/// Decodes a complete body; trailing bytes are an error `[ENC-03]`.
///
/// Every length prefix is checked against the bytes that remain before anything is allocated
/// `[ENC-04]`: bincode counts the bytes each string and container claims against a limit, and
/// the limit used is the smallest of a fixed ladder (1 KiB, 4 KiB, … 1 GiB) that is at least
/// twice the body. A declared length can therefore never allocate more than a small multiple
/// of the bytes actually present.
///
/// # Errors
/// `malformed` when the bytes do not decode as `T`, claim more than the limit, or are not
/// consumed exactly.
pub fn decode_body<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T> {
    macro_rules! ladder {
        ($($limit:literal),*) => {{
            let need = bytes.len().saturating_mul(2);
            $(
                if need <= $limit {
                    let cfg = bincode::config::standard()
                        .with_little_endian()
                        .with_fixed_int_encoding()
                        .with_limit::<$limit>();
                    bincode::serde::decode_from_slice(bytes, cfg)
                } else
            )*
            {
                return Err(Error::malformed(what, "body is larger than any decodable object"));
            }
        }};
    }
    let decoded: std::result::Result<(T, usize), bincode::error::DecodeError> = ladder!(
        1024,
        4096,
        16384,
        65536,
        262_144,
        1_048_576,
        4_194_304,
        16_777_216,
        67_108_864,
        268_435_456,
        1_073_741_824
    );
    let (value, used) = decoded.map_err(|e| Error::malformed(what, format!("body does not decode: {e}")))?;
    if used != bytes.len() {
        return Err(Error::malformed(what, format!("{} trailing bytes after the body [ENC-03]", bytes.len() - used)));
    }
    Ok(value)
}

/// Frames a value as an enveloped object, without checking its body against a limit: for tools
/// that build objects by hand (conformance cases). Writers use [`seal_within`].
///
/// # Errors
/// See [`encode_body`].
pub fn seal<T: Serialize>(kind: ObjectKind, value: &T) -> Result<Vec<u8>> {
    Ok(frame(kind, &encode_body(value)?))
}

/// Frames a value as an enveloped object whose body is at most `max_body` bytes, the body
/// limit of its kind that the writer works under (LIM-05, or a lower configured one, LIM-14):
/// a writer never writes an object that a reader under the same limits must refuse `[LIM-15]`.
///
/// # Errors
/// `limit` when the body is over `max_body`; see [`encode_body`].
pub fn seal_within<T: Serialize>(kind: ObjectKind, value: &T, max_body: u64, what: &str) -> Result<Vec<u8>> {
    let body = encode_body(value)?;
    Error::check_limit(|| format!("{what} ({}): body length [LIM-05]", kind.name()), max_body, body.len() as u64)?;
    Ok(frame(kind, &body))
}

/// Frames an encoded body: header, body, CRC.
#[must_use]
pub fn frame(kind: ObjectKind, body: &[u8]) -> Vec<u8> {
    frame_major(kind, MAJOR, body)
}

/// Frames an encoded body under major version `major`: only a view has another (VIEW-11).
#[must_use]
pub fn frame_major(kind: ObjectKind, major: u16, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + body.len() + TRAILER_LEN);
    out.extend_from_slice(&kind.magic());
    out.extend_from_slice(&major.to_le_bytes());
    out.extend_from_slice(&MINOR.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(body);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The largest stored object whose body is at most `max_body` bytes: what a reader may GET
/// for an object of this kind before it has seen a byte of it `[ENV-04]`.
#[must_use]
pub fn max_object_len(max_body: u64) -> u64 {
    max_body.saturating_add((HEADER_LEN + TRAILER_LEN) as u64)
}

/// Validates the envelope in the order SPEC.md gives `[VAL-04]` and decodes the body.
///
/// # Errors
/// `malformed` (size, magic, reserved, length, CRC, body), `unsupported` (major), `limit`
/// (body length above `max_body`).
pub fn open<T: DeserializeOwned>(kind: ObjectKind, bytes: &[u8], max_body: u64, what: &str) -> Result<T> {
    open_checked(kind, bytes, max_body, what, |_| Ok(()))
}

/// As [`open`], running `precheck` on the body after the CRC check and before decoding (the
/// manifest's reader flags are checked there, so a future encoding is `unsupported`, not
/// `malformed`).
///
/// # Errors
/// As [`open`], and whatever `precheck` returns.
pub fn open_checked<T: DeserializeOwned>(
    kind: ObjectKind,
    bytes: &[u8],
    max_body: u64,
    what: &str,
    precheck: impl FnOnce(&[u8]) -> Result<()>,
) -> Result<T> {
    let what = format!("{what} ({})", kind.name());
    let (_, body) = check(kind, bytes, max_body, &what, &[MAJOR])?;
    precheck(body)?;
    decode_body(body, &what)
}

/// Runs the envelope checks of VAL-04 in order, accepting any major version in `majors`
/// (a view has two, VIEW-11), and returns the major version and the body, undecoded.
///
/// # Errors
/// As [`open`].
pub fn open_raw<'a>(
    kind: ObjectKind,
    bytes: &'a [u8],
    max_body: u64,
    what: &str,
    majors: &[u16],
) -> Result<(u16, &'a [u8])> {
    check(kind, bytes, max_body, &format!("{what} ({})", kind.name()), majors)
}

/// The checks of VAL-04; `what` already names the kind.
fn check<'a>(kind: ObjectKind, bytes: &'a [u8], max_body: u64, what: &str, majors: &[u16]) -> Result<(u16, &'a [u8])> {
    if bytes.len() < HEADER_LEN + TRAILER_LEN {
        return Err(Error::malformed(what, format!("{} bytes is shorter than the envelope [ENV-05]", bytes.len())));
    }
    if bytes[..8] != kind.magic() {
        return Err(Error::malformed(what, "bad magic [ENV-02]"));
    }
    let major = u16::from_le_bytes([bytes[8], bytes[9]]);
    if !majors.contains(&major) {
        return Err(Error::unsupported(what, format!("format major version {major} [FLG-01]")));
    }
    if bytes[12..16] != [0; 4] {
        return Err(Error::malformed(what, "reserved field is not zero [ENV-03]"));
    }
    let body_len = u64::from_le_bytes(le8(&bytes[16..24]));
    Error::check_limit(|| format!("{what}: body length"), max_body, body_len)?;
    let expected = (HEADER_LEN + TRAILER_LEN) as u64 + body_len;
    if expected != bytes.len() as u64 {
        return Err(Error::malformed(
            what,
            format!("object is {} bytes, envelope says {expected} [ENV-05]", bytes.len()),
        ));
    }
    let body_end = bytes.len() - TRAILER_LEN;
    let stored = u32::from_le_bytes([bytes[body_end], bytes[body_end + 1], bytes[body_end + 2], bytes[body_end + 3]]);
    let computed = crc32fast::hash(&bytes[..body_end]);
    if stored != computed {
        return Err(Error::Checksum { what: what.to_string(), stored, computed });
    }
    Ok((major, &bytes[HEADER_LEN..body_end]))
}

/// The CRC an enveloped object stores in its last four bytes: what references to the object
/// record `[ENV-09]`. (A CRC over the whole object including its own CRC would be the same
/// constant for every valid object, so it would bind nothing.) Zero for a too-short object.
#[must_use]
pub fn stored_crc(object: &[u8]) -> u32 {
    match object.len().checked_sub(TRAILER_LEN) {
        Some(at) if object.len() >= HEADER_LEN + TRAILER_LEN => {
            u32::from_le_bytes([object[at], object[at + 1], object[at + 2], object[at + 3]])
        }
        _ => 0,
    }
}

/// Copies 8 bytes into an array (the caller guarantees the length).
pub(crate) fn le8(b: &[u8]) -> [u8; 8] {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    enum E {
        A,
        B(u16),
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct S {
        flag: bool,
        n: u32,
        text: String,
        v: Vec<u8>,
        o: Option<u64>,
        e: E,
        id: [u8; 2],
    }

    /// Pins the encoding rules SPEC.md's table states, byte for byte `[ENC-01]`.
    #[test]
    fn bincode_layout_matches_the_spec_table() {
        let v = S { flag: true, n: 7, text: "hi".into(), v: vec![9], o: None, e: E::B(5), id: [1, 2] };
        let b = encode_body(&v).unwrap();
        let want: Vec<u8> = [
            &[1u8][..],
            &7u32.to_le_bytes(),
            &2u64.to_le_bytes(),
            b"hi",
            &1u64.to_le_bytes(),
            &[9],
            &[0],
            &1u32.to_le_bytes(),
            &5u16.to_le_bytes(),
            &[1, 2],
        ]
        .concat();
        assert_eq!(b, want);
        assert_eq!(decode_body::<S>(&b, "t").unwrap(), v);
        let unit = encode_body(&E::A).unwrap();
        assert_eq!(unit, 0u32.to_le_bytes());
    }

    /// Regression: a 45-byte object declaring a 1 TiB string once made the decoder abort
    /// trying to allocate it.
    #[test]
    fn declared_lengths_cannot_allocate_beyond_the_body() {
        let mut b = (1u64 << 40).to_le_bytes().to_vec();
        b.extend_from_slice(b"abc");
        let e = decode_body::<String>(&b, "t").unwrap_err();
        assert_eq!(e.class(), ErrorClass::Malformed);
        let e = decode_body::<Vec<String>>(&b, "t").unwrap_err();
        assert_eq!(e.class(), ErrorClass::Malformed);
        let mut b = 3u64.to_le_bytes().to_vec();
        b.extend_from_slice(b"abc");
        assert_eq!(decode_body::<String>(&b, "t").unwrap(), "abc");
    }

    #[test]
    fn envelope_checks_run_in_order() {
        let sealed = seal(ObjectKind::Tag, &7u64).unwrap();
        assert_eq!(open::<u64>(ObjectKind::Tag, &sealed, 100, "t").unwrap(), 7);
        let class = |b: &[u8]| open::<u64>(ObjectKind::Tag, b, 100, "t").unwrap_err().class();
        assert_eq!(class(&sealed[..10]), ErrorClass::Malformed);
        assert_eq!(open::<u64>(ObjectKind::Manifest, &sealed, 100, "t").unwrap_err().class(), ErrorClass::Malformed);
        let mut b = sealed.clone();
        b[8] = 2;
        assert_eq!(class(&b), ErrorClass::Unsupported);
        let mut b = sealed.clone();
        b[16] = 200;
        assert_eq!(class(&b), ErrorClass::Limit);
        let mut b = sealed.clone();
        b[25] ^= 1;
        assert_eq!(class(&b), ErrorClass::Malformed);
        let mut b = sealed.clone();
        b[12] = 1;
        assert_eq!(class(&b), ErrorClass::Malformed);
        // A body with a trailing byte, correctly framed, is still malformed.
        let mut body = encode_body(&7u64).unwrap();
        body.push(0);
        let mut framed = Vec::new();
        framed.extend_from_slice(&ObjectKind::Tag.magic());
        framed.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
        framed.extend_from_slice(&(body.len() as u64).to_le_bytes());
        framed.extend_from_slice(&body);
        let crc = crc32fast::hash(&framed);
        framed.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(class(&framed), ErrorClass::Malformed);
    }
}
