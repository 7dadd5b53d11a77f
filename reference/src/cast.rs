//! Numbers into a column's element type: the one rule every front end applies when it turns
//! a user's values into a column's bytes (the Python package's `append` and
//! `write_fragments`, the CLI's `ingest` of JSON Lines).
//!
//! A value is stored only if the column can hold it:
//!
//! | into | an integer value | a floating-point value |
//! |---|---|---|
//! | `bool` | 0 or 1 | 0.0 or 1.0 |
//! | an integer type | within the type's range | finite, integral and within the range |
//! | a float type | rounded to nearest, ties to even; the result must be finite | NaN and ±∞ as they are; a finite value rounded to nearest (ties to even) must stay finite |
//!
//! So 300 does not go into `u8`, 1.5 or NaN not into `i32`, and 70000 not into `f16` (it
//! would become ∞); 0.1 does go into `f16`, as the nearest `f16`, because a float column
//! holds the nearest value by nature. Anything else is a [`CastError`] naming the value and
//! the reason; callers check a whole batch before they write any of it, so a bad value
//! commits nothing. Front ends may offer an explicit opt-out (the Python package's
//! `cast="unsafe"`: numpy's casting) — never as the default.

use crate::dtype::DType;
use std::fmt;

/// Why a value does not go into a column's element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CastReason {
    /// An integer outside the type's range, or a float beyond it.
    OutOfRange,
    /// A float with a fractional part, into an integer type.
    Fraction,
    /// NaN or ±∞, into an integer type or `bool`.
    NotFinite,
    /// A finite value that would round to ±∞ in the float type.
    Overflow,
    /// Neither 0 nor 1, into `bool`.
    NotBool,
    /// The column is `utf8` or `bytes`: numbers do not go there.
    NotNumeric,
}

impl fmt::Display for CastReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::OutOfRange => "out of range",
            Self::Fraction => "not an integer",
            Self::NotFinite => "not finite",
            Self::Overflow => "would become infinite",
            Self::NotBool => "neither 0 nor 1",
            Self::NotNumeric => "the column holds no numbers",
        })
    }
}

/// A value that does not go into a column's element type, at `index` of the values given.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("value {value} at index {index} does not fit {dtype}: {reason}")]
pub struct CastError {
    /// The value as the caller gave it.
    pub value: String,
    /// Its index among the values of the call.
    pub index: usize,
    /// The column's element type.
    pub dtype: DType,
    /// Why.
    pub reason: CastReason,
}

/// A number as a front end holds it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    /// A signed integer.
    I64(i64),
    /// An unsigned integer (for values above `i64::MAX`).
    U64(u64),
    /// A floating-point value.
    F64(f64),
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::I64(x) => write!(f, "{x}"),
            Self::U64(x) => write!(f, "{x}"),
            Self::F64(x) => write!(f, "{x:?}"),
        }
    }
}

/// Appends `x` in `dtype`'s little-endian bytes to `out`, if `dtype` can hold it (the rule
/// in the module documentation); `out` is unchanged on error.
///
/// # Errors
/// [`CastError`] (with `index` 0) when the value does not fit.
pub fn push_number(dtype: DType, x: Number, out: &mut Vec<u8>) -> Result<(), CastError> {
    encode(dtype, x, out).map_err(|reason| CastError { value: x.to_string(), index: 0, dtype, reason })
}

/// Appends every value of `values` in `dtype`'s bytes to `out`; on the first value that does
/// not fit, `out` is left as it was and the error names that value's index.
///
/// # Errors
/// [`CastError`] for the first value that does not fit.
pub fn push_numbers<I>(dtype: DType, values: I, out: &mut Vec<u8>) -> Result<(), CastError>
where
    I: IntoIterator<Item = Number>,
{
    let start = out.len();
    for (index, x) in values.into_iter().enumerate() {
        if let Err(reason) = encode(dtype, x, out) {
            out.truncate(start);
            return Err(CastError { value: x.to_string(), index, dtype, reason });
        }
    }
    Ok(())
}

/// Appends the bf16 of an `f32` to `out`: its upper half when its lower half is zero, so
/// every bf16 widened to `f32` by its bits (how Arrow and Parquet hold bf16 columns) comes
/// back bit for bit, signalling NaNs included; any other value as [`push_number`] rounds it.
///
/// # Errors
/// [`CastError`] (with `index` 0) for a finite value that would round to ±∞.
pub fn push_bf16_of_f32(x: f32, out: &mut Vec<u8>) -> Result<(), CastError> {
    let bits = x.to_bits();
    if bits.trailing_zeros() >= 16 {
        out.extend_from_slice(&((bits >> 16) as u16).to_le_bytes());
        Ok(())
    } else {
        push_number(DType::Bf16, Number::F64(f64::from(x)), out)
    }
}

