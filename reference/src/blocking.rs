//! The seam between the async reference and its blocking callers: the one place the crate
//! blocks a thread on a future.
//!
//! Every operation that touches storage is an `async fn` returning a `Send` future, run as a
//! task on the caller's runtime (`Dataset::open_at_async`, `DatasetWriter::commit_async`,
//! `FragmentTree::locate_many_indexed_async`, `Store::get_ranges_async`, ...). For callers
//! with no async code of their own (the CLI, the Python package's simple calls, scripts), each
//! has a blocking twin of the same name without `_async`, which is [`block_on`] over it: the
//! future runs on the calling thread, its I/O on [`runtime`], a small runtime this crate
//! starts on first use.
//!
//! A blocking call made from inside a runtime is refused with a `usage` error instead of
//! stalling that runtime's thread (or panicking, as a nested `Runtime::block_on` would): async
//! code calls the `_async` twin. Programs that drive many requests at once (the loader, the
//! query engine) own their runtime and call the async API on it; they do not use this one.
//!
//! ```
//! # fn main() -> tessera::Result<()> {
//! let store = tessera::store::Store::open("memory://blocking-doc")?;
//! // Blocking, from plain code:
//! assert!(store.list("")?.is_empty());
//! // The same through the seam: the async twin, driven here.
//! assert!(tessera::blocking::block_on(store.list_async(""))?.is_empty());
//! // Refused inside a runtime, where the async twin is the call to make.
//! let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! assert!(rt.block_on(async { store.list("") }).is_err());
//! # Ok(())
//! # }
//! ```

use std::sync::OnceLock;

use crate::error::{Error, Result};

/// Threads the runtime keeps for blocking work (`object_store`'s local file system reads a
/// file on one per request, DNS lookups take one): requests past this queue instead of
/// starting a thread each (tokio's default allows 512).
const BLOCKING_THREADS: usize = 64;

/// The runtime of the blocking calls: two I/O worker threads (a blocking caller waits on one
/// request at a time, or one wave of them), and at most 64 for blocking work.
///
/// # Panics
/// If the operating system refuses to start threads.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(BLOCKING_THREADS)
            .thread_name("tessera-io")
            .enable_all()
            .build()
            .expect("the tessera I/O runtime could not start")
    })
}

/// Runs a future of the reference to completion on [`runtime`]: what every blocking call of
/// the crate is.
///
/// # Errors
/// `usage` when called from inside an async runtime (blocking there would stall it); the
/// future's own error otherwise.
pub fn block_on<T>(f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(Error::usage("blocking tessera call made inside an async runtime; call its _async twin"));
    }
    runtime().block_on(f)
}
