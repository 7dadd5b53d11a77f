//! Fuzz harness for the Tessera reference reader/writer.
//!
//! One function per fuzz target. Each takes untrusted bytes (or a structured
//! [`ArbitraryDataset`]), drives the reference crate through the same calls a reader makes, and
//! must never panic, abort, hang or allocate without bound: returning an error is fine, a panic
//! is a finding. Some functions also assert *oracles* (properties any correct reader has, e.g.
//! "a decoded body re-encodes to the same bytes"); a failed oracle panics as well.
//!
//! The functions are shared by the cargo-fuzz targets in `fuzz/fuzz_targets/` (one-liners) and
//! by the stable replay test `tests/replay.rs`, which runs every file of `fuzz/corpus/<target>/`
//! and `fuzz/regressions/<target>/` through the same function.
//!
//! Input formats (all start with a flags byte; bit 0 = "repair": recompute the length fields and
//! CRCs the input breaks, so mutations reach the checks behind the checksums):
//!
//! | target | input |
//! |---|---|
//! | `data_file` | `flags, schema_len u16, bincode Vec<Column> (schema_len bytes), data file` |
//! | `manifest`, `segment`, `tag`, `deletion_vector` | `flags, enveloped object` |
//! | `lz4_block`, `zstd_block` | `raw_len u32 LE (low 16 bits used), stored block` |
//! | `store_layout` | see [`layout`] |
//! | `roundtrip` | [`ArbitraryDataset`] via `arbitrary` |

use std::ops::Range;

use tessera::datafile::{self, DataFile, Footer};
use tessera::envelope::{self, ObjectKind};
use tessera::manifest::{DeletionRef, DeletionVector, Fragment, Manifest, Segment, SegmentRef, Tag};
use tessera::{Codec, Column, ColumnData, DType, Dim, Limits, Schema};

pub mod known_bugs;
pub mod layout;
pub mod repair;
mod roundtrip;
mod store_layout;

pub use roundtrip::{ArbitraryDataset, roundtrip};
pub use store_layout::store_layout;

/// Every target by name, as the fuzz targets and the corpus directories are named.
pub const TARGETS: [&str; 9] = [
    "data_file",
    "manifest",
    "segment",
    "tag",
    "deletion_vector",
    "lz4_block",
    "zstd_block",
    "store_layout",
    "roundtrip",
];

/// Reader limits for untrusted input: small enough that no declared size can make the reader
/// allocate much (16 MiB per block, 1 MiB manifests and footers, 4 MiB segments).
#[must_use]
pub fn limits() -> Limits {
    Limits::default()
        .with_max_block_raw(16 << 20)
        .with_max_manifest_body(1 << 20)
        .with_max_segment_body(4 << 20)
        .with_max_tag_body(64 << 10)
        .with_max_footer(1 << 20)
}

/// Largest raw length the block-codec targets declare (the low 16 bits of the length prefix;
/// larger blocks exercise no other decoder code, and allocations above 64 KiB are slow under
/// the address sanitizer).
pub const CODEC_MAX_RAW: u64 = (1 << 16) - 1;

/// Most rows a data-file decode is asked for in one call.
const MAX_DECODE_ROWS: u64 = 4096;

