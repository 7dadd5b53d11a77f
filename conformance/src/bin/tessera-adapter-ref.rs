//! `tessera-adapter-ref`: the reference implementation behind the conformance adapter
//! protocol (`conformance/README.md`, "Conformance adapter protocol").
//!
//! ```text
//! tessera-adapter-ref info
//! tessera-adapter-ref read <dataset-dir> [--version N] [--branch B] [--tag T] [--view V]
//! tessera-adapter-ref write <logical.json> <out-dir>
//! ```
//!
//! This file is also the template for an adapter around another implementation: keep the
//! command line, the exit codes and the `error[<class>]: <message>` line, and replace the three
//! calls into the reference (`reference_impl::read`, `Logical::write_with_reference`, and the
//! info) with calls into yours.
//!
//! | exit | meaning |
//! |---|---|
//! | 0 | success: `read` printed the canonical dump on stdout, `write` wrote the dataset |
//! | 1 | the input is rejected; the first stderr line is `error[<class>]: <message>` |
//! | 2 | bad command line (a harness error, never expected by a case) |
//! | 89 | the operation, or a feature the input uses, is not implemented |
//! | anything else, or a signal | a crash |

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use tessera_conformance::adapter::{AdapterInfo, EXIT_REJECT};
use tessera_conformance::case::Args;
use tessera_conformance::logical::{Logical, RefWrite};
use tessera_conformance::reference_impl::{self, Outcome};

const USAGE: &str = "usage: tessera-adapter-ref info\n       tessera-adapter-ref read <dataset-dir> [--version N] \
                     [--branch B] [--tag T] [--view V]\n       tessera-adapter-ref write <logical.json> <out-dir>";

/// Exit status of a crash (what a Rust panic exits with).
const EXIT_CRASH: u8 = 101;

fn usage(msg: &str) -> ExitCode {
    eprintln!("tessera-adapter-ref: {msg}\n{USAGE}");
    ExitCode::from(2)
}

fn reject(class: &str, message: &str) -> ExitCode {
    // Exactly one line: the runner reads the class from the first stderr line.
    eprintln!("error[{class}]: {}", message.replace('\n', " "));
    ExitCode::from(EXIT_REJECT as u8)
}

fn info() -> ExitCode {
    let info = AdapterInfo::reference("tessera-reference");
    match serde_json::to_string(&info) {
        Ok(s) => {
            println!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cannot print info: {e}");
            ExitCode::from(EXIT_CRASH)
        }
    }
}

fn read(args: &[String]) -> ExitCode {
    let Some(dir) = args.first() else { return usage("read needs a dataset directory") };
    let mut a = Args::default();
    let mut it = args[1..].iter();
    while let Some(flag) = it.next() {
        let Some(value) = it.next() else { return usage(&format!("{flag} needs a value")) };
        match flag.as_str() {
            "--version" => match value.parse::<u64>() {
                // Version 0 and numbers above 2^64 - 1 name no version: the caller's fault [VER-03].
                Ok(0) => return reject("usage", "version 0 does not exist: versions start at 1 [VER-03]"),
                Ok(v) => a.version = Some(v),
                Err(_) if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                    return reject("usage", &format!("version {value} is above 2^64 - 1 [VER-03]"));
                }
                Err(_) => return usage(&format!("--version {value:?} is not a number")),
            },
            "--branch" => a.branch = Some(value.clone()),
            "--tag" => a.tag = Some(value.clone()),
            "--view" => a.view = Some(value.clone()),
            other => return usage(&format!("unknown option {other:?}")),
        }
    }
    let args = (a != Args::default()).then_some(a);
    if let Some(a) = &args
        && let Err(e) = a.validate()
    {
        return usage(&e);
    }
    match reference_impl::read(Path::new(dir), args.as_ref()) {
        Outcome::Accepted(dump) => {
            let text = match serde_json::to_string(&dump) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("cannot print the dump: {e}");
                    return ExitCode::from(EXIT_CRASH);
                }
            };
            let mut out = std::io::stdout().lock();
            if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
                return ExitCode::from(EXIT_CRASH);
            }
            ExitCode::SUCCESS
        }
        Outcome::Rejected { class, message } => reject(&class, &message),
        Outcome::Crashed(msg) => {
            eprintln!("panic: {msg}");
            ExitCode::from(EXIT_CRASH)
        }
    }
}

fn write(args: &[String]) -> ExitCode {
    let [logical, out] = args else { return usage("write needs <logical.json> <out-dir>") };
    let logical = match Logical::read(Path::new(logical)) {
        Ok(l) => l,
        Err(e) => return reject("usage", &e),
    };
    let run = std::panic::catch_unwind(|| logical.write_with_reference(Path::new(out), &RefWrite::default()));
    match run {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => reject(e.class().as_str(), &e.to_string()),
        Err(_) => ExitCode::from(EXIT_CRASH),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("info") if args.len() == 1 => info(),
        Some("read") => read(&args[1..]),
        Some("write") => write(&args[1..]),
        _ => usage("expected info, read or write"),
    }
}
