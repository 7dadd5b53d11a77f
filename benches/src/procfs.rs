//! What the bench binaries read of their own process (Linux `/proc/self`) and of a dataset
//! folder.

use std::path::{Path, PathBuf};

/// A `/proc/self/status` field given in kB (`VmRSS:`, `VmHWM:`), in bytes; 0 if absent.
#[must_use]
pub fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb << 10)
}

/// A plain-number `/proc/self/status` field (`Threads:`); 0 if absent.
#[must_use]
pub fn status_count(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix(field)).and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(0)
}

/// Samples the process's thread count every 10 ms on a thread of its own until the returned
/// guard is dropped; the guard's [`ThreadPeak::peak`] is the highest count seen.
#[must_use]
pub fn watch_threads() -> ThreadPeak {
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (p, s) = (peak.clone(), stop.clone());
    let handle = std::thread::spawn(move || {
        while !s.load(std::sync::atomic::Ordering::Relaxed) {
            p.fetch_max(status_count("Threads:"), std::sync::atomic::Ordering::Relaxed);
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    });
    ThreadPeak { peak, stop, handle: Some(handle) }
}

/// The running sampler of [`watch_threads`].
#[derive(Debug)]
pub struct ThreadPeak {
    peak: std::sync::Arc<std::sync::atomic::AtomicU64>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl ThreadPeak {
    /// The highest thread count seen so far (the sampler's own thread included).
    #[must_use]
    pub fn peak(&self) -> u64 {
        self.peak.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for ThreadPeak {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The process's resident-set high-water mark (`VmHWM`), in bytes.
#[must_use]
pub fn peak_rss() -> u64 {
    status_bytes("VmHWM:")
}

/// Resets `VmHWM` to the current resident set (Linux: write 5 to `clear_refs`).
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Every file below `dir`, as (path relative to `base` with `/` separators, full path).
///
/// # Errors
/// I/O errors while listing.
pub fn files_under(dir: &Path, base: &Path, out: &mut Vec<(String, PathBuf)>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            files_under(&p, base, out)?;
        } else if let Ok(rel) = p.strip_prefix(base) {
            out.push((rel.to_string_lossy().replace('\\', "/"), p.clone()));
        }
    }
    Ok(())
}