/// Runs an input through the target of that name (for the replay test and the seeder).
///
/// # Panics
/// On an unknown target name, and wherever the target itself panics (a finding).
pub fn run(target: &str, data: &[u8]) {
    match target {
        "data_file" => data_file(data),
        "manifest" => manifest(data),
        "segment" => segment(data),
        "tag" => tag(data),
        "deletion_vector" => deletion_vector(data),
        "lz4_block" => lz4_block(data),
        "zstd_block" => zstd_block(data),
        "store_layout" => store_layout(data),
        "roundtrip" => {
            let u = arbitrary::Unstructured::new(data);
            if let Ok(input) = <ArbitraryDataset as arbitrary::Arbitrary>::arbitrary_take_rest(u) {
                roundtrip(&input);
            }
        }
        other => panic!("unknown fuzz target {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Data files

/// Encodes the `data_file` input: flags, the expected schema columns, the file.
///
/// # Panics
/// If the columns encode to more than 64 KiB.
#[must_use]
pub fn encode_data_file_input(flags: u8, columns: &[Column], file: &[u8]) -> Vec<u8> {
    let schema = if columns.is_empty() {
        Vec::new()
    } else {
        envelope::encode_body(&columns.to_vec()).expect("columns always encode")
    };
    let len = u16::try_from(schema.len()).expect("schema prefix fits u16");
    let mut out = Vec::with_capacity(3 + schema.len() + file.len());
    out.push(flags);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&schema);
    out.extend_from_slice(file);
    out
}

/// Target: validate and decode one data file (`DataFile::open`, `blocks_for`, `decode`,
/// `check_padding`) against a schema given in the input or derived from the footer.
pub fn data_file(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else { return };
    let Some((len, rest)) = rest.split_first_chunk::<2>() else { return };
    let len = usize::from(u16::from_le_bytes(*len)).min(rest.len());
    let (schema_bytes, file) = rest.split_at(len);
    let mut file = file.to_vec();
    if flags & 1 != 0 {
        repair::data_file(&mut file);
    }
    let schema: Option<Vec<Column>> =
        if schema_bytes.is_empty() { None } else { known_bugs::bounded_decode(schema_bytes).ok() };
    check_data_file(&file, schema.as_deref(), flags & 2 != 0);
}

/// Opens a whole data file the way `Dataset::verify` does and decodes several row ranges of
/// every expected column. `columns` is the expected schema (derived from the footer if `None`).
fn check_data_file(file: &[u8], columns: Option<&[Column]>, all_columns_of_footer: bool) {
    let limits = limits();
    let what = "fuzz.tsd";
    if datafile::check_header(file.get(..32).unwrap_or(file), what).is_err() {
        return;
    }
    let size = file.len() as u64;
    let trailer = file.get(file.len().saturating_sub(24)..).unwrap_or(&[]);
    let Ok(tail) = datafile::parse_tail(trailer, size, &limits, what) else { return };
    // parse_tail guarantees footer_offset + footer_len == size - 24.
    let footer_bytes = &file[tail.footer_offset as usize..(tail.footer_offset + tail.footer_len) as usize];
    let Ok(footer) = envelope::decode_body::<Footer>(footer_bytes, what) else { return };
    let derived;
    let columns = if let Some(c) = columns {
        c
    } else {
        derived = derive_columns(&footer);
        &derived
    };
    // The reader only ever passes valid schema columns with unique ids.
    if columns.iter().any(|c| c.validate().is_err()) {
        return;
    }
    let mut ids: Vec<u32> = columns.iter().map(|c| c.id).collect();
    ids.sort_unstable();
    if ids.windows(2).any(|w| w[0] == w[1]) {
        return;
    }
    // By default expect the columns the footer holds (what a fragment reads from the file);
    // flag bit 1 expects the given schema's columns whether the footer holds them or not.
    let expected: Vec<&Column> = if all_columns_of_footer {
        columns.iter().collect()
    } else {
        columns.iter().filter(|c| footer.columns.iter().any(|ch| ch.column_id == c.id)).collect()
    };
    let rows = footer.row_count;
    let crc = crc32fast::hash(footer_bytes);
    let Ok(df) = DataFile::open(what, tail, footer_bytes, crc, rows, &expected, &limits) else { return };
    let _ = df.check_padding(file);
    for col in &expected {
        let Some(chunk) = df.chunk(col.id) else { panic!("validated file lacks expected column {}", col.id) };
        for range in decode_ranges(rows) {
            let (blocks, _) = df.blocks_for(chunk, &range);
            let stored: Vec<&[u8]> = blocks
                .iter()
                .map(|b| {
                    let r = b.range();
                    // check_block validated every block against the footer offset.
                    &file[r.start as usize..r.end as usize]
                })
                .collect();
            if let Ok(data) = df.decode(col, range.clone(), &stored) {
                check_column_data(&data, col, range.end - range.start);
            }
        }
    }
}

/// The row ranges decoded from a file of `rows` rows: the start, the end, one middle row and,
/// for small files, everything.
fn decode_ranges(rows: u64) -> Vec<Range<u64>> {
    let k = rows.min(8);
    let mut v = vec![0..k, rows - k..rows, rows / 2..(rows / 2 + 1).min(rows)];
    if rows <= MAX_DECODE_ROWS {
        v.push(0..rows);
    }
    v
}

/// A decoded buffer must be self-consistent: every row's bytes and shape are reachable.
pub(crate) fn check_column_data(data: &ColumnData, col: &Column, want_rows: u64) {
    assert_eq!(data.len() as u64, want_rows, "decode returned a different number of rows");
    assert_eq!(data.dtype(), col.dtype, "decode returned another dtype");
    assert_eq!(data.validity().is_some(), col.nullable, "decode returned another nullability");
    let item = col.dtype.item_size();
    for i in 0..data.len() {
        let row = data.row(i);
        let shape = data.row_shape(i);
        // The exact element count: zero when any dim is zero, even if a partial product of the
        // other dims overflows (the reader accepts such rows as empty).
        let elements = if shape.contains(&0) { Some(0) } else { shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)) };
        let want = if col.dtype.is_variable() { shape.first().copied() } else { elements.map(|e| e * item as u64) };
        assert_eq!(Some(row.len() as u64), want, "row {i}: bytes and shape disagree");
    }
}

