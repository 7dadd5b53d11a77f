//! Batch buffers the loader fills and Python reads without a copy: the crate's only `unsafe`.
//!
//! A [`PyHostBuffer`] owns 64-byte aligned, zero-initialised heap memory through an
//! `Arc<Memory>`. Handing a column to Python wraps a clone of that `Arc` in a
//! [`BufferOwner`] object and makes a numpy array over the memory whose `base` is the owner;
//! `torch.from_numpy` (and any numpy view) keeps that array, hence the owner, hence the
//! `Arc` clone alive. So the `Arc`'s strong count is exactly "the loader's own reference plus
//! one per live Python owner" — the same idea as the tch adapter's libtorch storage use count.
//!
//! The loader writes a buffer only through [`HostBuffer::bytes_mut`], which goes through
//! `Arc::get_mut`: it yields the bytes only while no owner object exists, so a tensor or
//! array the user keeps never changes; the pool then lets that buffer go and allocates a
//! new one (`tessera_loader::HostBuffer::is_exclusive`).

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::Arc;

use numpy::PyArray1;
use numpy::ndarray::ArrayView1;
use pyo3::prelude::*;
use tessera_loader::{BUFFER_ALIGN, BufferAllocator, HostBuffer, LoaderError, Result, Unsigned};

/// A zeroed heap allocation of `len` bytes aligned to [`BUFFER_ALIGN`], freed on drop.
///
/// Rust never holds a reference into the bytes while they may be shared: slices are made
/// only through `&mut Memory` (unique, see [`PyHostBuffer::bytes_mut`]) or while the `Arc`
/// is unshared ([`PyHostBuffer::bytes`]). Python reads and writes them through raw pointers
/// in numpy arrays, which exist only while a [`BufferOwner`] holds a clone of the `Arc`.
#[derive(Debug)]
pub(crate) struct Memory {
    ptr: NonNull<u8>,
    len: usize,
    layout: Layout,
}

// SAFETY: `Memory` is a uniquely owned heap allocation (like `Box<[u8]>`); the raw pointer is
// only dereferenced as described on the type, never through a shared `&Memory` while another
// thread may write, so moving or sharing the handle between threads is sound.
unsafe impl Send for Memory {}
// SAFETY: through `&Memory` the only access to the bytes is `as_ptr` (an address, not a
// read); slices are made from `&mut Memory` or while the `Arc` is unshared (see the type).
unsafe impl Sync for Memory {}

impl Memory {
    /// Allocates `len` zeroed bytes.
    fn new(len: usize) -> Result<Self> {
        // A zero-size layout may not be allocated: keep at least one block.
        let layout = Layout::from_size_align(len.max(1), BUFFER_ALIGN)
            .map_err(|e| LoaderError::config(format!("a {len}-byte batch buffer: {e}")))?;
        // SAFETY: `layout` has a non-zero size (at least 1) and a valid power-of-two alignment,
        // as `alloc_zeroed` requires.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| LoaderError::Budget {
            budget: 0,
            what: "a batch buffer (the allocator returned no memory)".into(),
            needed: len as u64,
        })?;
        Ok(Self { ptr, len, layout })
    }

    /// The first byte's address (for numpy; not a read).
    fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The bytes, writable: the caller holds the only handle.
    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` is a live allocation of at least `len` bytes (made in `new`, freed only
        // in `drop`), zero-initialised and then only ever written with bytes, so initialised;
        // `u8` needs no alignment. `&mut self` is unique: `bytes_mut` reaches it only through
        // `Arc::get_mut`, i.e. when no `BufferOwner` (hence no numpy array) can see the bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc_zeroed(self.layout)` and is freed once, here.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// A batch buffer whose bytes Python can view without a copy (see the module docs).
#[derive(Debug)]
pub(crate) struct PyHostBuffer {
    memory: Arc<Memory>,
}

impl PyHostBuffer {
    /// The bytes, read-only, while no Python object can see them (`None` otherwise). Used to
    /// turn text columns into `str`/`bytes` before any view of them exists.
    pub(crate) fn bytes(&self) -> Option<&[u8]> {
        if Arc::strong_count(&self.memory) != 1 || Arc::weak_count(&self.memory) != 0 {
            return None;
        }
        // SAFETY: the allocation is live and initialised (see `Memory::as_mut_slice`). No
        // Python object holds the memory (the count is 1, and owners are made only from a
        // `&PyHostBuffer` like this one, which is not used to make one while the slice lives),
        // and Rust writes only through `&mut self`, which this shared borrow excludes.
        Some(unsafe { std::slice::from_raw_parts(self.memory.as_ptr(), self.memory.len) })
    }

    /// A numpy `uint8` array over the first `len` bytes, kept alive by a new owner object.
    pub(crate) fn view<'py>(&self, py: Python<'py>, len: usize) -> PyResult<Bound<'py, PyArray1<u8>>> {
        if len > self.memory.len {
            return Err(crate::errors::internal(format!("a view of {len} bytes of a {}-byte buffer", self.memory.len)));
        }
        let owner = Bound::new(py, BufferOwner { memory: self.memory.clone() })?;
        // SAFETY: `ptr..ptr+len` lies in the live allocation (checked above), initialised and
        // aligned for `u8`. The array's base is `owner`, which holds an `Arc` of the memory, so
        // the allocation outlives the array and every view numpy or torch derives from it. The
        // loader cannot write the bytes while `owner` lives (`Arc::get_mut` fails), so the view
        // is the only writer while it exists.
        let array = unsafe {
            let view = ArrayView1::from_shape_ptr(len, self.memory.as_ptr().cast_const());
            PyArray1::borrow_from_array(&view, owner.into_any())
        };
        Ok(array)
    }
}

impl HostBuffer for PyHostBuffer {
    fn capacity(&self) -> usize {
        self.memory.len
    }

    fn is_exclusive(&self) -> bool {
        Arc::strong_count(&self.memory) == 1 && Arc::weak_count(&self.memory) == 0
    }

    fn bytes(&self) -> Option<&[u8]> {
        PyHostBuffer::bytes(self)
    }

    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        Arc::get_mut(&mut self.memory).map(Memory::as_mut_slice)
    }
}

/// Allocates [`PyHostBuffer`]s (on the loader's worker threads; needs no GIL), for an
/// output that takes the stored unsigned types (numpy) or one that needs them widened
/// (torch, JAX, TensorFlow: `unsigned`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PyAllocator {
    pub(crate) unsigned: Unsigned,
}

impl BufferAllocator for PyAllocator {
    type Buffer = PyHostBuffer;

    fn allocate(&self, bytes: usize) -> Result<PyHostBuffer> {
        Ok(PyHostBuffer { memory: Arc::new(Memory::new(bytes)?) })
    }

    fn unsigned(&self) -> Unsigned {
        self.unsigned
    }
}

/// The Python object that keeps a batch buffer's memory alive: the `base` of the numpy
/// arrays over it. While one exists the loader does not refill the buffer.
#[pyclass(module = "tessera._native", frozen)]
#[derive(Debug)]
pub(crate) struct BufferOwner {
    memory: Arc<Memory>,
}

#[pymethods]
impl BufferOwner {
    /// Bytes of the buffer.
    fn __len__(&self) -> usize {
        self.memory.len
    }
}
