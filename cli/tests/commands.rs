//! info, log, diff, tag, branch, show, verify and export, their JSON output and exit codes.

mod common;

use std::io::{Read, Seek, SeekFrom, Write};

use common::*;
use tessera::Dataset;

/// A dataset with two versions of image rows.
fn images_dataset(dir: &std::path::Path) -> std::path::PathBuf {
    let root = dir.join("train");
    image_folder(&root, &["a", "b", "c"], 2);
    let ds = dir.join("ds");
    ok(&["ingest", s(&ds), s(&root), "-q", "--keep-original", "-m", "first"]);
    ds
}

#[test]
fn inspect_tag_branch_diff() {
    let dir = tempfile::tempdir().unwrap();
    let ds = images_dataset(dir.path());
    let more = dir.path().join("more");
    image_folder(&more, &["b"], 3);
    ok(&["ingest", "-d", s(&ds), s(&more), "-q", "--keep-original", "-m", "second"]);

    let info = json(&["info", s(&ds)]);
    assert_eq!(
        (info["version"].as_u64(), info["rows"].as_u64(), info["versions"].as_u64()),
        (Some(3), Some(9), Some(3))
    );
    let image = info["columns"].as_array().unwrap().iter().find(|c| c["name"] == "image").unwrap();
    assert_eq!(image["kind"]["type"], "image");
    assert_eq!(image["compression"]["codec"], "none", "images are stored uncompressed by default");
    assert!(image["bytes_raw"].as_u64().unwrap() > 0 && image["ratio"].as_f64().unwrap() > 0.0);
    let text = ok(&["info", "-d", s(&ds)]);
    assert!(text.contains("class_label(3: a, b, c)") && text.contains("[?, ?, 3]"), "{text}");

    let log = json(&["log", s(&ds)]);
    let messages: Vec<&str> = log.as_array().unwrap().iter().map(|m| m["message"].as_str().unwrap()).collect();
    assert_eq!(messages[..2], ["second", "first"]);
    assert!(ok(&["log", s(&ds), "-n", "1"]).contains("second"));

    let d = json(&["diff", s(&ds), "2", "3"]);
    assert_eq!((d["rows_added"].as_u64(), d["rows_removed"].as_u64()), (Some(3), Some(0)));
    assert_eq!(d["fragments_added"].as_array().unwrap().len(), 1);
    assert!(d["schema"]["columns_added"].as_array().unwrap().is_empty());
    let d = json(&["diff", "-d", s(&ds), "1", "2"]);
    assert_eq!(d["rows_added"], 6);
    assert!(ok(&["diff", s(&ds), "3", "2"]).contains("-3 removed"));

    ok(&["tag", s(&ds), "v1", "--version", "2", "-m", "six rows"]);
    assert_eq!(fails(&["tag", s(&ds), "v1"]).0, 4, "tags are immutable");
    assert_eq!(fails(&["tag", s(&ds), "bad/name"]).0, 2);
    let tags = json(&["tag", s(&ds), "--list"]);
    assert_eq!(tags[0]["tag"], "v1");
    assert_eq!(tags[0]["version"], 2);
    assert_eq!(json(&["info", s(&ds), "--tag", "v1"])["rows"], 6);

    let b = json(&["branch", s(&ds), "dev", "--from-version", "2"]);
    assert_eq!(b["branch"], "dev");
    assert_eq!(fails(&["branch", s(&ds), "dev"]).0, 4);
    ok(&["ingest", s(&ds), s(&more), "--branch", "dev", "-q", "--keep-original"]);
    let branches = json(&["branch", "--list", "-d", s(&ds)]);
    assert_eq!(branches.as_array().unwrap().len(), 2);
    assert_eq!(json(&["info", s(&ds), "--branch", "dev"])["rows"], 9);
    assert_eq!(json(&["info", s(&ds), "--branch", "dev", "--version", "2"])["rows"], 6);
    assert_eq!(json(&["diff", s(&ds), "v1", "dev@3"])["rows_added"], 3);
    assert_eq!(fails(&["ingest", s(&ds), s(&more), "--branch", "nope", "-q"]).0, 3);

    // show: images summarized, labels named, bytes summarized.
    let row = json(&["show", s(&ds), "7"]);
    let img = &row["columns"]["image"];
    assert_eq!(img["dtype"], "u8");
    assert_eq!(img["shape"].as_array().unwrap().len(), 3);
    assert!(img["max"].as_f64().unwrap() >= img["mean"].as_f64().unwrap());
    assert_eq!(row["columns"]["label"]["class"], "b");
    assert!(row["columns"]["image_original"]["bytes"].as_u64().unwrap() > 0);
    let text = ok(&["show", s(&ds), "0", "--columns", "label"]);
    assert!(text.contains("0 (a)"), "{text}");
    assert_eq!(fails(&["show", s(&ds), "99"]).0, 3);
    assert_eq!(fails(&["show", s(&ds), "0", "--columns", "nope"]).0, 2);
    assert_eq!(fails(&["info", s(&ds), "--version", "42"]).0, 3);

    // One argument order: the dataset first, or given with --dataset and the rest moved left.
    assert_eq!(json(&["show", "-d", s(&ds), "7"])["row"], 7);
    let (code, _, err) = fails(&["show", "7", s(&ds)]);
    assert_eq!(code, 2, "the old order: the dataset path is not a row: {err}");
    assert!(err.contains("bad row"), "{err}");
    assert_eq!(fails(&["show", "-d", s(&ds), s(&ds), "7"]).0, 2, "one argument too many");
    assert_eq!(fails(&["show", s(&ds)]).0, 2, "no row");
    assert_eq!(fails(&["show", s(&ds), "x"]).0, 2, "not a row");
    ok(&["tag", "-d", s(&ds), "v2"]);
    assert_eq!(json(&["tag", "-d", s(&ds), "--list"]).as_array().map(Vec::len), Some(2));
    assert_eq!(fails(&["tag", s(&ds)]).0, 2, "no name");
    assert_eq!(fails(&["tag", s(&ds), "v3", "--list"]).0, 2, "--list takes no name");
}

