//! Element types (SPEC.md §"Data types").

use serde::{Deserialize, Serialize};

/// The element type of a column. The discriminant is the on-disk code `[DT-01]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum DType {
    /// One byte, 0 or 1.
    Bool = 0,
    /// Unsigned 8-bit integer.
    U8 = 1,
    /// Unsigned 16-bit integer.
    U16 = 2,
    /// Unsigned 32-bit integer.
    U32 = 3,
    /// Unsigned 64-bit integer.
    U64 = 4,
    /// Signed 8-bit integer.
    I8 = 5,
    /// Signed 16-bit integer.
    I16 = 6,
    /// Signed 32-bit integer.
    I32 = 7,
    /// Signed 64-bit integer.
    I64 = 8,
    /// IEEE 754 binary16.
    F16 = 9,
    /// bfloat16 (the upper half of a binary32).
    Bf16 = 10,
    /// IEEE 754 binary32.
    F32 = 11,
    /// IEEE 754 binary64.
    F64 = 12,
    /// A UTF-8 string per row (variable length).
    Utf8 = 13,
    /// A byte string per row (variable length).
    Bytes = 14,
}

impl DType {
    /// All dtypes in code order.
    pub const ALL: [DType; 15] = [
        Self::Bool,
        Self::U8,
        Self::U16,
        Self::U32,
        Self::U64,
        Self::I8,
        Self::I16,
        Self::I32,
        Self::I64,
        Self::F16,
        Self::Bf16,
        Self::F32,
        Self::F64,
        Self::Utf8,
        Self::Bytes,
    ];

    /// Bytes per element; 1 for `utf8` and `bytes`, whose rows are byte sequences.
    #[must_use]
    pub fn item_size(self) -> usize {
        match self {
            Self::Bool | Self::U8 | Self::I8 | Self::Utf8 | Self::Bytes => 1,
            Self::U16 | Self::I16 | Self::F16 | Self::Bf16 => 2,
            Self::U32 | Self::I32 | Self::F32 => 4,
            Self::U64 | Self::I64 | Self::F64 => 8,
        }
    }

    /// The on-disk code.
    #[must_use]
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The dtype of an on-disk code, if known.
    #[must_use]
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.get(usize::from(code)).copied()
    }

    /// The name used in SPEC.md and the canonical dump (`u8`, `bf16`, `utf8`, …).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Bool => "bool",
            Self::U8 => "u8",
            Self::U16 => "u16",
            Self::U32 => "u32",
            Self::U64 => "u64",
            Self::I8 => "i8",
            Self::I16 => "i16",
            Self::I32 => "i32",
            Self::I64 => "i64",
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
            Self::F32 => "f32",
            Self::F64 => "f64",
            Self::Utf8 => "utf8",
            Self::Bytes => "bytes",
        }
    }

    /// The dtype of a name (the inverse of [`DType::name`]).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }

    /// True for `utf8` and `bytes`: one variable-length value per row.
    #[must_use]
    pub fn is_variable(self) -> bool {
        matches!(self, Self::Utf8 | Self::Bytes)
    }

    /// True for the integer dtypes.
    #[must_use]
    pub fn is_integer(self) -> bool {
        matches!(self, Self::U8 | Self::U16 | Self::U32 | Self::U64 | Self::I8 | Self::I16 | Self::I32 | Self::I64)
    }

    /// True for the floating-point dtypes.
    #[must_use]
    pub fn is_float(self) -> bool {
        matches!(self, Self::F16 | Self::Bf16 | Self::F32 | Self::F64)
    }

    /// True for integers, floats and bool.
    #[must_use]
    pub fn is_numeric(self) -> bool {
        self.is_integer() || self.is_float() || self == Self::Bool
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Rust element types that map to a fixed-size [`DType`], for typed constructors and views.
pub trait Element: Copy + 'static {
    /// The dtype.
    const DTYPE: DType;
    /// Appends the little-endian bytes of `self`.
    fn put_le(self, out: &mut Vec<u8>);
    /// Reads one element from exactly `size_of::<Self>()` little-endian bytes.
    fn from_le(bytes: &[u8]) -> Self;
}

macro_rules! element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DTYPE: DType = $d;
            fn put_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn from_le(bytes: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&bytes[..std::mem::size_of::<$t>()]);
                <$t>::from_le_bytes(a)
            }
        }
    };
}
element!(u8, DType::U8);
element!(u16, DType::U16);
element!(u32, DType::U32);
element!(u64, DType::U64);
element!(i8, DType::I8);
element!(i16, DType::I16);
element!(i32, DType::I32);
element!(i64, DType::I64);
element!(f32, DType::F32);
element!(f64, DType::F64);
element!(half::f16, DType::F16);
element!(half::bf16, DType::Bf16);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn put_le(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
    fn from_le(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_round_trip() {
        for (i, d) in DType::ALL.iter().enumerate() {
            assert_eq!(usize::from(d.code()), i);
            assert_eq!(DType::from_code(d.code()), Some(*d));
            assert_eq!(DType::from_name(d.name()), Some(*d));
        }
        assert_eq!(DType::from_code(15), None);
        assert_eq!(DType::from_name("float32"), None);
    }
}
