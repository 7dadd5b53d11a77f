//! Host buffers owned by libtorch that the loader writes into directly: the crate's only
//! `unsafe` code.
//!
//! A [`TensorBuffer`] is a contiguous 1-D `u8` CPU tensor (optionally in pinned memory). Workers
//! read, decompress and copy sample bytes straight into [`TensorBuffer::bytes_mut`], and the
//! batch's tensors are zero-copy views of it ([`TensorBuffer::view`]), so a batch tensor is
//! allocated once and filled in place.
//!
//! Reuse cannot be observed: libtorch counts the tensors that share a storage, and
//! [`TensorBuffer::bytes_mut`] hands out the bytes only while the buffer's own handle is the
//! storage's only user ([`TensorBuffer::is_exclusive`]). A view, `shallow_clone` or CPU
//! `to_device` of a batch tensor that the training loop keeps after dropping the batch keeps
//! the storage's count above one, so the pool lets that buffer go (it lives on with the
//! user's tensor) and allocates a new one instead of writing over it.

use tch::{Device, Kind, Tensor};
use tessera_loader::{BufferAllocator, HostBuffer as CoreBuffer, LoaderError, Result, Unsigned};

use crate::error::tensor_err;

unsafe extern "C" {
    /// `csrc/storage.cpp`: the number of tensors sharing `t`'s storage (-1 without one).
    fn tessera_storage_use_count(t: *const torch_sys::C_tensor) -> std::ffi::c_long;
}

/// How many tensors share `t`'s storage (`t` itself included).
// `c_long` is i64 on Linux but i32 on some targets (Windows): `i64::from` widens portably.
#[allow(clippy::useless_conversion)]
pub(crate) fn storage_users(t: &Tensor) -> i64 {
    // SAFETY: `t.as_ptr()` is the `at::Tensor*` tch keeps alive for as long as `t`, which
    // the borrow outlives; the shim only reads the storage's reference count (an atomic) and
    // handles an undefined tensor or one without storage.
    let users = unsafe { tessera_storage_use_count(t.as_ptr()) };
    i64::from(users)
}

/// A libtorch-owned byte buffer the loader may write through a Rust slice: what the tch
/// adapter's batches are filled into (the buffer type of its core
/// [`tessera_loader::Loader`]).
#[derive(Debug)]
pub struct TensorBuffer {
    storage: Tensor,
    capacity: usize,
    /// CUDA device whose stream may still read these bytes (a non-blocking copy was queued
    /// from them); synchronised before the buffer is refilled.
    pending_cuda: Option<usize>,
}

impl TensorBuffer {
    /// Allocates `capacity` zeroed bytes on the CPU, pinned for `pin` when given.
    ///
    /// Zeroing matters for soundness: [`TensorBuffer::bytes_mut`] hands out `&mut [u8]`, and a
    /// Rust slice must never cover uninitialised memory (`Tensor::empty` would give that).
    pub(crate) fn new(capacity: usize, pin: Option<Device>) -> Result<Self> {
        let len = i64::try_from(capacity).map_err(|_| LoaderError::config("buffer size overflows i64"))?;
        let storage = Tensor::f_zeros([len], (Kind::Uint8, Device::Cpu))
            .map_err(|e| tensor_err(format!("allocating a {capacity}-byte batch buffer"), e))?;
        let storage = match pin {
            Some(device) => storage
                .f_pin_memory(device)
                .map_err(|e| tensor_err(format!("pinning a {capacity}-byte batch buffer"), e))?,
            None => storage,
        };
        if !storage.is_contiguous() || storage.kind() != Kind::Uint8 || storage.device() != Device::Cpu {
            return Err(LoaderError::WorkerPanicked("libtorch returned a non-contiguous host buffer".into()));
        }
        Ok(Self { storage, capacity, pending_cuda: None })
    }

    /// Records that a non-blocking copy to CUDA device `index` reads these bytes.
    pub(crate) fn mark_cuda(&mut self, index: usize) {
        self.pending_cuda = Some(index);
    }

    /// True when no tensor but this buffer's own handle uses its storage: every view handed
    /// out has been dropped, so writing cannot change a tensor anyone can still read.
    pub(crate) fn is_exclusive(&self) -> bool {
        storage_users(&self.storage) == 1
    }

