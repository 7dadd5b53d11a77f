//! `tessera-conformance`: runs the fixture cases against an implementation and reports.
//!
//! ```text
//! tessera-conformance [--adapter "<cmd ...>"] [--fixtures DIR] [--run GLOB]... [--skip GLOB]...
//!                     [--skip-file FILE] [--timeout-ms N] [--strict-classes | --lenient-classes]
//!                     [--writer] [--json FILE] [--matrix A,B] [--list] [--verbose]
//! ```
//!
//! Without `--adapter` the reference implementation runs in process. Exit status: 0 when no
//! result failed (skips allowed), 1 when any failed, crashed or timed out, 2 for a usage or
//! setup error. See `conformance/README.md`.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tessera_conformance::adapter::Adapter;
use tessera_conformance::runner::{self, Options, Status};

const HELP: &str = "\
tessera-conformance: run the Tessera conformance fixtures against an implementation

usage: tessera-conformance [options]

  --adapter CMD        the implementation: a command speaking the adapter protocol
                       (conformance/README.md); default: the reference, in process
                       (`ref` names it explicitly)
  --fixtures DIR       the fixture root holding cases/ (default: this repository's fixtures/)
  --run GLOB           run only cases whose id (or class/area/id, or id:write / id:read for
                       writer cases) matches; repeatable
  --skip GLOB          skip matching cases (reported as SKIP); repeatable
  --skip-file FILE     TOML table of \"glob\" = \"reason\"; every reason is required
  --timeout-ms N       time limit per adapter invocation for cases without their own
                       timeout_ms (default 10000)
  --strict-classes     a reject with an unlisted error class fails (the default)
  --lenient-classes    report FAIL_WRONG_CLASS but do not count it as a failure
  --writer             also run the writer cases, in both directions
  --json FILE          write the JSON report (use - for stdout)
  --matrix A,B,...     run several implementations (ref, or [name=]command) and print a
                       matrix of the results that differ from PASS
  --list               list the selected cases and exit
  -v, --verbose        print diffs and stderr of failing cases, and skip reasons
  -h, --help           this text

exit status: 0 nothing failed, 1 some case failed, crashed or timed out, 2 usage or setup error";

struct Cli {
    adapter: Option<String>,
    matrix: Option<String>,
    json: Option<String>,
    list: bool,
    verbose: bool,
    opts: Options,
}

fn default_fixtures() -> PathBuf {
    let built_in = tessera_conformance::fixtures_dir();
    if built_in.join("cases").is_dir() { built_in } else { PathBuf::from("fixtures") }
}

fn parse(args: Vec<String>) -> Result<Option<Cli>, String> {
    let mut cli = Cli {
        adapter: None,
        matrix: None,
        json: None,
        list: false,
        verbose: false,
        opts: Options::new(&default_fixtures()),
    };
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut value = || inline.clone().or_else(|| it.next()).ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--adapter" => cli.adapter = Some(value()?),
            "--fixtures" => cli.opts.fixtures = PathBuf::from(value()?),
            "--run" => cli.opts.run.push(value()?),
            "--skip" => cli.opts.skip.push(value()?),
            "--skip-file" => {
                let path = value()?;
                let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
                let mut entries = runner::parse_skip_file(&text).map_err(|e| format!("{path}: {e}"))?;
                cli.opts.skip_reasons.append(&mut entries);
            }
            "--timeout-ms" => {
                let v = value()?;
                let ms: u64 = v.parse().map_err(|_| format!("--timeout-ms {v:?} is not a number"))?;
                if ms == 0 {
                    return Err("--timeout-ms must be positive".into());
                }
                cli.opts.default_timeout = Duration::from_millis(ms);
            }
            "--strict-classes" => cli.opts.lenient_classes = false,
            "--lenient-classes" => cli.opts.lenient_classes = true,
            "--writer" => cli.opts.writer = true,
            "--json" => cli.json = Some(value()?),
            "--matrix" => cli.matrix = Some(value()?),
            "--list" => cli.list = true,
            "-v" | "--verbose" => cli.verbose = true,
            other => return Err(format!("unknown option {other:?} (see --help)")),
        }
    }
    if cli.adapter.is_some() && cli.matrix.is_some() {
        return Err("--adapter and --matrix exclude each other".into());
    }
    Ok(Some(cli))
}

fn write_json(path: &str, value: &serde_json::Value) -> Result<(), String> {
    let text = tessera_conformance::canonical_json::to_string_pretty(value);
    if path == "-" {
        std::io::stdout().lock().write_all(text.as_bytes()).map_err(|e| e.to_string())
    } else {
        std::fs::write(path, text).map_err(|e| format!("{path}: {e}"))
    }
}

fn main() -> ExitCode {
    let cli = match parse(std::env::args().skip(1).collect()) {
        Ok(Some(c)) => c,
        Ok(None) => {
            println!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("tessera-conformance: {e}");
            return ExitCode::from(2);
        }
    };
    if cli.list {
        return match runner::list(&cli.opts) {
            Ok(ids) => {
                for id in ids {
                    println!("{id}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("tessera-conformance: {e}");
                ExitCode::from(2)
            }
        };
    }
    if let Some(m) = &cli.matrix {
        let adapters: Result<Vec<Adapter>, String> = m.split(',').map(Adapter::parse).collect();
        let result = adapters.and_then(|a| runner::run_matrix(&a, &cli.opts));
        return match result {
            Ok((reports, text)) => {
                if let Some(path) = &cli.json {
                    let doc = serde_json::json!({
                        "report": "tessera-conformance-matrix/1",
                        "runs": reports.iter().map(runner::Report::to_json).collect::<Vec<_>>(),
                    });
                    if let Err(e) = write_json(path, &doc) {
                        eprintln!("tessera-conformance: {e}");
                        return ExitCode::from(2);
                    }
                }
                print!("{text}");
                if reports.iter().all(runner::Report::ok) { ExitCode::SUCCESS } else { ExitCode::from(1) }
            }
            Err(e) => {
                eprintln!("tessera-conformance: {e}");
                ExitCode::from(2)
            }
        };
    }
    let adapter = match cli.adapter.as_deref().map_or(Ok(Adapter::Reference), Adapter::parse) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("tessera-conformance: --adapter: {e}");
            return ExitCode::from(2);
        }
    };
    let verbose = cli.verbose;
    let report = runner::run_with_progress(&adapter, &cli.opts, |r| {
        if verbose {
            eprintln!("{:<21} {}", r.status.as_str(), r.display_id());
        } else if r.status != Status::Pass && r.status != Status::Skip {
            eprint!("x");
        }
    });
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tessera-conformance: {e}");
            return ExitCode::from(2);
        }
    };
    if !verbose && report.results.iter().any(|r| r.status != Status::Pass && r.status != Status::Skip) {
        eprintln!();
    }
    if let Some(path) = &cli.json
        && let Err(e) = write_json(path, &report.to_json())
    {
        eprintln!("tessera-conformance: {e}");
        return ExitCode::from(2);
    }
    let human = report.human(verbose);
    if cli.json.as_deref() == Some("-") {
        eprint!("{human}");
    } else {
        print!("{human}");
    }
    if report.ok() { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
