//! Writers in separate processes: concurrent committers, and writers killed at random points.
//!
//! The test binary re-runs itself as the child (`TESSERA_CHILD=<mode>`), so no extra binary is
//! needed. Trial counts scale with `TESSERA_CRASH_TRIALS` (default 200).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use tessera::{At, Batch, Column, ColumnData, DType, Dataset, Limits, Schema, Store, WriteOptions};

const CHILD: &str = "TESSERA_CHILD";

fn batch(writer: i64, seq: i64) -> Batch {
    // Every row records who wrote it and in which commit, so the test can check completeness.
    let rows = 3;
    let ids: Vec<i64> = (0..rows).map(|r| writer * 1_000_000 + seq * 10 + r).collect();
    let payload: Vec<u8> = (0..rows * 512).map(|i| (i % 251) as u8).collect();
    Batch::new()
        .with("id", ColumnData::from_scalars(&ids))
        .unwrap()
        .with("payload", ColumnData::from_fixed(&[512], &payload).unwrap())
        .unwrap()
}

fn schema() -> Schema {
    Schema::new([Column::new("id", DType::I64, &[]), Column::new("payload", DType::U8, &[tessera::Dim::Fixed(512)])])
        .unwrap()
}

/// Child mode: commit `TESSERA_COMMITS` appends (or forever) to the dataset at `TESSERA_DIR`,
/// printing each committed sequence number.
fn child(mode: &str) {
    let dir = std::env::var("TESSERA_DIR").unwrap();
    let writer: i64 = std::env::var("TESSERA_WRITER").unwrap().parse().unwrap();
    let commits: i64 = std::env::var("TESSERA_COMMITS").ok().and_then(|s| s.parse().ok()).unwrap_or(i64::MAX);
    let opts = WriteOptions { target_file_bytes: 1024, ..WriteOptions::default() };
    for seq in 0..commits {
        let ds = Dataset::open(&dir).unwrap();
        let ds = ds.append(&batch(writer, seq), "child commit", opts.clone()).unwrap();
        if mode == "delete" && seq % 3 == 2 && ds.row_count() > 1 {
            ds.delete_rows(&[0], "child delete", &WriteOptions::default()).ok();
        }
        println!("committed {seq}");
    }
}

fn maybe_child() -> bool {
    match std::env::var(CHILD) {
        Ok(mode) => {
            child(&mode);
            true
        }
        Err(_) => false,
    }
}

fn spawn(dir: &str, writer: i64, commits: Option<u32>, test: &str, mode: &str) -> std::process::Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, mode)
        .env("TESSERA_DIR", dir)
        .env("TESSERA_WRITER", writer.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(n) = commits {
        c.env("TESSERA_COMMITS", n.to_string());
    }
    c.spawn().unwrap()
}

#[test]
fn concurrent_processes_commit_without_loss() {
    if maybe_child() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().to_str().unwrap();
    Dataset::create(loc, schema(), &WriteOptions::default()).unwrap();
    let (writers, commits) = (3, 5);
    let children: Vec<_> = (0..writers)
        .map(|w| spawn(loc, w, Some(commits), "concurrent_processes_commit_without_loss", "append"))
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "a writer process failed");
    }
    let ds = Dataset::open(loc).unwrap();
    assert_eq!(ds.version(), 1 + u64::from(commits) * writers as u64);
    let ids = ds.read_rows(0..ds.row_count(), Some(&["id"])).unwrap().get("id").unwrap().to_vec::<i64>().unwrap();
    let mut want: Vec<i64> = (0..writers)
        .flat_map(|w| (0..i64::from(commits)).flat_map(move |s| (0..3).map(move |r| w * 1_000_000 + s * 10 + r)))
        .collect();
    let mut got = ids;
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want, "every commit of every process landed exactly once");
    ds.verify().unwrap();
}

#[test]
fn killed_writers_never_leave_a_torn_version() {
    if maybe_child() {
        return;
    }
    let trials: u64 = std::env::var("TESSERA_CRASH_TRIALS").ok().and_then(|s| s.parse().ok()).unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().to_str().unwrap();
    Dataset::create(loc, schema(), &WriteOptions::default()).unwrap();
    let store = Store::open(loc).unwrap();
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut last_version = 1;
    for trial in 0..trials {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let mode = if trial % 2 == 0 { "append" } else { "delete" };
        let mut child = spawn(loc, (trial % 7) as i64, None, "killed_writers_never_leave_a_torn_version", mode);
        // Kill after 0, 1 or 2 reported commits plus up to 4 ms: progress-based, so the kill
        // lands inside the next commit (upload, manifest create, delete) whatever the load.
        let wait_for = rng % 3;
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut reported = 0u64;
        while reported < wait_for {
            match lines.next() {
                Some(Ok(l)) if l.starts_with("committed") => reported += 1,
                Some(Ok(_)) => {}
                _ => break,
            }
        }
        std::thread::sleep(Duration::from_micros((rng >> 8) % 4_000));
        child.kill().unwrap();
        child.wait().unwrap();
        reported += lines.map_while(Result::ok).filter(|l| l.starts_with("committed")).count() as u64;
        // The dataset opens at its last committed version and everything in it is intact.
        let ds = Dataset::open_at(&store, &At::Latest, Limits::default()).unwrap();
        assert!(ds.version() >= last_version, "versions never go backwards");
        assert!(ds.version() >= last_version + reported, "a reported commit is durable");
        ds.verify().unwrap();
        last_version = ds.version();
    }
    // Every version of the history is still readable.
    let ds = Dataset::open(loc).unwrap();
    for v in 1..=ds.version() {
        let old = ds.checkout(&At::Version(v)).unwrap();
        assert_eq!(old.version(), v);
    }
    eprintln!("{trials} kills; {} versions committed", ds.version());
    assert!(ds.version() > trials / 2, "most trials got commits in before the kill");
}