fn encode(dtype: DType, x: Number, out: &mut Vec<u8>) -> Result<(), CastReason> {
    // An integer type: the value as an integer, within the type's range.
    macro_rules! int {
        ($t:ty) => {
            out.extend_from_slice(&<$t>::try_from(integer(x)?).map_err(|_| CastReason::OutOfRange)?.to_le_bytes())
        };
    }
    match dtype {
        DType::Bool => {
            let bit = match x {
                Number::I64(0) | Number::U64(0) => 0u8,
                Number::I64(1) | Number::U64(1) => 1,
                Number::F64(f) if !f.is_finite() => return Err(CastReason::NotFinite),
                Number::F64(f) if f.to_bits() == 0f64.to_bits() || f.to_bits() == (-0f64).to_bits() => 0,
                Number::F64(f) if f.to_bits() == 1f64.to_bits() => 1,
                _ => return Err(CastReason::NotBool),
            };
            out.push(bit);
        }
        DType::U8 => int!(u8),
        DType::U16 => int!(u16),
        DType::U32 => int!(u32),
        DType::U64 => int!(u64),
        DType::I8 => int!(i8),
        DType::I16 => int!(i16),
        DType::I32 => int!(i32),
        DType::I64 => int!(i64),
        DType::F64 => out.extend_from_slice(&finite_kept(x, to_f64(x), f64::is_finite)?.to_le_bytes()),
        DType::F32 => out.extend_from_slice(&finite_kept(x, to_f32(x), f32::is_finite)?.to_le_bytes()),
        // Rounding to f32 "to odd" first keeps a single rounding to nearest: f32 has more
        // than two bits beyond f16's and bf16's significands (the `half` crate's own f64
        // conversions drop low bits first, and its F16C path rounds twice).
        DType::F16 => {
            let h = half::f16::from_f32(f32_round_to_odd(x));
            out.extend_from_slice(&finite_kept(x, h, half::f16::is_finite)?.to_le_bytes());
        }
        DType::Bf16 => {
            let b = half::bf16::from_f32(f32_round_to_odd(x));
            out.extend_from_slice(&finite_kept(x, b, half::bf16::is_finite)?.to_le_bytes());
        }
        DType::Utf8 | DType::Bytes => return Err(CastReason::NotNumeric),
    }
    Ok(())
}

/// The value as an integer wide enough for every integer type, if it is one.
fn integer(x: Number) -> Result<i128, CastReason> {
    match x {
        Number::I64(i) => Ok(i128::from(i)),
        Number::U64(u) => Ok(i128::from(u)),
        Number::F64(f) if !f.is_finite() => Err(CastReason::NotFinite),
        Number::F64(f) if f.fract() != 0.0 => Err(CastReason::Fraction),
        // Integral and finite; beyond ±2^127 it is out of every integer type's range.
        Number::F64(f) if f.abs() >= 2f64.powi(127) => Err(CastReason::OutOfRange),
        #[allow(clippy::cast_possible_truncation)] // integral and below 2^127: exact
        Number::F64(f) => Ok(f as i128),
    }
}

/// Rounds to nearest, ties to even (Rust's `as` between integers and floats does).
fn to_f64(x: Number) -> f64 {
    match x {
        Number::I64(i) => i as f64,
        Number::U64(u) => u as f64,
        Number::F64(f) => f,
    }
}

/// Rounds to nearest, ties to even, once: from the integer or the f64 directly.
fn to_f32(x: Number) -> f32 {
    match x {
        Number::I64(i) => i as f32,
        Number::U64(u) => u as f32,
        Number::F64(f) => f as f32,
    }
}

/// `x` in f32 rounded "to odd": exact when f32 holds it, else whichever of its two f32
/// neighbours has an odd last significand bit (never ±∞ for a finite `x`). Rounding that
/// once more, to nearest, to a format with at least two fewer significand bits gives the
/// correctly rounded result of `x` itself.
#[allow(clippy::float_cmp)] // whether f32 holds the value exactly is the question
fn f32_round_to_odd(x: Number) -> f32 {
    let f = to_f32(x);
    if f.is_nan() {
        return f;
    }
    let exact = |f: f32| match x {
        Number::F64(v) => v.is_infinite() || f64::from(f) == v,
        #[allow(clippy::cast_possible_truncation)] // finite and integral beyond 2^24: exact
        Number::I64(_) | Number::U64(_) => f.is_finite() && f.fract() == 0.0 && f as i128 == integer_value(x),
    };
    if exact(f) {
        return f;
    }
    if f.is_infinite() {
        // A finite value beyond f32's range: its lower neighbour, f32::MAX, is odd.
        return f32::MAX.copysign(f);
    }
    if f.to_bits() & 1 == 1 {
        return f;
    }
    // `f` is even: the neighbour on x's other side is odd.
    let above = match x {
        Number::F64(v) => f64::from(f) > v,
        #[allow(clippy::cast_possible_truncation)] // integral (see above)
        Number::I64(_) | Number::U64(_) => f as i128 > integer_value(x),
    };
    if above { f.next_down() } else { f.next_up() }
}

