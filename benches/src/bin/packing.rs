//! Token packing against a naive pad-to-max batcher over the same ragged token column, in one
//! run.
//!
//! The dataset: DOCS documents of i32 tokens whose lengths follow a long tail (16 to 8,192
//! tokens, median about 600: a deterministic log-uniform draw), in fragments of 1,000. Both
//! loaders read the column in global-shuffle order with 2 workers:
//! * **packed**: [`Packer`] into batches of 8 windows of 2,048 tokens (documents split across
//!   windows), the loader reading documents packed (`RaggedLayout::Packed`), 64 per batch;
//! * **pad-to-max**: batches of 8 documents padded to the batch's longest
//!   (`RaggedLayout::Padded`), what a loader without packing hands a training loop.
//!
//! Prints tokens/s (real tokens delivered per second) and the share of padding tokens in the
//! batches of each, and epoch time; alternating packed, padded, packed, … over EPOCHS epochs.
//!
//! `cargo run --release -p tessera-benches --bin packing -- [DOCS] [EPOCHS]` (20000, 3 by
//! default). The dataset is written under `target/packing-DOCS` (or `$PACKING_DIR`).

use std::path::PathBuf;
use std::time::Instant;

use tessera::{Batch, Column, ColumnData, DType, Dataset, Dim, Schema, WriteOptions};
use tessera_loader::{Loader, LoaderConfig, PackConfig, Packer, RaggedLayout, RaggedOptions, ShuffleMode};

const CONTEXT: usize = 2048;
const WINDOWS: usize = 8;

/// Document `d`'s length: log-uniform in 16..8192.
fn len(d: u64) -> usize {
    let u = (d.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) as f64 / (1u64 << 53) as f64;
    (16.0 * 512f64.powf(u)) as usize
}

fn dataset(root: &str, docs: u64) {
    if Dataset::open(root).is_ok() {
        return;
    }
    let schema = Schema::new([Column::new("tokens", DType::I32, &[Dim::Ragged])]).expect("schema");
    let mut ds = Dataset::create(root, schema, &WriteOptions::default()).expect("create");
    for start in (0..docs).step_by(1000) {
        let rows: Vec<Vec<i32>> =
            (start..(start + 1000).min(docs)).map(|d| (0..len(d)).map(|o| (d as i32) ^ (o as i32)).collect()).collect();
        let refs: Vec<&[i32]> = rows.iter().map(Vec::as_slice).collect();
        let batch = Batch::new().with("tokens", ColumnData::from_sequences(&refs)).expect("tokens");
        ds = ds.append(&batch, "docs", WriteOptions::default()).expect("append");
    }
}

fn config(root: &str, batch: usize, layout: RaggedLayout) -> LoaderConfig {
    LoaderConfig { ragged: RaggedOptions { layout, ..RaggedOptions::default() }, ..LoaderConfig::new(root) }
        .with_batch_size(batch)
        .with_shuffle(ShuffleMode::Global)
        .with_workers(2)
        .with_seed(1)
}

/// (real tokens, batch tokens, seconds) of one packed epoch.
fn packed(loader: &Loader, epoch: u64) -> (u64, u64, f64) {
    let t = Instant::now();
    let (mut real, mut total) = (0u64, 0u64);
    for b in Packer::epoch(loader, PackConfig::new("tokens", CONTEXT, WINDOWS), epoch).expect("packer") {
        let b = b.expect("packed batch");
        real += b.real_tokens as u64;
        total += (b.windows * b.context) as u64;
    }
    (real, total, t.elapsed().as_secs_f64())
}

/// (real tokens, batch tokens, seconds) of one pad-to-max epoch, counting only the epoch's
/// real documents.
fn padded(loader: &Loader, epoch: u64) -> (u64, u64, f64) {
    let t = Instant::now();
    let (mut real, mut total) = (0u64, 0u64);
    let mut it = loader.epoch(epoch).expect("epoch");
    let n = it.plan().rows();
    for b in &mut it {
        let b = b.expect("batch");
        let col = &b.columns[0];
        let lengths = col.layout.lengths().expect("lengths");
        let keep = (n.saturating_sub(b.position)).min(b.rows.len() as u64) as usize;
        real += lengths[..keep].iter().map(|&l| l as u64).sum::<u64>();
        total += (col.shape[0] * col.shape[1]) as u64;
    }
    (real, total, t.elapsed().as_secs_f64())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let docs: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let epochs: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let dir =
        std::env::var_os("PACKING_DIR").map_or_else(|| PathBuf::from(format!("target/packing-{docs}")), PathBuf::from);
    let root = dir.to_str().expect("utf-8 path").to_string();
    let t = Instant::now();
    dataset(&root, docs);
    let tokens: u64 = (0..docs).map(|d| len(d) as u64).sum();
    eprintln!("{docs} documents, {tokens} tokens, ready in {:.1} s", t.elapsed().as_secs_f64());
    let pack_loader = Loader::open(config(&root, 64, RaggedLayout::Packed)).expect("packed loader");
    let pad_loader = Loader::open(config(&root, WINDOWS, RaggedLayout::Padded)).expect("padded loader");
    packed(&pack_loader, 0);
    padded(&pad_loader, 0);
    let (mut pack_sum, mut pad_sum) = ((0u64, 0u64, 0f64), (0u64, 0u64, 0f64));
    for epoch in 1..=epochs {
        let one = packed(&pack_loader, epoch);
        let other = padded(&pad_loader, epoch);
        assert_eq!(one.0, tokens, "packing delivers every token");
        assert_eq!(other.0, tokens, "pad-to-max delivers every token");
        pack_sum = (pack_sum.0 + one.0, pack_sum.1 + one.1, pack_sum.2 + one.2);
        pad_sum = (pad_sum.0 + other.0, pad_sum.1 + other.1, pad_sum.2 + other.2);
    }
    println!(
        "{docs} documents, {tokens} tokens ({} per document on average), {epochs} timed epochs each, alternating",
        tokens / docs
    );
    println!("| batcher | real tokens/s | padding share of the batches | batch tokens per epoch |");
    println!("|---|---|---|---|");
    for (name, (real, total, secs)) in [
        (format!("packed, {WINDOWS} × {CONTEXT}"), pack_sum),
        (format!("pad to the longest, {WINDOWS} documents"), pad_sum),
    ] {
        println!(
            "| {name} | {:.0} | {:.2}% | {} |",
            real as f64 / secs,
            100.0 * (1.0 - real as f64 / total as f64),
            total / epochs
        );
    }
}
