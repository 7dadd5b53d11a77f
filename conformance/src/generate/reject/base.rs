//! The datasets the must-reject cases start from, and the edits most of them share (the
//! basic dataset's latest manifest, its data file and blocks, tag `t1`).

use std::path::Path;

use tessera::Dim::{Fixed, Ragged};
use tessera::datafile::{Block, Footer};
use tessera::envelope;
use tessera::{Codec, Column, ColumnData, Compression, DType, Dataset, Schema};

use crate::case::Args;
use crate::generate::data::{Row, batch, column, create};
use crate::generate::mutate::{Ds, FileLoc, RefUpdate, block_bytes, chunk, field_offset, reseal_block};
use crate::generate::options::Clock;
use crate::generate::prng::Prng;
use crate::generate::{Result, bail};

/// Column ids of the basic dataset.
pub(super) const ID: u32 = 0;
pub(super) const FLAGS: u32 = 1;
pub(super) const TOKENS: u32 = 2;
pub(super) const CAPTION: u32 = 3;
pub(super) const FEAT: u32 = 4;

/// The basic dataset every case without special needs starts from: main@1 (create) and
/// main@2 with 6 rows in one fragment, one data file holding
///
/// | id | column | dtype, shape | compression | blocks |
/// |---|---|---|---|---|
/// | 0 | `id` | i64 | none | page |
/// | 1 | `flags` | bool [2] | none | page |
/// | 2 | `tokens` | i32 [?] | zstd 3 | shapes, page (zstd) |
/// | 3 | `caption` | utf8, nullable | none | validity, shapes, page |
/// | 4 | `feat` | f32 [4] | lz4 | page (lz4) |
pub(super) fn basic(input: &Path) -> Result<(Dataset, Clock)> {
    let schema = Schema::new([
        Column::new("id", DType::I64, &[]),
        Column::new("flags", DType::Bool, &[Fixed(2)]),
        Column::new("tokens", DType::I32, &[Ragged]).with_compression(Compression::Zstd { level: 3 }),
        Column::new("caption", DType::Utf8, &[]).nullable(),
        Column::new("feat", DType::F32, &[Fixed(4)]).with_compression(Compression::Lz4),
    ])?;
    let mut rng = Prng::new(1001);
    let toks: Vec<Vec<i32>> =
        (0..6).map(|i| (0..10 + i).map(|j| [3, 3, 3, 9][j % 4] + i32::from(rng.below(2) == 0)).collect()).collect();
    let toks: Vec<&[i32]> = toks.iter().map(Vec::as_slice).collect();
    let caps = ["first row", "second", "", "fourth row", "fifth", "sixth row"];
    let caption =
        column(DType::Utf8, &[], true, caps.iter().enumerate().map(|(i, c)| (i != 2).then(|| Row::text(c))).collect())?;
    let feat: Vec<f32> = (0..24).map(|i| [0.5, 0.5, 0.25, 0.25][i % 4]).collect();
    let b = batch(vec![
        ("id", ColumnData::from_scalars(&[0i64, 1000, 2000, 3000, 4000, 5000])),
        (
            "flags",
            ColumnData::from_fixed(
                &[2],
                &[true, false, false, true, true, true, false, false, true, false, false, true],
            )?,
        ),
        ("tokens", ColumnData::from_sequences(&toks)),
        ("caption", caption),
        ("feat", ColumnData::from_fixed(&[4], &feat)?),
    ])?;
    let mut clock = Clock::new();
    let ds = create(input, schema, &mut clock)?;
    let v2 = ds.append(&b, "six rows", clock.tick())?;
    let footers = Ds::new(input).footers()?;
    let codec = |id: u32| footers[0].columns.iter().find(|c| c.column_id == id).map(|c| c.pages[0].block.codec);
    if footers.len() != 1 || codec(TOKENS) != Some(Codec::Zstd) || codec(FEAT) != Some(Codec::Lz4) {
        bail!("the basic dataset does not have the expected layout");
    }
    Ok((v2, clock))
}