/// An integer [`Number`]'s value (0 for a float, which never asks).
fn integer_value(x: Number) -> i128 {
    match x {
        Number::I64(i) => i128::from(i),
        Number::U64(u) => i128::from(u),
        Number::F64(_) => 0,
    }
}

/// `rounded`, unless a finite value became infinite.
fn finite_kept<T>(x: Number, rounded: T, is_finite: impl Fn(T) -> bool) -> Result<T, CastReason>
where
    T: Copy,
{
    let was_finite = match x {
        Number::F64(f) => f.is_finite(),
        Number::I64(_) | Number::U64(_) => true,
    };
    if was_finite && !is_finite(rounded) { Err(CastReason::Overflow) } else { Ok(rounded) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(dtype: DType, x: Number) -> Result<Vec<u8>, CastReason> {
        let mut out = Vec::new();
        push_number(dtype, x, &mut out).map(|()| out).map_err(|e| e.reason)
    }

    #[test]
    fn integers_must_be_in_range() {
        assert_eq!(one(DType::U8, Number::I64(255)), Ok(vec![255]));
        assert_eq!(one(DType::U8, Number::I64(256)), Err(CastReason::OutOfRange));
        assert_eq!(one(DType::U8, Number::I64(-1)), Err(CastReason::OutOfRange));
        assert_eq!(one(DType::I32, Number::I64(1 << 40)), Err(CastReason::OutOfRange));
        assert_eq!(one(DType::I64, Number::U64(u64::MAX)), Err(CastReason::OutOfRange));
        assert_eq!(one(DType::U64, Number::U64(u64::MAX)), Ok(vec![255; 8]));
        assert_eq!(one(DType::I8, Number::I64(-128)), Ok(vec![0x80]));
    }

    #[test]
    fn floats_into_integers_must_be_finite_integral_and_in_range() {
        assert_eq!(one(DType::U8, Number::F64(255.0)), Ok(vec![255]));
        assert_eq!(one(DType::U8, Number::F64(255.9)), Err(CastReason::Fraction));
        assert_eq!(one(DType::U8, Number::F64(0.5)), Err(CastReason::Fraction));
        assert_eq!(one(DType::U8, Number::F64(-1.0)), Err(CastReason::OutOfRange));
        assert_eq!(one(DType::I32, Number::F64(f64::NAN)), Err(CastReason::NotFinite));
        assert_eq!(one(DType::I32, Number::F64(f64::INFINITY)), Err(CastReason::NotFinite));
        assert_eq!(one(DType::I32, Number::F64(2f64.powi(40))), Err(CastReason::OutOfRange));
        assert_eq!(one(DType::I64, Number::F64(-(2f64.powi(63)))), Ok(i64::MIN.to_le_bytes().to_vec()));
        assert_eq!(one(DType::I64, Number::F64(2f64.powi(63))), Err(CastReason::OutOfRange));
        assert_eq!(one(DType::U64, Number::F64(1e300)), Err(CastReason::OutOfRange));
    }

    #[test]
    fn floats_round_to_nearest_but_never_overflow() {
        assert_eq!(one(DType::F16, Number::F64(65504.0)), Ok(half::f16::MAX.to_le_bytes().to_vec()));
        assert_eq!(one(DType::F16, Number::F64(70000.0)), Err(CastReason::Overflow));
        assert_eq!(one(DType::F16, Number::F64(1e6)), Err(CastReason::Overflow));
        assert_eq!(one(DType::F16, Number::I64(70000)), Err(CastReason::Overflow));
        assert_eq!(one(DType::F16, Number::F64(0.1)), Ok(half::f16::from_f64(0.1).to_le_bytes().to_vec()));
        assert_eq!(one(DType::F32, Number::F64(1e300)), Err(CastReason::Overflow));
        assert_eq!(one(DType::Bf16, Number::F64(1e39)), Err(CastReason::Overflow));
        assert_eq!(one(DType::Bf16, Number::F64(3e38)), Ok(half::bf16::from_f64(3e38).to_le_bytes().to_vec()));
        // Non-finite values stay what they are.
        assert_eq!(one(DType::F16, Number::F64(f64::INFINITY)), Ok(half::f16::INFINITY.to_le_bytes().to_vec()));
        let nan = one(DType::F32, Number::F64(f64::NAN)).unwrap();
        assert!(f32::from_le_bytes(nan.try_into().unwrap()).is_nan());
        // Ties to even, rounding once from the integer: 2^24 + 1 is halfway in f32.
        assert_eq!(one(DType::F32, Number::I64((1 << 24) + 1)), Ok(16_777_216f32.to_le_bytes().to_vec()));
    }

    #[test]
    fn half_precision_rounds_once_from_the_value_itself() {
        // 1 + 2^-8 is halfway between two bf16 values; 2^-40 more must round up. Dropping the
        // low bits of the f64 first (or rounding to f32 to nearest first) makes it a tie that
        // goes to even, 1.0.
        let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        assert_eq!(
            one(DType::Bf16, Number::F64(x)),
            Ok(half::bf16::from_f32(1.0 + 2f32.powi(-7)).to_le_bytes().to_vec())
        );
        let tie = 1.0 + 2f64.powi(-8);
        assert_eq!(one(DType::Bf16, Number::F64(tie)), Ok(half::bf16::ONE.to_le_bytes().to_vec()));
        // The same for f16: 1 + 2^-11 is a tie, 2^-40 more rounds up.
        let y = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(
            one(DType::F16, Number::F64(y)),
            Ok(half::f16::from_f32(1.0 + 2f32.powi(-10)).to_le_bytes().to_vec())
        );
        // An integer past 2^53 rounds once too: 2^60 + 2^52 is a bf16 tie, + 1 goes up.
        let big = (1i64 << 60) + (1 << 52) + 1;
        let up = half::bf16::from_f64(2f64.powi(60) + 2f64.powi(53));
        assert_eq!(one(DType::Bf16, Number::I64(big)), Ok(up.to_le_bytes().to_vec()));
        // Beyond f32's range: still infinite in bf16, an overflow.
        assert_eq!(one(DType::Bf16, Number::F64(1e300)), Err(CastReason::Overflow));
    }

    #[test]
    fn bf16_widened_to_f32_comes_back_bit_for_bit() {
        // Every bf16 widened by its bits, signalling NaNs included (`half`'s conversions
        // both ways quieten them).
        let mut out = Vec::new();
        for bits in 0..=u16::MAX {
            push_bf16_of_f32(f32::from_bits(u32::from(bits) << 16), &mut out).unwrap();
        }
        let back: Vec<u16> = out.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
        assert!(back.iter().copied().eq(0..=u16::MAX));
        // Other f32 values round as any number does, and may not overflow.
        let mut out = Vec::new();
        push_bf16_of_f32(1.0 + 2f32.powi(-8) + 2f32.powi(-20), &mut out).unwrap();
        assert_eq!(out, half::bf16::from_f32(1.0 + 2f32.powi(-7)).to_le_bytes());
        let e = push_bf16_of_f32(f32::MAX, &mut out).unwrap_err();
        assert_eq!(e.reason, CastReason::Overflow);
    }

    #[test]
    fn bool_takes_zero_and_one() {
        assert_eq!(one(DType::Bool, Number::I64(1)), Ok(vec![1]));
        assert_eq!(one(DType::Bool, Number::F64(0.0)), Ok(vec![0]));
        assert_eq!(one(DType::Bool, Number::I64(2)), Err(CastReason::NotBool));
        assert_eq!(one(DType::Bool, Number::F64(0.5)), Err(CastReason::NotBool));
        assert_eq!(one(DType::Utf8, Number::I64(1)), Err(CastReason::NotNumeric));
    }

    #[test]
    fn a_batch_is_all_or_nothing() {
        let mut out = vec![9];
        let e = push_numbers(DType::U8, [1.0, 2.0, 300.7, 4.0].map(Number::F64), &mut out).unwrap_err();
        assert_eq!((e.index, e.reason), (2, CastReason::Fraction));
        assert_eq!(out, vec![9]);
        assert_eq!(e.to_string(), "value 300.7 at index 2 does not fit u8: not an integer");
        push_numbers(DType::U8, [1.0, 2.0].map(Number::F64), &mut out).unwrap();
        assert_eq!(out, vec![9, 1, 2]);
    }
}
