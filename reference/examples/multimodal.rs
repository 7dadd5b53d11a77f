//! Writes a small multimodal dataset (image, label, tokens, embedding, caption) to the local
//! store, commits two versions, tags the first, and reads everything back, verifying it.
//!
//! `cargo run -p tessera --example multimodal -- [DIR]` (default `target/multimodal-demo`).

use tessera::{
    At, Batch, Column, ColumnData, Compression, DType, Dataset, Dim, ImageLayout, Kind, Limits, Metric, Schema, Store,
    WriteOptions,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "target/multimodal-demo".into());
    if std::path::Path::new(&dir).exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    let schema = Schema::new([
        Column::new("image", DType::U8, &[Dim::Fixed(32), Dim::Fixed(32), Dim::Fixed(3)])
            .with_kind(Kind::Image { layout: ImageLayout::Hwc })
            .with_compression(Compression::Lz4),
        Column::new("label", DType::I64, &[])
            .with_kind(Kind::ClassLabel { names: vec!["red".into(), "green".into(), "blue".into()] }),
        Column::new("tokens", DType::I32, &[Dim::Ragged])
            .with_kind(Kind::Tokens { vocab_size: Some(1000) })
            .with_compression(Compression::Zstd { level: 3 }),
        Column::new("embedding", DType::F32, &[Dim::Fixed(16)]).with_kind(Kind::Embedding { metric: Metric::Cosine }),
        Column::new("caption", DType::Utf8, &[]).with_kind(Kind::Text),
    ])?;
    let ds = Dataset::create(&dir, schema, &WriteOptions::default())?;
    let v2 = ds.append(&make_batch(0, 500)?, "first 500 samples", WriteOptions::default())?;
    v2.create_tag("v-500", "the first half", &WriteOptions::default())?;
    let v3 = v2.append(&make_batch(500, 500)?, "500 more", WriteOptions::default())?;
    println!(
        "wrote {} rows in {} fragments as version {} of {dir}",
        v3.row_count(),
        v3.fragments().len(),
        v3.version()
    );

    let store = Store::open(&dir)?;
    let latest = Dataset::open_at(&store, &At::Latest, Limits::default())?;
    let pinned = Dataset::open_at(&store, &At::Tag("v-500".into()), Limits::default())?;
    let report = latest.verify()?;
    let row = latest.read_row(742, Some(&["label", "tokens", "caption"]))?;
    println!(
        "latest: {} rows, verified {} files / {} blocks; tag v-500: {} rows",
        latest.row_count(),
        report.files,
        report.blocks,
        pinned.row_count()
    );
    println!(
        "row 742: label={:?} tokens={} caption={:?}",
        row.get("label").map(tessera::ColumnData::to_vec::<i64>).transpose()?,
        row.get("tokens").map_or(0, |c| c.row_shape(0)[0]),
        row.get("caption").and_then(|c| c.str_row(0))
    );
    Ok(())
}

fn make_batch(start: usize, n: usize) -> tessera::Result<Batch> {
    let mut images = Vec::with_capacity(n * 32 * 32 * 3);
    let mut labels = Vec::with_capacity(n);
    let mut tokens: Vec<Vec<i32>> = Vec::with_capacity(n);
    let mut emb = Vec::with_capacity(n * 16);
    let mut captions = Vec::with_capacity(n);
    for i in start..start + n {
        let label = (i % 3) as i64;
        for p in 0..32 * 32 {
            for c in 0..3 {
                images.push(if c == label as usize { 200 } else { ((p * 7 + i) % 50) as u8 });
            }
        }
        labels.push(label);
        tokens.push((0..(i % 40 + 1) as i32).map(|t| (t * 31 + i as i32) % 1000).collect());
        emb.extend((0..16).map(|d| ((i * 16 + d) as f32).sin()));
        captions.push(format!("sample {i}, a {} square", ["red", "green", "blue"][label as usize]));
    }
    let token_rows: Vec<&[i32]> = tokens.iter().map(Vec::as_slice).collect();
    Batch::new()
        .with("image", ColumnData::from_fixed(&[32, 32, 3], &images)?)?
        .with("label", ColumnData::from_scalars(&labels))?
        .with("tokens", ColumnData::from_sequences(&token_rows))?
        .with("embedding", ColumnData::from_fixed(&[16], &emb)?)?
        .with("caption", ColumnData::from_strings(&captions))
}
