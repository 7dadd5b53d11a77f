//! The one bridge between Tessera element types and Apache Arrow, used by the query engine
//! (`tessera-query`), `tessera export --format parquet` and Parquet / Arrow IPC ingest
//! (`tessera-ingest`). Its own crate so that ingest (and the Python package built on it)
//! reads Arrow without compiling `DataFusion`.
//!
//! | dtype | Arrow type |
//! |---|---|
//! | `bool` | `Boolean` |
//! | `u8` … `u64`, `i8` … `i64` | `UInt8` … `UInt64`, `Int8` … `Int64` |
//! | `f16`, `f32`, `f64` | `Float16`, `Float32`, `Float64` |
//! | `bf16` | `Float32`, widened exactly |
//! | `utf8`, `bytes` | `Utf8`, `Binary` (the query engine uses their view forms) |
//!
//! **bf16 is `Float32`.** Neither Arrow nor Parquet has a bfloat16 type. A bf16 is the upper
//! half of an f32, so widening is exact and every other tool (pandas, `DuckDB`, Hugging Face
//! datasets, SQL) reads the right numbers; the `UInt16` bit patterns an earlier export wrote
//! were lossless too but meaningless outside Tessera. The way back is exact as well: an
//! importer that knows the column is bf16 (the `tessera.schema.json` sidecar `export` writes)
//! narrows each value with [`tessera::cast::push_bf16_of_f32`], which returns the original
//! bits of every widened bf16, NaN payloads included. The price is twice the bytes of bf16 in
//! an exported file.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float16Array, Float32Array, Float64Array, Int8Array, Int16Array,
    Int32Array, Int64Array, UInt8Array, UInt16Array, UInt32Array, UInt64Array,
};
use arrow::datatypes::{self as adt, DataType};
use tessera::{DType, Element};

/// The Arrow type of one element of `dtype`.
#[must_use]
pub fn arrow_type(dtype: DType) -> DataType {
    match dtype {
        DType::Bool => DataType::Boolean,
        DType::U8 => DataType::UInt8,
        DType::U16 => DataType::UInt16,
        DType::U32 => DataType::UInt32,
        DType::U64 => DataType::UInt64,
        DType::I8 => DataType::Int8,
        DType::I16 => DataType::Int16,
        DType::I32 => DataType::Int32,
        DType::I64 => DataType::Int64,
        DType::F16 => DataType::Float16,
        DType::Bf16 | DType::F32 => DataType::Float32,
        DType::F64 => DataType::Float64,
        DType::Utf8 => DataType::Utf8,
        DType::Bytes => DataType::Binary,
    }
}

/// The dtype whose elements an Arrow boolean or primitive number type holds (`None` for
/// others). `Float32` is `f32`: only the column it goes into says it was bf16.
#[must_use]
pub fn dtype_of(dt: &DataType) -> Option<DType> {
    Some(match dt {
        DataType::Boolean => DType::Bool,
        DataType::Int8 => DType::I8,
        DataType::Int16 => DType::I16,
        DataType::Int32 => DType::I32,
        DataType::Int64 => DType::I64,
        DataType::UInt8 => DType::U8,
        DataType::UInt16 => DType::U16,
        DataType::UInt32 => DType::U32,
        DataType::UInt64 => DType::U64,
        DataType::Float16 => DType::F16,
        DataType::Float32 => DType::F32,
        DataType::Float64 => DType::F64,
        _ => return None,
    })
}

/// The elements of little-endian bytes (whole elements only).
fn each<T: Element>(le: &[u8]) -> impl Iterator<Item = T> + '_ {
    le.chunks_exact(size_of::<T>()).map(T::from_le)
}

/// Elements of a fixed-size dtype, little-endian and back to back, as one non-null array of
/// [`arrow_type`]`(dtype)`.
///
/// # Errors
/// A `utf8`/`bytes` dtype (no fixed element), or bytes that are not whole elements.
pub fn elements(dtype: DType, le: &[u8]) -> Result<ArrayRef, String> {
    let size = dtype.item_size();
    if !le.len().is_multiple_of(size) {
        return Err(format!("{} bytes are not whole {dtype} elements", le.len()));
    }
    Ok(match dtype {
        DType::Bool => Arc::new(le.iter().map(|&b| Some(b != 0)).collect::<BooleanArray>()),
        DType::U8 => Arc::new(UInt8Array::from(le.to_vec())),
        DType::U16 => Arc::new(UInt16Array::from_iter_values(each::<u16>(le))),
        DType::U32 => Arc::new(UInt32Array::from_iter_values(each::<u32>(le))),
        DType::U64 => Arc::new(UInt64Array::from_iter_values(each::<u64>(le))),
        DType::I8 => Arc::new(Int8Array::from_iter_values(each::<i8>(le))),
        DType::I16 => Arc::new(Int16Array::from_iter_values(each::<i16>(le))),
        DType::I32 => Arc::new(Int32Array::from_iter_values(each::<i32>(le))),
        DType::I64 => Arc::new(Int64Array::from_iter_values(each::<i64>(le))),
        DType::F16 => Arc::new(Float16Array::from_iter_values(each::<half::f16>(le))),
        // By the bits: `half`'s own widening quietens signalling NaNs.
        DType::Bf16 => {
            Arc::new(Float32Array::from_iter_values(each::<u16>(le).map(|b| f32::from_bits(u32::from(b) << 16))))
        }
        DType::F32 => Arc::new(Float32Array::from_iter_values(each::<f32>(le))),
        DType::F64 => Arc::new(Float64Array::from_iter_values(each::<f64>(le))),
        DType::Utf8 | DType::Bytes => return Err(format!("{dtype} has no fixed-size Arrow element")),
    })
}

