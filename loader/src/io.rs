//! The loader's I/O runtime: one per process, sized for the machine, owned by the loader.
//!
//! Every request the loader makes (the waves of range GETs of a batch, file indexes opened
//! together, fragment-tree lookups, the version it opens, backoffs) is a future of the
//! reference's async API or of [`crate::source`], driven here. A filling thread drives its
//! batch's futures itself ([`block_on`]: the CRC of each landing block runs on that thread);
//! the runtime's workers run what the futures spawn: the HTTP connections of `object_store`'s
//! client (response bodies, TLS) and the disk cache's downloads. The reference's own runtime
//! (`tessera::blocking`: two workers, for simple blocking callers) carries none of it, so a
//! loader that reads gigabytes a second from a bucket is not held to two threads of body and
//! TLS work.
//!
//! Workers: the machine's cores, at most [`MAX_WORKERS`]; blocking pool: [`BLOCKING_THREADS`]
//! (`object_store`'s local file system reads on it, one request at a time each).

use std::future::Future;
use std::sync::OnceLock;

/// Most worker threads: past this a loader's network work is not what limits it.
const MAX_WORKERS: usize = 16;
/// Threads for blocking work (`object_store`'s local file system, DNS lookups).
const BLOCKING_THREADS: usize = 64;

/// The loader's runtime, started on first use.
///
/// # Panics
/// If the operating system refuses to start threads.
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers())
            .max_blocking_threads(BLOCKING_THREADS)
            .thread_name("tessera-loadio")
            .enable_all()
            .build()
            .expect("the loader's I/O runtime could not start")
    })
}

/// Worker threads of [`runtime`]: the machine's cores (at least 2, at most [`MAX_WORKERS`]).
pub(crate) fn workers() -> usize {
    std::thread::available_parallelism().map_or(2, usize::from).clamp(2, MAX_WORKERS)
}

/// Drives `f` to completion on the calling thread, its I/O on [`runtime`]: a thread the
/// loader started (a filling thread), which runs no runtime, or a caller's thread that passed
/// [`outside_runtime`].
pub(crate) fn drive<F: Future>(f: F) -> F::Output {
    runtime().block_on(f)
}

/// Checks that a caller's thread (opening a loader) may block: it must not be inside an
/// async runtime, whose thread blocking would stall (and where a nested `block_on` panics).
///
/// # Errors
/// [`LoaderError::Config`](crate::LoaderError) inside an async runtime.
pub(crate) fn outside_runtime() -> crate::Result<()> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(crate::LoaderError::config(
            "a loader is opened and iterated from a plain thread, not inside an async runtime \
             (from async code, start one with std::thread::spawn: tokio's spawn_blocking threads \
             count as inside the runtime)",
        ));
    }
    Ok(())
}
