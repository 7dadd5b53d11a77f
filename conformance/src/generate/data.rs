//! Building blocks for fixture datasets: rows from raw bytes, seeded random rows, batches.

use std::path::Path;

use tessera::{Batch, ColumnData, DType, Dataset, Dim, Element, Schema};

use super::options::Clock;
use super::prng::Prng;
use super::{Result, bail};

/// One non-null row: its full shape (`[len]` for utf8/bytes) and its little-endian bytes.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    /// The row's shape.
    pub(crate) shape: Vec<u64>,
    /// The row's bytes, C order.
    pub(crate) bytes: Vec<u8>,
}

impl Row {
    /// A row of typed elements with the given shape.
    pub(crate) fn of<T: Element>(shape: &[u64], values: &[T]) -> Self {
        Self { shape: shape.to_vec(), bytes: le(values) }
    }

    /// A utf8 row.
    pub(crate) fn text(s: &str) -> Self {
        Self { shape: vec![s.len() as u64], bytes: s.as_bytes().to_vec() }
    }

    /// A bytes row.
    pub(crate) fn blob(b: &[u8]) -> Self {
        Self { shape: vec![b.len() as u64], bytes: b.to_vec() }
    }

    /// A rank-1 row of raw element bytes (for f16/bf16, which have no Rust type here).
    pub(crate) fn raw(shape: &[u64], bytes: Vec<u8>) -> Self {
        Self { shape: shape.to_vec(), bytes }
    }
}

/// The little-endian bytes of typed values.
pub(crate) fn le<T: Element>(values: &[T]) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values {
        v.put_le(&mut out);
    }
    out
}

/// A column buffer from rows (`None` = null).
pub(crate) fn column(dtype: DType, shape: &[Dim], nullable: bool, rows: Vec<Option<Row>>) -> Result<ColumnData> {
    let mut c = ColumnData::empty(dtype, shape, nullable);
    for r in rows {
        match r {
            Some(r) => c.push_row(&r.shape, &r.bytes)?,
            None => c.push_null()?,
        }
    }
    Ok(c)
}

/// A non-nullable column from rows.
pub(crate) fn dense(dtype: DType, shape: &[Dim], rows: Vec<Row>) -> Result<ColumnData> {
    column(dtype, shape, false, rows.into_iter().map(Some).collect())
}

/// Characters random strings are made of: ASCII, Latin-1, CJK, emoji, a combining mark.
const CHARS: [&str; 12] = ["a", "b", "z", " ", "0", "é", "ß", "日", "本", "🙂", "e\u{301}", "\""];

/// A random row of a column of `dtype` and `shape`; ragged sizes are in `0..=max_ragged`.
pub(crate) fn random_row(rng: &mut Prng, dtype: DType, shape: &[Dim], max_ragged: u64) -> Row {
    if dtype == DType::Utf8 {
        let n = rng.range(0, max_ragged);
        let s: String = (0..n).map(|_| *rng.pick(&CHARS)).collect();
        return Row::text(&s);
    }
    if dtype == DType::Bytes {
        let n = rng.range(0, max_ragged) as usize;
        return Row::blob(&rng.bytes(n));
    }
    let full: Vec<u64> = shape
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => *n,
            Dim::Ragged => rng.range(0, max_ragged),
        })
        .collect();
    let n: u64 = full.iter().product();
    let bytes = if dtype == DType::Bool {
        (0..n).map(|_| (rng.next_u64() & 1) as u8).collect()
    } else {
        rng.bytes(n as usize * dtype.item_size())
    };
    Row::raw(&full, bytes)
}

/// `n` random non-null rows.
pub(crate) fn random_rows(rng: &mut Prng, dtype: DType, shape: &[Dim], n: usize, max_ragged: u64) -> Vec<Row> {
    (0..n).map(|_| random_row(rng, dtype, shape, max_ragged)).collect()
}

/// A random dense column.
pub(crate) fn random_column(
    rng: &mut Prng,
    dtype: DType,
    shape: &[Dim],
    n: usize,
    max_ragged: u64,
) -> Result<ColumnData> {
    dense(dtype, shape, random_rows(rng, dtype, shape, n, max_ragged))
}

/// A batch from named columns.
pub(crate) fn batch(cols: Vec<(&str, ColumnData)>) -> Result<Batch> {
    let mut b = Batch::new();
    for (name, data) in cols {
        b.push(name, data)?;
    }
    Ok(b)
}

/// A batch with a random column for every column of the schema.
pub(crate) fn random_batch(rng: &mut Prng, schema: &Schema, n: usize, max_ragged: u64) -> Result<Batch> {
    let mut b = Batch::new();
    for c in &schema.columns {
        b.push(c.name.clone(), random_column(rng, c.dtype, &c.shape, n, max_ragged)?)?;
    }
    Ok(b)
}

/// The path as a store location.
pub(crate) fn loc(p: &Path) -> Result<&str> {
    match p.to_str() {
        Some(s) if !s.contains("://") => Ok(s),
        _ => bail!("path {} cannot be a store location", p.display()),
    }
}

/// Creates a dataset (version 1, no rows) at `input`.
pub(crate) fn create(input: &Path, schema: Schema, clock: &mut Clock) -> Result<Dataset> {
    Ok(Dataset::create(loc(input)?, schema, &clock.tick())?)
}
