//! Test support shared by the core loader's integration tests: deterministic datasets written
//! through the reference writer, the bytes of filled columns, each row of a column in any
//! layout checked against the reference reader's rows, and helpers to drain epochs.
#![allow(dead_code, unreachable_pub, missing_docs, unused_imports)]

use tessera::{Dataset, Dim};
use tessera_loader::{AlignedBuffer, Elem, HostBatch, HostLayout, Loader};

mod datasets;
pub use datasets::*;

/// Retries fast enough for tests that inject faults: 12 tries, 1-8 ms apart.
pub fn fast_retries() -> tessera_loader::RetryPolicy {
    tessera_loader::RetryPolicy {
        max_retries: 12,
        initial_backoff: std::time::Duration::from_millis(1),
        max_backoff: std::time::Duration::from_millis(8),
        ..tessera_loader::RetryPolicy::default()
    }
}

/// Column `c`'s bytes in a batch filled into the default (aligned heap) buffers.
pub fn bytes(batch: &HostBatch, c: usize) -> Vec<u8> {
    let len = batch.columns[c].byte_len;
    batch.with_buffer(c, |b| b.bytes()[..len].to_vec()).unwrap()
}

/// Column `name`'s bytes.
pub fn named(batch: &HostBatch, name: &str) -> Vec<u8> {
    bytes(batch, batch.columns.iter().position(|c| c.name == name).unwrap())
}

/// The `i64` values of the column named `name`.
pub fn i64s(batch: &HostBatch, name: &str) -> Vec<i64> {
    let c = batch.columns.iter().position(|c| c.name == name).unwrap();
    assert_eq!(batch.columns[c].elem, Elem::I64, "column {name:?}");
    bytes(batch, c).chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect()
}

/// The `id` column of a batch.
pub fn ids(batch: &HostBatch) -> Vec<i64> {
    i64s(batch, "id")
}

/// Every batch's ids of one epoch.
pub fn epoch_ids(loader: &Loader, epoch: u64) -> Vec<Vec<i64>> {
    loader.epoch(epoch).unwrap().map(|b| ids(&b.unwrap())).collect()
}

/// A loader over a store built by the test, filling the default buffers.
pub fn open_store(store: &tessera::Store, config: tessera_loader::LoaderConfig) -> tessera_loader::Result<Loader> {
    Loader::open_store(store, config, std::sync::Arc::new(tessera_loader::AlignedAllocator))
}

/// Row `j` of column `c` of a batch, from `values` (the column's [`bytes`]): its full dims
/// and its elements' bytes, wherever its layout puts them. `column` is the stored column
/// (which dims are ragged). In a padded slot everything around the row must be zero, and a
/// packed row's span must hold exactly its dims' elements (both asserted).
pub fn row_of(batch: &HostBatch, c: usize, column: &tessera::Column, values: &[u8], j: usize) -> (Vec<u64>, Vec<u8>) {
    let col = &batch.columns[c];
    let name = &col.name;
    let size = col.elem.size();
    let elems = |dims: &[i64]| dims.iter().product::<i64>() as usize;
    let as_u64 = |dims: &[i64]| dims.iter().map(|&d| d as u64).collect::<Vec<u64>>();
    match &col.layout {
        HostLayout::Fixed => {
            let n = elems(&col.shape[1..]) * size;
            (as_u64(&col.shape[1..]), values[j * n..(j + 1) * n].to_vec())
        }
        HostLayout::Packed { offsets, shapes, .. } => {
            let ndim = if column.dtype.is_variable() { 1 } else { column.shape.len() };
            let dims = &shapes[j * ndim..(j + 1) * ndim];
            // Offsets count the values' first dim, whose elements span the other dims.
            let n = elems(&col.shape[1..]) * size;
            let row = &values[offsets[j] as usize * n..offsets[j + 1] as usize * n];
            assert_eq!(row.len(), elems(dims) * size, "column {name} slot {j}: the span between the offsets");
            (as_u64(dims), row.to_vec())
        }
        HostLayout::Padded { lengths, ragged_dims, .. } => {
            let mut sizes = lengths[j * ragged_dims..(j + 1) * ragged_dims].iter().map(|&l| l as u64);
            let dims: Vec<u64> = if column.dtype.is_variable() {
                sizes.collect()
            } else {
                column.shape.iter().map(|d| if let Dim::Fixed(x) = d { *x } else { sizes.next().unwrap() }).collect()
            };
            let slot_dims = as_u64(&col.shape[1..]);
            assert_eq!(dims.len(), slot_dims.len(), "column {name}: dims");
            assert!(
                dims.iter().zip(&slot_dims).all(|(d, s)| d <= s),
                "column {name} slot {j}: {dims:?} > {slot_dims:?}"
            );
            let n = elems(&col.shape[1..]) * size;
            let slot = &values[j * n..(j + 1) * n];
            // Walk the slot's elements in order: those inside the row's dims are the row,
            // the rest padding.
            let mut row = Vec::new();
            let mut at = vec![0u64; slot_dims.len()];
            for element in slot.chunks_exact(size) {
                if at.iter().zip(&dims).all(|(a, d)| a < d) {
                    row.extend_from_slice(element);
                } else {
                    assert!(element.iter().all(|&b| b == 0), "column {name} slot {j}: padding is not zero");
                }
                for k in (0..at.len()).rev() {
                    at[k] += 1;
                    if at[k] < slot_dims[k] {
                        break;
                    }
                    at[k] = 0;
                }
            }
            (dims, row)
        }
    }
}

/// Checks every column of `batch` against the reference reader's rows: each row's dims and
/// bytes (packed rows between their offsets with nothing else in the values, padded rows in
/// their slots with zero padding), ragged lengths and validity. Returns how many packed
/// columns it saw.
pub fn assert_reference_rows(ds: &Dataset, batch: &HostBatch) -> usize {
    let mut packed = 0;
    for (c, col) in batch.columns.iter().enumerate() {
        let name = col.name.as_str();
        let column = ds.schema().column(name).unwrap();
        assert_eq!(col.text, column.dtype.is_variable(), "column {name}: text");
        assert_eq!(col.byte_len, col.shape.iter().product::<i64>() as usize * col.elem.size(), "column {name}");
        let values = bytes(batch, c);
        let mut total = 0;
        for (j, &row) in batch.rows.iter().enumerate() {
            let r = ds.read_row(row, Some(&[name])).unwrap();
            let rc = r.get(name).unwrap();
            let (dims, got) = row_of(batch, c, column, &values, j);
            assert_eq!(dims, rc.row_shape(0), "column {name} row {row}: shape");
            assert_eq!(got, rc.row(0), "column {name} row {row}: values");
            total += got.len();
            if let Some(lengths) = col.layout.lengths() {
                let k = col.layout.ragged_dims();
                let want: Vec<i64> = rc.ragged_sizes().iter().map(|&x| x as i64).collect();
                assert_eq!(lengths[j * k..(j + 1) * k], want, "column {name} row {row}: lengths");
            }
            if let Some(valid) = &col.valid {
                assert_eq!(valid[j], rc.is_valid(0), "column {name} row {row}: validity");
            }
        }
        if let HostLayout::Packed { offsets, .. } = &col.layout {
            packed += 1;
            assert_eq!(col.byte_len, total, "column {name}: the values are the rows, nothing else");
            assert_eq!((offsets.len(), offsets[0]), (batch.rows.len() + 1, 0), "column {name}: offsets");
            assert_eq!(*offsets.last().unwrap(), col.shape[0], "column {name}: offsets end");
        }
    }
    packed
}