#[test]
fn missing_datasets_and_bad_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let (code, stdout, _) = fails(&["--json", "info", s(&missing)]);
    assert_eq!(code, 3);
    let err: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(err["error"]["exit_code"], 3);
    assert!(!missing.exists(), "read commands do not create folders");
    assert_eq!(fails(&["info"]).0, 2);
    assert_eq!(fails(&["info", "a", "-d", "b"]).0, 2);
    assert_eq!(fails(&["verify", "--bogus"]).0, 2);
    assert_eq!(fails(&["ingest", s(&dir.path().join("ds")), s(&missing)]).0, 3);
    assert_eq!(fails(&["ingest", s(&dir.path().join("ds"))]).0, 2, "no inputs");
    assert!(ok(&["--help"]).contains("Exit codes"));
    for cmd in [
        "ingest", "info", "log", "diff", "tag", "branch", "show", "verify", "export", "delete", "update", "column",
        "compact", "merge", "restore", "gc", "bench",
    ] {
        assert!(ok(&[cmd, "--help"]).contains("Usage"), "{cmd} --help");
    }
}

#[test]
fn verify_reports_each_corrupt_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("train");
    image_folder(&root, &["a", "b"], 4);
    let ds = dir.path().join("ds");
    // Small data files: several per version.
    ok(&["ingest", s(&ds), s(&root), "-q", "--file-size", "1K"]);
    let v = json(&["verify", s(&ds)]);
    assert_eq!(v["ok"], true);
    let files = v["files"].as_u64().unwrap();
    assert!(files >= 3, "{v}");
    assert!(ok(&["verify", s(&ds)]).contains("OK"));

    // Flip one byte inside the first value page of two different data files.
    let d = Dataset::open(s(&ds)).unwrap();
    let mut corrupted = Vec::new();
    for info in d.fragments().iter().take(2) {
        let file = &info.fragment.files[0];
        let df = d.data_file(&info.fragment, file).unwrap();
        let chunk = &df.footer().columns[0];
        let block = chunk.pages[0].block;
        let path = ds.join(&file.path);
        let mut f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        let at = block.offset + block.stored_len / 2;
        let mut b = [0u8];
        f.seek(SeekFrom::Start(at)).unwrap();
        f.read_exact(&mut b).unwrap();
        f.seek(SeekFrom::Start(at)).unwrap();
        f.write_all(&[b[0] ^ 0x5a]).unwrap();
        corrupted.push(file.path.clone());
    }
    let (code, stdout, _) = fails(&["verify", s(&ds)]);
    assert_eq!(code, 1);
    for p in &corrupted {
        assert!(stdout.contains(p.as_str()), "{p} named in: {stdout}");
    }
    let (code, stdout, _) = fails(&["--json", "verify", s(&ds)]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["ok"], false);
    let faults = v["faults"].as_array().unwrap();
    assert_eq!(faults.len(), 2, "one fault per corrupted file, none hidden: {v}");
    assert!(faults.iter().all(|f| f["class"] == "malformed" && f["column"] == "image"));
    assert_eq!(v["files"].as_u64(), Some(files), "every file was still read");
}