    /// The whole buffer as a mutable byte slice, or `None` while another tensor still
    /// shares the storage ([`TensorBuffer::is_exclusive`]).
    pub(crate) fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        if !self.is_exclusive() {
            return None;
        }
        if self.capacity == 0 {
            return Some(&mut []);
        }
        let ptr = self.storage.data_ptr().cast::<u8>();
        if ptr.is_null() {
            return Some(&mut []);
        }
        // SAFETY:
        // - `storage` is a contiguous 1-D Uint8 CPU tensor of exactly `capacity` elements that
        //   this struct created (checked in `new`), so `ptr..ptr+capacity` is one live
        //   allocation owned by libtorch, initialised (zeroed at allocation, then only ever
        //   written through this slice), and aligned for `u8`.
        // - The allocation lives as long as `storage`, which `self` owns; the returned slice
        //   borrows `self` mutably, so it cannot outlive the tensor or alias another slice
        //   from this method.
        // - No other tensor can read these bytes while the slice lives: `is_exclusive` just
        //   saw `storage` as the storage's only user, and new users are made only from
        //   `storage` itself (`view` takes `&self`, which the `&mut self` borrow excludes).
        //   Views handed out earlier and kept by the user (views, shallow clones, CPU
        //   `to_device`) each hold a use, so a buffer they still see is never written.
        Some(unsafe { std::slice::from_raw_parts_mut(ptr, self.capacity) })
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
        let bytes = self.storage.f_narrow(0, 0, len as i64).map_err(|e| tensor_err(ctx(), e))?;
        let typed =
            if kind == Kind::Uint8 { bytes } else { bytes.f_view_dtype(kind).map_err(|e| tensor_err(ctx(), e))? };
        typed.f_view(shape).map_err(|e| tensor_err(ctx(), e))
    }
}

impl CoreBuffer for TensorBuffer {
    fn capacity(&self) -> usize {
        self.capacity
    }

    fn is_exclusive(&self) -> bool {
        TensorBuffer::is_exclusive(self)
    }

    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        TensorBuffer::bytes_mut(self)
    }

    fn before_reuse(&mut self) {
        if let Some(index) = self.pending_cuda.take() {
            // The H2D copy queued from these pinned bytes must finish before they are
            // overwritten; tch exposes no events, so wait for the device.
            tch::Cuda::synchronize(index as i64);
        }
    }
}

/// Allocates batch buffers as libtorch tensors, pinned for a CUDA device when one is used.
#[derive(Debug)]
pub(crate) struct TchAllocator {
    pub(crate) pin: Option<Device>,
    /// How `u64` columns become `i64` (tch has no unsigned kinds wider than a byte).
    pub(crate) unsigned: Unsigned,
}

impl BufferAllocator for TchAllocator {
    type Buffer = TensorBuffer;

    fn allocate(&self, bytes: usize) -> Result<TensorBuffer> {
        TensorBuffer::new(bytes, self.pin)
    }

    fn unsigned(&self) -> Unsigned {
        self.unsigned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::float_cmp)] // exact bit patterns are written and read back
    fn writes_through_the_slice_show_in_views() {
        let mut b = TensorBuffer::new(64, None).unwrap();
        assert!(b.bytes_mut().unwrap().iter().all(|&x| x == 0));
        let vals = [1.5f32, -2.0, 3.25, 0.0];
        for (i, v) in vals.iter().enumerate() {
            b.bytes_mut().unwrap()[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        let t = b.view(16, Kind::Float, &[2, 2]).unwrap();
        assert_eq!(t.size(), vec![2, 2]);
        let mut out = [0f32; 4];
        t.copy_data(&mut out, 4);
        assert_eq!(out, vals);
        // While a view lives, the bytes cannot be written; once it is gone they can.
        assert!(!b.is_exclusive());
        assert!(b.bytes_mut().is_none());
        drop(t);
        assert!(b.is_exclusive());
        b.bytes_mut().unwrap()[0..4].copy_from_slice(&7.0f32.to_le_bytes());
        assert!(b.view(20, Kind::Float, &[2, 2]).is_err());
        assert!(b.view(128, Kind::Uint8, &[128]).is_err());
        let mut empty = TensorBuffer::new(0, None).unwrap();
        assert!(empty.bytes_mut().unwrap().is_empty());
        assert_eq!(empty.view(0, Kind::Int64, &[0, 3]).unwrap().size(), vec![0, 3]);
    }

    /// Every way of keeping an alias counts as a user: views of views, shallow clones, a
    /// CPU `to_device` (which returns the same storage), `view_dtype`, slicing.
    #[test]
    fn every_alias_counts_as_a_storage_user() {
        let mut b = TensorBuffer::new(64, None).unwrap();
        let v = b.view(64, Kind::Float, &[4, 4]).unwrap();
        let aliases: Vec<Tensor> = vec![
            v.shallow_clone(),
            v.view([16]),
            v.permute([1, 0]),
            v.to_device(Device::Cpu),
            v.view_dtype(Kind::Int),
            v.narrow(0, 1, 2),
            v.select(0, 0),
        ];
        drop(v);
        for (i, a) in aliases.into_iter().enumerate() {
            assert!(!b.is_exclusive(), "alias {i}");
            drop(a);
        }
        assert!(b.is_exclusive());
        // A copy does not share the storage.
        let copy = b.view(64, Kind::Uint8, &[64]).unwrap().copy();
        assert!(b.is_exclusive());
        assert!(b.bytes_mut().is_some());
        drop(copy);
    }
}
