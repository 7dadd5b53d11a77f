//! Element types: the core hands out the stored unsigned types, and widens them only for an
//! adapter that asks (`BufferAllocator::unsigned`), while rows are copied.

mod common;

use tessera::{Batch, Column, ColumnData, DType, Dataset, Schema, WriteOptions};
use tessera_loader::{
    AlignedAllocator, AlignedBuffer, BufferAllocator, Elem, Loader, LoaderConfig, LoaderError, ShuffleMode, Unsigned,
};

/// The default buffers, for an adapter that takes unsigned types `as`.
#[derive(Debug)]
struct Widening(Unsigned);

impl BufferAllocator for Widening {
    type Buffer = AlignedBuffer;

    fn allocate(&self, bytes: usize) -> tessera_loader::Result<AlignedBuffer> {
        AlignedAllocator.allocate(bytes)
    }

    fn unsigned(&self) -> Unsigned {
        self.0
    }
}

const U16: [u16; 3] = [0, 40_000, u16::MAX];
const U32: [u32; 3] = [0, 3_000_000_000, u32::MAX];

fn dataset(root: &str, u64s: [u64; 3]) {
    let schema = Schema::new([
        Column::new("a", DType::U16, &[]),
        Column::new("b", DType::U32, &[]),
        Column::new("c", DType::U64, &[]),
    ])
    .unwrap();
    let ds = Dataset::create(root, schema, &WriteOptions::default()).unwrap();
    let batch = Batch::new()
        .with("a", ColumnData::from_scalars(&U16))
        .unwrap()
        .with("b", ColumnData::from_scalars(&U32))
        .unwrap()
        .with("c", ColumnData::from_scalars(&u64s))
        .unwrap();
    ds.append(&batch, "unsigned", WriteOptions::default()).unwrap();
}

fn config(root: &str) -> LoaderConfig {
    LoaderConfig::new(root).with_batch_size(3).with_shuffle(ShuffleMode::None)
}

/// The one batch's (element type, bytes) per column.
fn read(root: &str, unsigned: Unsigned) -> tessera_loader::Result<Vec<(Elem, Vec<u8>)>> {
    let loader = Loader::open_with_allocator(config(root), Widening(unsigned))?;
    let batch = loader.epoch(0)?.next().unwrap()?;
    Ok((0..3).map(|c| (batch.columns[c].elem, common::bytes(&batch, c))).collect())
}

fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

#[test]
fn unsigned_columns_come_as_stored_unless_the_adapter_widens_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let u64s = [0, 1 << 40, u64::MAX];
    dataset(root, u64s);

    let stored = read(root, Unsigned::Stored).unwrap();
    assert_eq!(stored[0], (Elem::U16, le(&U16, u16::to_le_bytes)));
    assert_eq!(stored[1], (Elem::U32, le(&U32, u32::to_le_bytes)));
    assert_eq!(stored[2], (Elem::U64, le(&u64s, u64::to_le_bytes)));
    // The default buffers without a hook take the stored types too.
    let loader = Loader::open(config(root)).unwrap();
    let batch = loader.epoch(0).unwrap().next().unwrap().unwrap();
    assert_eq!(batch.columns.iter().map(|c| c.elem).collect::<Vec<_>>(), [Elem::U16, Elem::U32, Elem::U64]);

    let bits = read(root, Unsigned::WidenedBits).unwrap();
    assert_eq!(bits[0], (Elem::I32, le(&U16.map(i32::from), i32::to_le_bytes)));
    assert_eq!(bits[1], (Elem::I64, le(&U32.map(i64::from), i64::to_le_bytes)));
    assert_eq!(bits[2], (Elem::I64, le(&[0i64, 1 << 40, -1], i64::to_le_bytes)), "u64::MAX keeps its bits");

    // Widened by value, a u64 above i64::MAX cannot be represented.
    match read(root, Unsigned::Widened) {
        Err(LoaderError::Unrepresentable { what, .. }) => assert!(what.contains("\"c\""), "{what}"),
        other => panic!("expected Unrepresentable, got {other:?}"),
    }
}

#[test]
fn widened_u64_values_that_fit_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let u64s = [0, 7, i64::MAX as u64];
    dataset(root, u64s);
    let widened = read(root, Unsigned::Widened).unwrap();
    assert_eq!(widened[2], (Elem::I64, le(&[0i64, 7, i64::MAX], i64::to_le_bytes)));
}
