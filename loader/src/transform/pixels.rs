//! Element access for transforms: sources read as `f32`, destinations written from `f32`
//! in the batch's element type.

use crate::assemble::Elem;

/// Reads element `i` of a source as `f32` (`i` is in bounds: views are checked against
/// their source's length before any read).
pub(crate) trait Pixels {
    fn sample(&self, i: isize) -> f32;
}

impl Pixels for &[f32] {
    #[inline]
    #[allow(clippy::cast_sign_loss)] // checked views never reach below 0
    fn sample(&self, i: isize) -> f32 {
        self[i as usize]
    }
}

/// `u8` elements.
pub(crate) struct U8s<'a>(pub(crate) &'a [u8]);

impl Pixels for U8s<'_> {
    #[inline]
    #[allow(clippy::cast_sign_loss)]
    fn sample(&self, i: isize) -> f32 {
        f32::from(self.0[i as usize])
    }
}

/// Little-endian elements of any other type.
pub(crate) struct Le<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) elem: Elem,
}

impl Pixels for Le<'_> {
    #[inline]
    #[allow(clippy::cast_sign_loss, clippy::cast_possible_truncation, clippy::cast_precision_loss)]
    fn sample(&self, i: isize) -> f32 {
        let n = self.elem.size();
        let at = i as usize * n;
        let b = &self.bytes[at..at + n];
        let a2 = || [b[0], b[1]];
        let a4 = || [b[0], b[1], b[2], b[3]];
        let a8 = || [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
        match self.elem {
            Elem::Bool | Elem::U8 => f32::from(b[0]),
            Elem::I8 => f32::from(b[0] as i8),
            Elem::I16 => f32::from(i16::from_le_bytes(a2())),
            Elem::F16 => half::f16::from_le_bytes(a2()).to_f32(),
            Elem::Bf16 => half::bf16::from_le_bytes(a2()).to_f32(),
            Elem::I32 => i32::from_le_bytes(a4()) as f32,
            Elem::F32 => f32::from_le_bytes(a4()),
            Elem::I64 => i64::from_le_bytes(a8()) as f32,
            Elem::F64 => f64::from_le_bytes(a8()) as f32,
        }
    }
}

/// Writes `v` as element `i` of `out` in type `elem`: floats round to nearest even,
/// integers round half to even and saturate (NaN becomes 0), `bool` is `v != 0`.
#[inline]
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // `as` from float saturates
pub(crate) fn put(out: &mut [u8], i: usize, elem: Elem, v: f32) {
    let n = elem.size();
    let d = &mut out[i * n..(i + 1) * n];
    match elem {
        Elem::U8 => d[0] = v.round_ties_even() as u8,
        Elem::Bool => d[0] = u8::from(v != 0.0),
        Elem::I8 => d[0] = (v.round_ties_even() as i8) as u8,
        Elem::I16 => d.copy_from_slice(&(v.round_ties_even() as i16).to_le_bytes()),
        Elem::I32 => d.copy_from_slice(&(v.round_ties_even() as i32).to_le_bytes()),
        Elem::I64 => d.copy_from_slice(&(v.round_ties_even() as i64).to_le_bytes()),
        Elem::F16 => d.copy_from_slice(&half::f16::from_f32(v).to_le_bytes()),
        Elem::Bf16 => d.copy_from_slice(&half::bf16::from_f32(v).to_le_bytes()),
        Elem::F32 => d.copy_from_slice(&v.to_le_bytes()),
        Elem::F64 => d.copy_from_slice(&f64::from(v).to_le_bytes()),
    }
}