/// The basic dataset, tagged `t1` at main@2.
pub(super) fn tagged(input: &Path) -> Result<()> {
    let (v2, mut clock) = basic(input)?;
    Ok(v2.create_tag("t1", "tagged for a fixture", &clock.tick())?)
}

/// The arguments that open tag `t1`.
pub(super) fn tag_t1() -> Args {
    Args { tag: Some("t1".into()), ..Args::default() }
}

/// The key of tag `t1`.
pub(super) const T1: &str = "tags/t1.tst";

/// Reads the basic dataset's main@2 manifest key and the data file of its one fragment.
pub(super) fn main_key(input: &Path) -> Result<(Ds, String)> {
    let ds = Ds::new(input);
    let m = ds.main()?;
    Ok((ds, m))
}

/// Edits the basic dataset's data file: blocks region and footer.
pub(super) fn edit_file(input: &Path, f: impl FnOnce(&mut Vec<u8>, &mut Footer) -> Result<()>) -> Result<()> {
    let (ds, m) = main_key(input)?;
    ds.edit_data_file(&m, FileLoc::default(), f)
}

/// Edits the basic dataset's data file bytes as they are.
pub(super) fn edit_file_raw(input: &Path, update: RefUpdate, f: impl FnOnce(&mut Vec<u8>)) -> Result<()> {
    let (ds, m) = main_key(input)?;
    ds.edit_data_file_raw(&m, FileLoc::default(), update, f)
}

/// The first page block of a column.
pub(super) fn page0(footer: &mut Footer, id: u32) -> Result<&mut Block> {
    match chunk(footer, id)?.pages.first_mut() {
        Some(p) => Ok(&mut p.block),
        None => bail!("column {id} has no page"),
    }
}

/// Bytes available to a block at its offset: up to the next block or the footer.
fn room(prefix: &[u8], footer: &Footer, b: &Block) -> u64 {
    footer
        .columns
        .iter()
        .flat_map(tessera::datafile::ColumnChunk::blocks)
        .map(|x| x.offset)
        .filter(|&o| o > b.offset)
        .min()
        .unwrap_or(prefix.len() as u64)
        - b.offset
}

/// Replaces a block's stored bytes (zero-filling what the old ones leave), fixing its length
/// and CRC.
pub(super) fn restore_block(prefix: &mut [u8], footer: &Footer, b: &mut Block, stored: &[u8]) -> Result<()> {
    if stored.len() as u64 > room(prefix, footer, b) {
        bail!("new block bytes do not fit");
    }
    block_bytes(prefix, b).fill(0);
    b.stored_len = stored.len() as u64;
    block_bytes(prefix, b).copy_from_slice(stored);
    reseal_block(prefix, b);
    Ok(())
}

/// The decoded bytes of a block.
pub(super) fn raw_of(prefix: &mut [u8], b: &Block) -> Result<Vec<u8>> {
    let stored = block_bytes(prefix, b).to_vec();
    Ok(tessera::codec::decompress(b.codec, &stored, b.raw_len as usize, &|| "fixture block".to_string())?)
}

/// Sets the 4-byte little-endian field at `at`.
pub(super) fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// The basic dataset with one enum field of its data file's footer set to the variant index
/// `value`: `change` selects the field by giving it some other valid variant, the differing
/// bytes locate it, and the index is written there (footer CRC, trailer and reference
/// re-sealed).
pub(super) fn footer_variant(input: &Path, change: impl Fn(&mut Footer) -> Result<()>, value: u32) -> Result<()> {
    basic(input)?;
    let (ds, m) = main_key(input)?;
    ds.edit_footer_bytes(&m, FileLoc::default(), |_, fb| {
        let a: Footer = envelope::decode_body(fb, "footer")?;
        let mut b = a.clone();
        change(&mut b)?;
        let at = field_offset(&envelope::encode_body(&a)?, &envelope::encode_body(&b)?)?;
        put_u32(fb, at, value);
        Ok(())
    })
}