/// A schema that fits a footer: the chunk's dtype and nullability, ragged dims as stored, and
/// for fixed-size chunks the row size implied by the first page.
fn derive_columns(footer: &Footer) -> Vec<Column> {
    footer
        .columns
        .iter()
        .take(64)
        .map(|ch| {
            let shape: Vec<Dim> = if ch.dtype.is_variable() {
                Vec::new()
            } else if ch.ragged_dims > 0 {
                vec![Dim::Ragged; ch.ragged_dims.min(8) as usize]
            } else {
                match ch.pages.first() {
                    Some(p) if p.row_count > 0 => {
                        let per_row = p.block.raw_len / p.row_count;
                        let item = ch.dtype.item_size() as u64;
                        if per_row == item && per_row * p.row_count == p.block.raw_len {
                            Vec::new()
                        } else {
                            vec![Dim::Fixed(per_row / item)]
                        }
                    }
                    _ => Vec::new(),
                }
            };
            let mut c = Column::new(format!("c{}", ch.column_id), ch.dtype, &shape);
            c.id = ch.column_id;
            c.nullable = ch.validity.is_some();
            c
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Enveloped objects

/// Splits off the flags byte and applies the envelope repair when asked.
fn envelope_input(data: &[u8]) -> Option<Vec<u8>> {
    let (&flags, rest) = data.split_first()?;
    let mut obj = rest.to_vec();
    if flags & 1 != 0 {
        repair::envelope(&mut obj);
    }
    Some(obj)
}

/// The body of a well-framed object (for the re-encoding oracle).
fn body(obj: &[u8]) -> &[u8] {
    &obj[envelope::HEADER_LEN..obj.len() - envelope::TRAILER_LEN]
}

/// Oracle: the body encoding is canonical, so a decoded value re-encodes to the same bytes.
fn assert_canonical<T: serde::Serialize>(value: &T, obj: &[u8], what: &str) {
    let again = envelope::encode_body(value).expect("decoded values encode");
    assert!(again == body(obj), "{what}: decoded body does not re-encode to the same bytes");
}

/// Target: decode and validate a manifest (`envelope::open`, `Manifest::validate`).
pub fn manifest(data: &[u8]) {
    let Some(obj) = envelope_input(data) else { return };
    let Ok(m) = envelope::open::<Manifest>(ObjectKind::Manifest, &obj, limits().max_manifest_body(), "fuzz.tsm") else {
        return;
    };
    assert_canonical(&m, &obj, "manifest");
    let _ = m.validate("main", 1, "fuzz.tsm");
    if m.validate(&m.branch.clone(), m.version, "fuzz.tsm").is_ok() {
        exercise_schema(&m.schema);
        let _ = m.version_ref();
    }
}

/// Pure schema helpers a reader calls on a validated schema.
fn exercise_schema(schema: &Schema) {
    for c in &schema.columns {
        let _ = c.ragged_dims();
        let _ = c.fixed_row_bytes();
        let _ = tessera::dump::column_json(c);
        let empty = ColumnData::for_column(c);
        assert_eq!(empty.len(), 0);
        assert!(schema.column(&c.name).is_some() && schema.column_by_id(c.id).is_some());
    }
}

/// Target: decode and validate an index segment (`envelope::open`, `Segment::validate`).
///
/// # Panics
/// When a validated fragment has more live rows than rows (a finding).
pub fn segment(data: &[u8]) {
    let Some(obj) = envelope_input(data) else { return };
    let Ok(seg) = envelope::open::<Segment>(ObjectKind::Segment, &obj, limits().max_segment_body(), "fuzz.tsi") else {
        return;
    };
    assert_canonical(&seg, &obj, "segment");
    // A reference that agrees with the segment, so validation runs to the end.
    let sref = SegmentRef {
        path: "index/fuzz.tsi".into(),
        size: obj.len() as u64,
        crc32: envelope::stored_crc(&obj),
        fragment_count: seg.fragments.len() as u64,
        row_count: seg.fragments.iter().fold(0u64, |a, f| a.wrapping_add(f.row_count)),
    };
    // Against an empty schema, and against one with every column id the files name.
    let mut ids: Vec<u32> = seg.fragments.iter().flat_map(|f| &f.files).flat_map(|f| &f.column_ids).copied().collect();
    ids.sort_unstable();
    ids.dedup();
    ids.truncate(16);
    let columns = ids.iter().map(|&id| {
        let mut c = Column::new(format!("c{id}"), DType::U8, &[]);
        c.id = id;
        c
    });
    let wide = Schema { columns: columns.collect(), metadata: Vec::new() };
    let _ = seg.validate(&sref, u64::MAX, "fuzz.tsi");
    for schema in [Schema::default(), wide] {
        for f in &seg.fragments {
            let _ = f.check_columns(&schema);
        }
    }
    for f in &seg.fragments {
        let live = f.live_rows();
        assert!(live <= f.row_count);
    }
}

/// Target: decode a tag record.
pub fn tag(data: &[u8]) {
    let Some(obj) = envelope_input(data) else { return };
    let Ok(t) = envelope::open::<Tag>(ObjectKind::Tag, &obj, limits().max_tag_body(), "fuzz.tst") else {
        return;
    };
    assert_canonical(&t, &obj, "tag");
    let _ = tessera::paths::validate_ref_name(&t.name);
    let _ = tessera::paths::validate_ref_name(&t.target.branch);
}

/// Target: decode and validate a deletion vector (`envelope::open`, `DeletionVector::validate`).
///
/// # Panics
/// When a vector that passed validation breaks what validation promises (a finding).
pub fn deletion_vector(data: &[u8]) {
    let Some(obj) = envelope_input(data) else { return };
    let Ok(dv) = envelope::open::<DeletionVector>(ObjectKind::Deletion, &obj, limits().max_segment_body(), "fuzz.tsx")
    else {
        return;
    };
    assert_canonical(&dv, &obj, "deletion vector");
    let rows = dv.rows.last().map_or(1, |&r| r.saturating_add(1));
    let fragment =
        Fragment { id: dv.fragment_id, row_count: rows, files: Vec::new(), deletion: None, stats: Vec::new() };
    let dref = DeletionRef {
        path: "deletions/fuzz.tsx".into(),
        size: obj.len() as u64,
        crc32: envelope::stored_crc(&obj),
        deleted_count: dv.rows.len() as u64,
    };
    if dv.validate(&fragment, &dref, "fuzz.tsx").is_ok() {
        // What the validation promises: strictly ascending rows below the fragment's.
        assert!(dv.rows.windows(2).all(|w| w[0] < w[1]));
        let f = Fragment { deletion: Some(dref), ..fragment };
        assert_eq!(f.live_rows(), f.row_count - dv.rows.len() as u64);
    }
}

// ---------------------------------------------------------------------------------------------
// Block codecs

fn block_target(codec: Codec, data: &[u8]) {
    let Some((len, stored)) = data.split_first_chunk::<4>() else { return };
    let raw_len = u64::from(u32::from_le_bytes(*len)) & CODEC_MAX_RAW;
    let what = || "fuzz block".to_string();
    // What the reader does with a block's declared sizes before allocating.
    if tessera::codec::check_sizes(codec, stored.len() as u64, raw_len, CODEC_MAX_RAW, &what).is_err() {
        return;
    }
    if let Ok(raw) = tessera::codec::decompress(codec, stored, raw_len as usize, &what) {
        assert_eq!(raw.len() as u64, raw_len, "decompress returned another length than declared");
        // Oracle: what decoded re-encodes and decodes to itself.
        let compression = match codec {
            Codec::None => tessera::Compression::None,
            Codec::Lz4 => tessera::Compression::Lz4,
            Codec::Zstd => tessera::Compression::Zstd { level: 1 },
            // Image pages never reach here: `decompress` refuses them.
            Codec::Jpeg | Codec::Png | Codec::WebP => return,
        };
        let again = tessera::codec::compress(compression, &raw).expect("compress");
        let back = tessera::codec::decompress(codec, &again, raw.len(), &what).expect("own output decodes");
        assert!(back == raw, "re-compressed block decodes to other bytes");
    }
    // And any bytes survive a compress/decompress round trip.
    if stored.len() <= 1 << 16 {
        for c in [tessera::Compression::Lz4, tessera::Compression::Zstd { level: 1 }] {
            if c.codec() != codec {
                continue;
            }
            let packed = tessera::codec::compress(c, stored).expect("compress");
            let back = tessera::codec::decompress(codec, &packed, stored.len(), &what).expect("round trip");
            assert!(back == stored, "round trip changed the bytes");
        }
    }
}

/// Target: LZ4 block decoding with a declared raw length (`codec::check_sizes`, `decompress`).
pub fn lz4_block(data: &[u8]) {
    block_target(Codec::Lz4, data);
}

/// Target: zstd frame decoding with a declared raw length (`codec::check_sizes`, `decompress`).
pub fn zstd_block(data: &[u8]) {
    block_target(Codec::Zstd, data);
}

/// Encodes the codec targets' input.
#[must_use]
pub fn encode_block_input(raw_len: u64, stored: &[u8]) -> Vec<u8> {
    let mut out = (raw_len as u32).to_le_bytes().to_vec();
    out.extend_from_slice(stored);
    out
}
