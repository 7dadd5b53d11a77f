//! `tessera`: the command-line tool for Tessera datasets.
//!
//! Ingests the formats users already have (image folders, WebDataset tar shards, NumPy
//! `.npy`/`.npz`, JSON Lines) by decoding them once into typed tensor columns; inspects,
//! verifies, tags, branches and exports dataset versions; and changes them (delete, update,
//! column add/drop/rename, compact, merge, restore, gc) through the reference crate's API. The format itself lives in the
//! `tessera` reference crate; this crate adds the decoders (image, tar, zip) so the reference
//! stays free of them.
//!
//! Layout: [`cmd`] has one module per subcommand, [`input`] one per ingest source format,
//! [`progress`] the progress bars, [`error`] the exit codes.

mod cmd;
mod error;
mod progress;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::{CliError, Exit};

const LONG_ABOUT: &str = "\
Ingest, inspect, verify and export Tessera datasets.

Tessera stores training data as a versioned table of typed tensor columns, decoded once at
ingest. Every command takes the dataset first, as a local path or a store URL (file://, s3://,
gs://, az://, http(s):// read-only): `tessera show DATASET ROW`, `tessera tag DATASET NAME`,
`tessera ingest DATASET INPUT...`. With --dataset/-d DATASET instead, the command's other
arguments follow directly (`tessera show -d DATASET ROW`). Commands
that read a version accept --version N, --branch B (latest of B, or version N of B with
--version) or --tag T; the default is the latest version of main.

Sources for `tessera ingest`:
  image folder   ROOT/<class>/**/*.{jpg,jpeg,png,webp}, labels from folder names
  WebDataset     *.tar shards; files grouped by key, decoded by extension
  NumPy          *.npy / *.npz, one column per array, first axis = rows
  JSON Lines     *.jsonl / *.ndjson, one row per line, types inferred

Default compression: image columns lz4 (fast to decode, lossless), text and JSON columns
zstd level 3, everything else none. Override per column with --compress COL=CODEC.

Exit codes:
  0  success
  1  data fault: `verify` found corruption, a dataset object failed validation while being
     read, or an ingest input is corrupt (without --skip-bad)
  2  usage: bad arguments or a request the dataset cannot satisfy (e.g. schema mismatch)
  3  not found: dataset, version, branch, tag, row or input path does not exist
  4  conflict: tag or branch exists already, a merge whose sides changed the same fragments
     or the schema, or a commit lost a race it could not rebase
  5  other error: storage/I/O failure, unsupported feature

With --json, commands print one JSON document on stdout; errors print
{\"error\": {\"exit_code\": N, \"kind\": ..., \"message\": ...}} there too.";

/// Top-level arguments.
#[derive(Debug, Parser)]
#[command(name = "tessera", version, about = "Ingest, inspect, verify and export Tessera datasets", long_about = LONG_ABOUT)]
struct Cli {
    /// Print machine-readable JSON on stdout instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// No progress bars and no informational messages on stderr.
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Ingest image folders, WebDataset shards, NumPy files or JSON Lines as a new version.
    Ingest(Box<cmd::ingest::Args>),
    /// Show schema, rows, version, sizes and compression ratios.
    Info(cmd::info::Args),
    /// List the versions in a version's history, newest first.
    Log(cmd::log::Args),
    /// Compare two versions: fragments and rows added/removed, schema changes.
    Diff(cmd::diff::Args),
    /// Tag a version (or list tags with --list).
    Tag(cmd::refs::TagArgs),
    /// Create a branch from a version (or list branches with --list).
    Branch(cmd::refs::BranchArgs),
    /// Print one row; tensors are summarized.
    Show(cmd::show::Args),
    /// Read every byte of a version and check every checksum; exit 1 on any fault.
    Verify(cmd::verify::Args),
    /// Export a version to .npy files or WebDataset tar shards.
    Export(cmd::export::Args),
    /// Delete rows (--rows 1,5,9-12 or --where 'label = 3', a SQL expression) as a new version.
    Delete(cmd::delete::Args),
    /// Set scalar columns of some rows (--set COL=VALUE) as a new version.
    Update(cmd::update::Args),
    /// Add, drop or rename a column as a new version.
    #[command(subcommand)]
    Column(cmd::column::Command),
    /// Rewrite small fragments and fragments with deletions into bigger ones.
    Compact(cmd::compact::Args),
    /// Merge a branch (or version) into another branch; conflicts exit 4.
    Merge(cmd::merge::Args),
    /// Commit an earlier version's content as the newest version of its branch.
    Restore(cmd::restore::Args),
    /// Delete unreferenced objects older than the retention period (--dry-run lists them).
    Gc(cmd::gc::Args),
    /// Run SQL over a version (the table `ds`): filters, vector search, top-k; print or save a view.
    Query(cmd::query::Args),
    /// List, show or delete views (saved query answers pinned to a version).
    #[command(subcommand)]
    View(cmd::view::Command),
    /// Build, list, check or delete vector indexes (approximate nearest-neighbour search for
    /// `query`), and drop near-duplicates into a view.
    #[command(subcommand)]
    Index(cmd::index::Command),
    /// Which rows a recorded training run's step saw, or which steps saw a row (from the
    /// loader's lineage record).
    Lineage(cmd::lineage::Args),
    /// Measure the training loader's throughput on a version, against the raw read limit
    /// (built with the `bench` cargo feature, which links libtorch).
    Bench(cmd::bench::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let ctx = cmd::Ctx { json: cli.json, quiet: cli.quiet };
    let result = match cli.command {
        Command::Ingest(a) => cmd::ingest::run(ctx, *a),
        Command::Info(a) => cmd::info::run(ctx, &a),
        Command::Log(a) => cmd::log::run(ctx, &a),
        Command::Diff(a) => cmd::diff::run(ctx, &a),
        Command::Tag(a) => cmd::refs::run_tag(ctx, &a),
        Command::Branch(a) => cmd::refs::run_branch(ctx, &a),
        Command::Show(a) => cmd::show::run(ctx, &a),
        Command::Verify(a) => cmd::verify::run(ctx, &a),
        Command::Export(a) => cmd::export::run(ctx, &a),
        Command::Delete(a) => cmd::delete::run(ctx, &a),
        Command::Update(a) => cmd::update::run(ctx, &a),
        Command::Column(c) => cmd::column::run(ctx, &c),
        Command::Compact(a) => cmd::compact::run(ctx, &a),
        Command::Merge(a) => cmd::merge::run(ctx, &a),
        Command::Restore(a) => cmd::restore::run(ctx, &a),
        Command::Gc(a) => cmd::gc::run(ctx, &a),
        Command::Query(a) => cmd::query::run(ctx, &a),
        Command::View(c) => cmd::view::run(ctx, &c),
        Command::Index(c) => cmd::index::run(ctx, &c),
        Command::Lineage(a) => cmd::lineage::run(ctx, &a),
        Command::Bench(a) => cmd::bench::run(ctx, &a),
    };
    match result {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(e) => report(ctx, &e),
    }
}

/// Prints an error (stderr, and stdout as JSON with `--json`) and returns its exit code.
fn report(ctx: cmd::Ctx, e: &CliError) -> ExitCode {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "error: {}", e.message);
    for n in &e.notes {
        let _ = writeln!(err, "  note: {n}");
    }
    if ctx.json {
        let v = serde_json::json!({"error": {
            "exit_code": e.exit.code(), "kind": e.exit.name(), "message": e.message, "notes": e.notes,
        }});
        println!("{v}");
    }
    debug_assert_ne!(e.exit, Exit::Ok);
    ExitCode::from(e.exit.code())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn clap_definitions_are_consistent() {
        super::Cli::command().debug_assert();
    }
}
