//! Writes the golden conformance fixtures: `tessera-fixtures <out-dir>` replaces
//! `<out-dir>/cases` with a freshly generated case tree (the README beside it is untouched).
//!
//! Regenerating the checked-in fixtures is a deliberate act: run
//! `cargo run -p tessera-conformance --bin tessera-fixtures -- fixtures` and review the diff.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(out), None) = (args.next(), args.next()) else {
        eprintln!("usage: tessera-fixtures <out-dir>   (writes <out-dir>/cases)");
        return ExitCode::from(2);
    };
    let out = PathBuf::from(out);
    match tessera_conformance::generate::generate(&out) {
        Ok(summary) => {
            print!("{summary}");
            println!("wrote {}", out.join("cases").display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tessera-fixtures: {e}");
            ExitCode::FAILURE
        }
    }
}