#[test]
fn export_npy_and_wds_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let images = images_dataset(dir.path());
    let src = dir.path().join("rows.jsonl");
    std::fs::write(
        &src,
        "{\"t\": \"x\", \"f\": 1.5, \"j\": {\"a\": 1}, \"b\": true}\n{\"t\": null, \"f\": null, \"j\": null}\n{\"t\": \"zz\", \"f\": -3, \"j\": [], \"b\": false}\n",
    )
    .unwrap();
    let rows = dir.path().join("rows");
    ok(&["ingest", s(&rows), s(&src), "-q"]);
    let arrays = dir.path().join("arrays");
    std::fs::create_dir_all(&arrays).unwrap();
    let v: Vec<u8> = (0..24u16).flat_map(u16::to_le_bytes).collect();
    std::fs::write(arrays.join("m.npy"), npy("<u2", &[4, 2, 3], &v)).unwrap();
    let tensors = dir.path().join("tensors");
    ok(&["ingest", s(&tensors), s(&arrays), "-q"]);

    for (name, ds) in [("images", &images), ("rows", &rows), ("tensors", &tensors)] {
        for format in ["npy", "wds"] {
            let out = dir.path().join(format!("{name}-{format}"));
            let e = json(&["export", s(ds), "--out", s(&out), "--format", format, "--shard-rows", "2"]);
            assert!(!e["files"].as_array().unwrap().is_empty());
            let back = dir.path().join(format!("{name}-{format}-back"));
            ok(&["ingest", s(&back), s(&out), "-q"]);
            assert_eq!(digest(&back), digest(ds), "{name} through {format}");
        }
    }
    // Formats of the output files.
    let out = dir.path().join("images-npy");
    assert!(out.join("label.npy").exists() && out.join("image.lengths.npy").exists());
    assert!(out.join("image.values.npy").exists() && out.join("tessera.schema.json").exists());
    assert!(dir.path().join("rows-npy").join("t.valid.npy").exists());
    let shard = std::fs::read(dir.path().join("images-wds").join("shard-000000.tar")).unwrap();
    let mut ar = tar::Archive::new(shard.as_slice());
    let names: Vec<String> =
        ar.entries().unwrap().map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names[..3], ["000000000.png", "000000000.cls", "000000000.image_original.bin"]);
    // A non-empty output folder is refused.
    assert_eq!(fails(&["export", s(&images), "--out", s(&out)]).0, 4);
}

