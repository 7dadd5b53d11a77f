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