/// A boolean or primitive number array's values as their dtype ([`dtype_of`]) and
/// little-endian bytes: the inverse of [`elements`] (bf16 aside, which comes back `f32`).
///
/// # Errors
/// A null element (tensors have none), or an array of another type.
pub fn element_bytes(a: &dyn Array) -> Result<(DType, Vec<u8>), String> {
    if a.null_count() > 0 {
        return Err("a list holds a null element (tensors have no null elements)".into());
    }
    let dtype =
        dtype_of(a.data_type()).ok_or_else(|| format!("list elements of type {} are not numbers", a.data_type()))?;
    macro_rules! le {
        ($t:ty) => {{
            let p = a.as_primitive_opt::<$t>().ok_or("not a primitive array")?;
            let mut out = Vec::with_capacity(p.len() * dtype.item_size());
            for x in p.values().iter() {
                out.extend_from_slice(&x.to_le_bytes());
            }
            out
        }};
    }
    let bytes = match dtype {
        DType::Bool => a.as_boolean_opt().ok_or("not a bool array")?.values().iter().map(u8::from).collect(),
        DType::I8 => le!(adt::Int8Type),
        DType::I16 => le!(adt::Int16Type),
        DType::I32 => le!(adt::Int32Type),
        DType::I64 => le!(adt::Int64Type),
        DType::U8 => le!(adt::UInt8Type),
        DType::U16 => le!(adt::UInt16Type),
        DType::U32 => le!(adt::UInt32Type),
        DType::U64 => le!(adt::UInt64Type),
        DType::F16 => le!(adt::Float16Type),
        DType::F32 => le!(adt::Float32Type),
        DType::F64 => le!(adt::Float64Type),
        DType::Bf16 | DType::Utf8 | DType::Bytes => return Err(format!("Arrow type {} is not mapped", a.data_type())),
    };
    Ok((dtype, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fixed_dtype_round_trips() {
        for d in DType::ALL.into_iter().filter(|d| !d.is_variable()) {
            let le: Vec<u8> =
                (0..4 * d.item_size()).map(|i| if d == DType::Bool { (i % 2) as u8 } else { i as u8 }).collect();
            let a = elements(d, &le).unwrap();
            assert_eq!(a.data_type(), &arrow_type(d));
            assert_eq!(a.len(), 4);
            let (back, bytes) = element_bytes(a.as_ref()).unwrap();
            if d == DType::Bf16 {
                assert_eq!(back, DType::F32);
                // The widened values carry the bf16 bits in their upper halves.
                let upper: Vec<u8> = bytes.chunks_exact(4).flat_map(|c| [c[2], c[3]]).collect();
                assert_eq!(upper, le);
            } else {
                assert_eq!((back, bytes), (d, le), "{d}");
            }
        }
        assert!(elements(DType::Utf8, b"ab").is_err());
        assert!(elements(DType::I32, &[0; 6]).is_err());
    }

    #[test]
    fn bf16_is_float32_with_its_value() {
        // 1.5, -0, +inf and a signalling NaN.
        let bits = [0x3fc0u16, 0x8000, 0x7f80, 0x7f81];
        let le: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
        let a = elements(DType::Bf16, &le).unwrap();
        let f = a.as_primitive::<adt::Float32Type>();
        assert_eq!(f.value(0).to_string(), "1.5", "a number other tools read as such");
        assert_eq!(
            f.values().iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            bits.map(|b| u32::from(b) << 16),
            "bit for bit, the NaN stays signalling"
        );
        assert_eq!(dtype_of(&DataType::Float32), Some(DType::F32));
        assert_eq!(dtype_of(&DataType::Utf8), None);
        let nulls = Int32Array::from(vec![Some(1), None]);
        assert!(element_bytes(&nulls).is_err());
    }
}