#[cfg(feature = "bench")]
#[test]
fn bench_runs_the_loader() {
    let dir = tempfile::tempdir().unwrap();
    let ds = images_dataset(dir.path());
    // 6 rows in batches of 4: two batches per epoch (the second padded), two timed epochs, no
    // warm-up (after one, the loader's page cache can hold these few pages: no requests).
    let b = json(&["bench", s(&ds), "--batch-size", "4", "--warmup", "0", "--epochs", "2", "--workers", "1", "-q"]);
    assert_eq!((b["rows"].as_u64(), b["samples"].as_u64(), b["epochs"].as_u64()), (Some(6), Some(16), Some(2)));
    assert!(b["samples_per_sec"].as_f64().unwrap() > 0.0);
    assert!(b["requests_per_epoch"].as_u64().unwrap() > 0 && b["bytes_read_per_epoch"].as_u64().unwrap() > 0);
    assert!(b["raw_read_samples_per_sec"].as_f64().unwrap() > 0.0, "a local dataset has a raw read limit");
    // Each timed epoch's time, and the first batch after the open, are reported apart.
    let b = json(&["bench", s(&ds), "--batch-size", "4", "--warmup", "0", "--epochs", "3", "--workers", "1", "-q"]);
    let times: Vec<f64> = b["epoch_seconds"].as_array().unwrap().iter().map(|t| t.as_f64().unwrap()).collect();
    assert_eq!(times.len(), 3, "{b}");
    assert!(
        times.iter().all(|&t| t > 0.0) && (times.iter().sum::<f64>() - b["seconds"].as_f64().unwrap()).abs() < 0.05
    );
    let first = b["first_batch_seconds"].as_f64().unwrap();
    assert!(first >= b["open_seconds"].as_f64().unwrap() && first < b["seconds"].as_f64().unwrap() + 1.0, "{b}");
    assert_eq!(fails(&["bench", s(&ds), "--cache-dir", "/tmp/x"]).0, 2, "--cache-dir needs --cache-mib");
    let text = ok(&["bench", s(&ds), "--shuffle", "block", "--window", "1", "--batch-size", "2", "--epochs", "1"]);
    assert!(text.contains("samples/s") && text.contains("raw read()"), "{text}");
    let missing = dir.path().join("nope");
    let (code, _, err) = fails(&["bench", s(&missing)]);
    assert_eq!(code, 3, "{err}");
}

#[cfg(not(feature = "bench"))]
#[test]
fn bench_without_the_feature_says_how_to_get_it() {
    let (code, _, err) = fails(&["bench", "some/dataset", "--epochs", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--features bench"), "{err}");
}

/// `ingest --index tree` writes a fragment tree; `info` names the layout; a later append keeps
/// it, and a log converts when asked.
#[test]
fn ingest_with_a_fragment_tree() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("train");
    image_folder(&root, &["a", "b"], 2);
    let ds = dir.path().join("ds");
    ok(&["ingest", s(&ds), s(&root), "-q", "--index", "tree"]);
    let info = json(&["info", s(&ds)]);
    assert_eq!((info["index"]["layout"].as_str(), info["index"]["depth"].as_u64()), (Some("tree"), Some(1)), "{info}");
    ok(&["ingest", "-d", s(&ds), s(&root), "-q"]);
    assert_eq!(json(&["info", s(&ds)])["index"]["layout"], "tree", "a tree stays a tree");
    assert!(ok(&["info", s(&ds)]).contains("fragment tree, 1 levels"));

    let log = dir.path().join("log");
    ok(&["ingest", s(&log), s(&root), "-q"]);
    assert_eq!(json(&["info", s(&log)])["index"]["layout"], "log");
    ok(&["ingest", "-d", s(&log), s(&root), "-q", "--index", "tree"]);
    assert_eq!(json(&["info", s(&log)])["index"]["layout"], "tree", "a log converts when asked");
    assert_eq!(json(&["info", s(&log)])["rows"], 8);
    let bad = run(&["ingest", s(&log), s(&root), "-q", "--index", "btree"]);
    assert_eq!(bad.status.code(), Some(2), "{}", String::from_utf8_lossy(&bad.stderr));
}
