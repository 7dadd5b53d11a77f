//! The host memory batches are filled into, and the hook a framework adapter supplies to
//! allocate it.
//!
//! The core fills a [`HostBuffer`] per column and batch, then hands the filled batch out; an
//! adapter (tch, Python) wraps the bytes as its own tensors without copying. The adapter's
//! [`BufferAllocator`] decides where the bytes live (a libtorch tensor's storage, pinned
//! memory, a numpy array), and its buffers say when nobody but the loader uses them any more,
//! so a buffer is refilled only when no tensor can see it change.
//!
//! The buffer type is the allocator's [`BufferAllocator::Buffer`], and it stays a type
//! parameter of everything that holds one (`Loader<B>`, `HostBatch<B>`, `Lease<B>`): an
//! adapter gets back the buffers its own allocator made, typed, never recovered by a
//! runtime downcast.

use std::fmt::Debug;

use crate::assemble::Unsigned;
use crate::error::{LoaderError, Result};

/// Alignment of every buffer the core allocates itself (and the minimum adapters should
/// honour): a cache line, and what SIMD kernels and `DLPack` consumers prefer.
pub const BUFFER_ALIGN: usize = 64;

/// A batch buffer: `capacity` bytes the loader writes through [`HostBuffer::bytes_mut`].
///
/// Only `Send` is required: the core never shares a buffer between threads (a worker owns it
/// while filling it; otherwise it sits behind the pool's or a batch lease's mutex).
pub trait HostBuffer: Send + Debug + 'static {
    /// Bytes the buffer holds.
    fn capacity(&self) -> usize;

    /// True when no one but the loader can read the bytes (every view handed out was
    /// dropped), so writing them cannot change anything a user holds.
    fn is_exclusive(&self) -> bool;

    /// The whole buffer for writing, or `None` while it is not exclusive.
    fn bytes_mut(&mut self) -> Option<&mut [u8]>;

    /// The whole buffer for reading where the adapter can lend it (the core's own buffers
    /// can); `None` otherwise. What reads a batch on the host after it is filled, such as
    /// [`crate::packing`], needs it.
    fn bytes(&self) -> Option<&[u8]> {
        None
    }

    /// Called before a returned buffer is filled again (for example to wait for an
    /// asynchronous device copy that reads it).
    fn before_reuse(&mut self) {}
}

/// The hook a framework adapter supplies when it opens a loader: where batch bytes live
/// (`allocate`) and which element types its framework takes (`unsigned`).
pub trait BufferAllocator: Send + Sync + Debug + 'static {
    /// The buffers it makes: what the loader's batches then hold.
    type Buffer: HostBuffer;

    /// A zero-filled buffer of `bytes` bytes, aligned to at least [`BUFFER_ALIGN`].
    ///
    /// # Errors
    /// An allocation failure, as [`LoaderError::Framework`] or [`LoaderError::Budget`].
    fn allocate(&self, bytes: usize) -> Result<Self::Buffer>;

    /// How stored `u16`/`u32`/`u64` columns reach this adapter: as stored unless its
    /// framework lacks unsigned types.
    fn unsigned(&self) -> Unsigned {
        Unsigned::Stored
    }
}

/// A shared allocator (an adapter that keeps a handle to it, say to count what it made).
impl<A: BufferAllocator + ?Sized> BufferAllocator for std::sync::Arc<A> {
    type Buffer = A::Buffer;

    fn allocate(&self, bytes: usize) -> Result<A::Buffer> {
        (**self).allocate(bytes)
    }

    fn unsigned(&self) -> Unsigned {
        (**self).unsigned()
    }
}

/// 64-byte aligned heap memory owned by the loader: the default buffers, for consumers that
/// copy out or borrow the bytes for as long as they hold the batch.
#[derive(Debug)]
pub struct AlignedBuffer {
    blocks: Vec<Block>,
    len: usize,
}

/// One aligned unit of an [`AlignedBuffer`].
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Block([u8; BUFFER_ALIGN]);

impl AlignedBuffer {
    /// A zeroed buffer of `len` bytes.
    ///
    /// # Errors
    /// [`LoaderError::Config`] when the size overflows.
    pub fn new(len: usize) -> Result<Self> {
        let blocks = len.div_ceil(BUFFER_ALIGN);
        let mut v = Vec::new();
        v.try_reserve_exact(blocks)
            .map_err(|e| LoaderError::config(format!("allocating a {len}-byte batch buffer: {e}")))?;
        v.resize(blocks, Block([0; BUFFER_ALIGN]));
        Ok(Self { blocks: v, len })
    }

    /// The bytes.
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        let all: &[u8] = bytemuck_blocks(&self.blocks);
        &all[..self.len]
    }
}

/// The blocks as bytes. `Block` is `repr(C)` over a byte array, so its bytes are the blocks'
/// bytes in order, with no padding.
fn bytemuck_blocks(blocks: &[Block]) -> &[u8] {
    let n = std::mem::size_of_val(blocks);
    // SAFETY: `Block` is `repr(C, align(64))` around `[u8; 64]`: size 64, no padding, every
    // byte initialised; a `&[Block]` of `k` elements covers exactly `64 k` initialised bytes
    // that live as long as the borrow; `u8` has alignment 1.
    unsafe { std::slice::from_raw_parts(blocks.as_ptr().cast::<u8>(), n) }
}

fn bytemuck_blocks_mut(blocks: &mut [Block]) -> &mut [u8] {
    let n = std::mem::size_of_val(blocks);
    // SAFETY: as in `bytemuck_blocks`; the unique borrow of the blocks makes the byte slice
    // unique too, and any byte pattern is a valid `Block`.
    unsafe { std::slice::from_raw_parts_mut(blocks.as_mut_ptr().cast::<u8>(), n) }
}

impl HostBuffer for AlignedBuffer {
    fn capacity(&self) -> usize {
        self.len
    }

    fn is_exclusive(&self) -> bool {
        // Only borrows of the batch reach these bytes, and the batch is gone when the
        // buffer comes back.
        true
    }

    fn bytes(&self) -> Option<&[u8]> {
        Some(AlignedBuffer::bytes(self))
    }

    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        let len = self.len;
        Some(&mut bytemuck_blocks_mut(&mut self.blocks)[..len])
    }
}

/// Allocates [`AlignedBuffer`]s.
#[derive(Clone, Copy, Debug, Default)]
pub struct AlignedAllocator;

impl BufferAllocator for AlignedAllocator {
    type Buffer = AlignedBuffer;

    fn allocate(&self, bytes: usize) -> Result<AlignedBuffer> {
        AlignedBuffer::new(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffers_are_zeroed_aligned_and_writable() {
        for len in [0, 1, 63, 64, 65, 1000] {
            let mut b = AlignedBuffer::new(len).unwrap();
            assert_eq!(b.capacity(), len);
            assert!(b.bytes().iter().all(|&x| x == 0));
            assert_eq!(b.bytes().as_ptr() as usize % BUFFER_ALIGN, 0);
            b.bytes_mut().unwrap().fill(7);
            assert!(b.bytes().iter().all(|&x| x == 7));
        }
        assert_eq!(AlignedAllocator.allocate(10).unwrap().capacity(), 10);
    }
}
