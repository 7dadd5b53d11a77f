//! Host buffers owned by libtorch that the loader writes into directly: the crate's only
//! `unsafe` code.
//!
//! A [`HostBuffer`] is a contiguous 1-D `u8` CPU tensor (optionally in pinned memory). Workers
//! read, decompress and copy sample bytes straight into [`HostBuffer::bytes_mut`], and the
//! batch's tensors are zero-copy views of it ([`HostBuffer::view`]), so a batch tensor is
//! allocated once and filled in place.

use tch::{Device, Kind, Tensor};

use crate::error::{LoaderError, Result};

/// A libtorch-owned byte buffer the loader may write through a Rust slice.
#[derive(Debug)]
pub(crate) struct HostBuffer {
    storage: Tensor,
    capacity: usize,
}

impl HostBuffer {
    /// Allocates `capacity` zeroed bytes on the CPU, pinned for `pin` when given.
    ///
    /// Zeroing matters for soundness: [`HostBuffer::bytes_mut`] hands out `&mut [u8]`, and a
    /// Rust slice must never cover uninitialised memory (`Tensor::empty` would give that).
    pub(crate) fn new(capacity: usize, pin: Option<Device>) -> Result<Self> {
        let len = i64::try_from(capacity).map_err(|_| LoaderError::config("buffer size overflows i64"))?;
        let storage = Tensor::f_zeros([len], (Kind::Uint8, Device::Cpu))
            .map_err(|e| LoaderError::tensor(format!("allocating a {capacity}-byte batch buffer"), e))?;
        let storage = match pin {
            Some(device) => storage
                .f_pin_memory(device)
                .map_err(|e| LoaderError::tensor(format!("pinning a {capacity}-byte batch buffer"), e))?,
            None => storage,
        };
        if !storage.is_contiguous() || storage.kind() != Kind::Uint8 || storage.device() != Device::Cpu {
            return Err(LoaderError::WorkerPanicked("libtorch returned a non-contiguous host buffer".into()));
        }
        Ok(Self { storage, capacity })
    }

    /// Bytes the buffer holds.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The whole buffer as a mutable byte slice.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        if self.capacity == 0 {
            return &mut [];
        }
        let ptr = self.storage.data_ptr().cast::<u8>();
        if ptr.is_null() {
            return &mut [];
        }
        // SAFETY:
        // - `storage` is a contiguous 1-D Uint8 CPU tensor of exactly `capacity` elements that
        //   this struct created (checked in `new`), so `ptr..ptr+capacity` is one live
        //   allocation owned by libtorch, initialised (zeroed at allocation, then only ever
        //   written through this slice), and aligned for `u8`.
        // - The allocation lives as long as `storage`, which `self` owns; the returned slice
        //   borrows `self` mutably, so it cannot outlive the tensor or alias another slice
        //   from this method.
        // - Tensors that view this storage (from `view`) are read by the consumer only while
        //   it holds the batch; the pool hands a buffer back to a worker only after the batch
        //   that held its views was dropped, and a tensor taken out of a batch forfeits its
        //   buffer (see `pool`). Keeping a `shallow_clone` of a borrowed batch tensor past the
        //   batch's drop breaks that rule; the crate docs state it.
        unsafe { std::slice::from_raw_parts_mut(ptr, self.capacity) }
    }

    /// A tensor of `kind` and `shape` over the first `len` bytes (no copy: it shares the
    /// storage). `len` must equal the shape's element count times the kind's size.
    pub(crate) fn view(&self, len: usize, kind: Kind, shape: &[i64]) -> Result<Tensor> {
        let numel: i64 = shape.iter().product();
        let elt = kind.elt_size_in_bytes() as i64;
        if len > self.capacity || numel.checked_mul(elt) != Some(len as i64) {
            return Err(LoaderError::WorkerPanicked(format!(
                "view of {len} bytes as {kind:?}{shape:?} does not fit a {}-byte buffer",
                self.capacity
            )));
        }
        let ctx = || format!("viewing a batch buffer as {kind:?}{shape:?}");
        let bytes = self.storage.f_narrow(0, 0, len as i64).map_err(|e| LoaderError::tensor(ctx(), e))?;
        let typed = if kind == Kind::Uint8 {
            bytes
        } else {
            bytes.f_view_dtype(kind).map_err(|e| LoaderError::tensor(ctx(), e))?
        };
        typed.f_view(shape).map_err(|e| LoaderError::tensor(ctx(), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::float_cmp)] // exact bit patterns are written and read back
    fn writes_through_the_slice_show_in_views() {
        let mut b = HostBuffer::new(64, None).unwrap();
        assert!(b.bytes_mut().iter().all(|&x| x == 0));
        let vals = [1.5f32, -2.0, 3.25, 0.0];
        for (i, v) in vals.iter().enumerate() {
            b.bytes_mut()[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        let t = b.view(16, Kind::Float, &[2, 2]).unwrap();
        assert_eq!(t.size(), vec![2, 2]);
        let mut out = [0f32; 4];
        t.copy_data(&mut out, 4);
        assert_eq!(out, vals);
        // The view shares storage: a later write is visible (this is what the pool relies on
        // when it recycles the buffer, and why views must be gone by then).
        b.bytes_mut()[0..4].copy_from_slice(&7.0f32.to_le_bytes());
        t.copy_data(&mut out, 4);
        assert_eq!(out[0], 7.0);
        assert!(b.view(20, Kind::Float, &[2, 2]).is_err());
        assert!(b.view(128, Kind::Uint8, &[128]).is_err());
        let mut empty = HostBuffer::new(0, None).unwrap();
        assert!(empty.bytes_mut().is_empty());
        assert_eq!(empty.view(0, Kind::Int64, &[0, 3]).unwrap().size(), vec![0, 3]);
    }
}
