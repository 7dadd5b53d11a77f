//! Generates the mm224 workload (if missing) and measures the raw read limit: `read()` of the
//! same data-file bytes into one reused buffer, as samples/s and MB/s.
//!
//! `cargo run --release -p tessera-benches --bin raw_read -- [DIR] [ROWS]`

use std::path::PathBuf;

use tessera::Compression;
use tessera_benches::mm224;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir: PathBuf = args.next().map_or_else(|| "target/mm224-none".into(), Into::into);
    let rows: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(mm224::ROWS);
    if !dir.join("branches").exists() {
        mm224::generate(&dir, rows, Compression::None)?;
    }
    let (bytes, secs) = mm224::raw_read(&dir, 3)?;
    println!(
        "raw read(): {:.0} MB in {:.3} s = {:.0} MB/s = {:.0} samples/s ({} rows)",
        bytes as f64 / 1e6,
        secs,
        bytes as f64 / 1e6 / secs,
        rows as f64 / secs,
        rows
    );
    Ok(())
}
