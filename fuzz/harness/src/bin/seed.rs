//! Writes the seed corpora: `tessera-fuzz-seed <corpus-dir> [<fixtures-dir>]`.
//!
//! Seeds come from datasets written with the reference writer (several dtypes, shapes, codecs,
//! deletions, branches, tags, schema evolution) and, when given, from the files of a fixtures
//! directory. Everything is deterministic (fixed timestamps and writer ids); files are named by
//! the SHA-256 of their content, so re-running adds nothing twice. Existing files are kept.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use sha2::Digest;
use tessera::datafile::Footer;
use tessera::{
    At, BBoxFormat, Batch, Column, ColumnData, Compression, DType, Dataset, Dim, ImageLayout, Kind, Limits, Metric,
    Schema, Store, WriteOptions,
};
use tessera_fuzz_harness::layout::{self, Layout};
use tessera_fuzz_harness::{encode_block_input, encode_data_file_input, known_bugs};

type Corpora = BTreeMap<&'static str, BTreeSet<Vec<u8>>>;
/// A seed dataset: name, writer, the versions its store layouts open.
type Builder<'a> = (&'a str, fn() -> tessera::Result<Store>, &'a [At]);

/// Most seeds one target gets (generated ones first, then fixtures).
const MAX_SEEDS: usize = 200;

/// Largest object put into a seed (keeps the corpora small).
const MAX_SEED_OBJECT: usize = 64 << 10;

fn opts(target_file_bytes: u64, page_bytes: u64) -> WriteOptions {
    WriteOptions {
        target_file_bytes,
        page_bytes,
        timestamp_ms: Some(1_700_000_000_000),
        writer_id: Some([7; 16]),
        ..WriteOptions::default()
    }
}

fn memory_store() -> Store {
    tessera_fuzz_harness::known_bugs::memory_store()
}

/// Image, class label, zstd tokens, nullable lz4 text; tag, branch with its own commit, deletes.
fn smoke() -> tessera::Result<Store> {
    let store = memory_store();
    let schema = Schema::new([
        Column::new("img", DType::U8, &[Dim::Fixed(2), Dim::Fixed(2), Dim::Fixed(3)])
            .with_kind(Kind::Image { layout: ImageLayout::Hwc })
            .with_compression(Compression::Lz4),
        Column::new("label", DType::I64, &[]).with_kind(Kind::ClassLabel { names: vec!["a".into(), "b".into()] }),
        Column::new("tok", DType::I32, &[Dim::Ragged]).with_compression(Compression::Zstd { level: 3 }),
        Column::new("txt", DType::Utf8, &[]).with_compression(Compression::Lz4).nullable(),
    ])?;
    let o = opts(200, 64);
    let ds = Dataset::create_in(&store, schema, &o)?;
    let n = 10usize;
    let img: Vec<u8> = (0..n * 12).map(|i| (i / 3) as u8).collect();
    let toks: Vec<Vec<i32>> = (0..n).map(|i| (0..i as i32).map(|t| t % 3).collect()).collect();
    let tok_refs: Vec<&[i32]> = toks.iter().map(Vec::as_slice).collect();
    let mut txt = ColumnData::empty(DType::Utf8, &[], true);
    for i in 0..n {
        if i % 3 == 0 {
            txt.push_null()?;
        } else {
            txt.push_row(&[6], format!("röw{i:02}").as_bytes())?;
        }
    }
    let batch = Batch::new()
        .with("img", ColumnData::from_fixed(&[2, 2, 3], &img)?)?
        .with("label", ColumnData::from_scalars(&(0..n as i64).map(|i| i % 2).collect::<Vec<_>>()))?
        .with("tok", ColumnData::from_sequences(&tok_refs))?
        .with("txt", txt)?;
    let v2 = ds.append(&batch, "first", o.clone())?;
    v2.create_tag("t", "tagged", &o)?;
    let dev = v2.create_branch("dev", &o)?;
    dev.append(&batch, "dev append", o.clone())?;
    v2.delete_rows(&[1, 3, 8], "delete", &o)?;
    Ok(store)
}

/// Every fixed-size dtype as a scalar, nulls, `bytes`, column groups, no compression.
fn scalars() -> tessera::Result<Store> {
    let store = memory_store();
    let mut cols = Vec::new();
    for (i, d) in DType::ALL.iter().enumerate() {
        let c = Column::new(d.name(), *d, &[]);
        cols.push(if i % 3 == 0 { c.nullable() } else { c });
    }
    let schema = Schema::new(cols)?;
    let o = WriteOptions { column_groups: vec![vec!["u8".into(), "f64".into()]], ..opts(4096, 48) };
    let ds = Dataset::create_in(&store, schema.clone(), &o)?;
    let n = 20usize;
    let mut batch = Batch::new();
    for c in &schema.columns {
        let mut d = ColumnData::for_column(c);
        for r in 0..n {
            if c.nullable && r % 4 == 1 {
                d.push_null()?;
                continue;
            }
            let size = c.dtype.item_size();
            let (shape, bytes): (Vec<u64>, Vec<u8>) = match c.dtype {
                DType::Bool => (vec![], vec![(r % 2) as u8]),
                DType::Utf8 => (vec![r as u64 % 4], "abcd".as_bytes()[..r % 4].to_vec()),
                DType::Bytes => (vec![r as u64 % 5], vec![0xff; r % 5]),
                _ => (vec![], (0..size).map(|b| (r * 31 + b * 7) as u8).collect()),
            };
            d.push_row(&shape, &bytes)?;
        }
        batch.push(c.name.clone(), d)?;
    }
    ds.append(&batch, "scalars", o)?;
    Ok(store)
}

/// Tensors: embeddings, bboxes, masks, zero-width rows, video; then schema evolution, updates,
/// compaction.
fn tensors() -> tessera::Result<Store> {
    let store = memory_store();
    let schema = Schema::new([
        Column::new("emb", DType::F16, &[Dim::Fixed(4)])
            .with_kind(Kind::Embedding { metric: Metric::Cosine })
            .with_compression(Compression::Zstd { level: 1 }),
        Column::new("pair", DType::Bf16, &[Dim::Ragged, Dim::Fixed(2)]),
        Column::new("box", DType::F32, &[Dim::Ragged, Dim::Fixed(4)])
            .with_kind(Kind::BBox { format: BBoxFormat::Xyxy, normalized: true })
            .with_compression(Compression::Lz4),
        Column::new("mask", DType::Bool, &[Dim::Fixed(3), Dim::Fixed(3)]).with_kind(Kind::Mask),
        Column::new("empty", DType::U16, &[Dim::Fixed(0)]),
        Column::new("video", DType::U8, &[Dim::Ragged, Dim::Fixed(2), Dim::Fixed(2), Dim::Fixed(1)])
            .with_kind(Kind::Video { fps_milli: 30_000 })
            .nullable(),
    ])?;
    let o = opts(512, 40);
    let ds = Dataset::create_in(&store, schema.clone(), &o)?;
    let n = 12usize;
    let mut batch = Batch::new();
    for c in &schema.columns {
        let mut d = ColumnData::for_column(c);
        for r in 0..n {
            if c.nullable && r % 5 == 2 {
                d.push_null()?;
                continue;
            }
            let shape: Vec<u64> =
                c.shape.iter().map(|dim| if let Dim::Fixed(x) = dim { *x } else { (r % 3) as u64 }).collect();
            let len = shape.iter().product::<u64>() as usize * c.dtype.item_size();
            let bytes: Vec<u8> = (0..len)
                .map(|i| if c.dtype == DType::Bool { ((r + i) % 2) as u8 } else { (r * 13 + i) as u8 })
                .collect();
            d.push_row(&shape, &bytes)?;
        }
        batch.push(c.name.clone(), d)?;
    }
    let ds = ds.append(&batch, "tensors", o.clone())?;
    let ds = ds.add_column(
        Column::new("score", DType::F64, &[]),
        Some(&ColumnData::from_scalars(&(0..n).map(|i| i as f64 / 3.0).collect::<Vec<_>>())),
        "add score",
        &o,
    )?;
    let upd = Batch::new().with("score", ColumnData::from_scalars(&[9.5f64, -1.0]))?;
    let ds = ds.update_rows(&[2, 7], &upd, "update", &o)?;
    let ds = ds.drop_column("pair", "drop pair", &o)?;
    let ds = ds.rename_column("emb", "embedding", "rename", &o)?;
    let ds = ds.delete_rows(&[0, 5], "delete", &o)?;
    ds.compact(100, "compact", &o)?;
    Ok(store)
}

/// Only `create`: version 1 with a schema and no rows.
fn empty() -> tessera::Result<Store> {
    let store = memory_store();
    let schema = Schema::new([
        Column::new("doc", DType::Utf8, &[]).with_kind(Kind::Json),
        Column::new("ids", DType::U32, &[Dim::Ragged]).with_kind(Kind::Tokens { vocab_size: Some(100) }),
    ])?
    .with_metadata("source", "seed");
    Dataset::create_in(&store, schema, &opts(1024, 64))?;
    Ok(store)
}

/// JSON and text rows, one big zstd page, audio.
fn text() -> tessera::Result<Store> {
    let store = memory_store();
    let schema = Schema::new([
        Column::new("doc", DType::Utf8, &[]).with_kind(Kind::Json).with_compression(Compression::Zstd { level: 9 }),
        Column::new("caption", DType::Utf8, &[]).with_kind(Kind::Text).with_compression(Compression::Lz4),
        Column::new("audio", DType::I16, &[Dim::Ragged, Dim::Fixed(2)])
            .with_kind(Kind::Audio { sample_rate: 16_000 })
            .with_compression(Compression::Zstd { level: 3 }),
    ])?;
    let o = opts(1 << 20, 4096);
    let ds = Dataset::create_in(&store, schema, &o)?;
    let n = 16usize;
    let docs: Vec<String> = (0..n).map(|i| format!("{{\"id\":{i},\"tags\":[\"a\",\"b\"],\"x\":{}}}", i * 7)).collect();
    let caps: Vec<String> = (0..n).map(|i| "ünïcødé caption ".repeat(i % 4)).collect();
    let mut audio = ColumnData::empty(DType::I16, &[Dim::Ragged, Dim::Fixed(2)], false);
    for i in 0..n {
        let bytes: Vec<u8> = (0..i * 4).map(|b| (b * i) as u8).collect();
        audio.push_row(&[i as u64, 2], &bytes)?;
    }
    let batch = Batch::new()
        .with("doc", ColumnData::from_strings(&docs))?
        .with("caption", ColumnData::from_strings(&caps))?
        .with("audio", audio)?;
    ds.append(&batch, "text", o)?;
    Ok(store)
}

/// All objects of a store, sorted by key.
fn objects(store: &Store) -> tessera::Result<Vec<(String, Vec<u8>)>> {
    let mut keys: Vec<(String, u64)> = store.list_recursive("")?;
    keys.sort();
    keys.into_iter().map(|(k, size)| store.get_bounded(&k, size).map(|b| (k, b.to_vec()))).collect()
}

fn footer_of(file: &[u8]) -> Option<Footer> {
    let t = file.len().checked_sub(24)?;
    let len = u64::from_le_bytes(file[t..t + 8].try_into().ok()?) as usize;
    tessera::envelope::decode_body(&file[t.checked_sub(len)?..t], "seed").ok()
}

/// Seeds of every per-object target from a dataset's objects; `schema` gives data files'
/// expected columns (derived by the harness when `None`).
fn add_objects(c: &mut Corpora, objects: &[(String, Vec<u8>)], schema: Option<&Schema>) {
    for (key, bytes) in objects {
        if bytes.len() > MAX_SEED_OBJECT {
            continue;
        }
        let with_flag = |flag: u8| [&[flag][..], bytes].concat();
        match Path::new(key).extension().and_then(|e| e.to_str()) {
            Some("tsd") => {
                let Some(footer) = footer_of(bytes) else { continue };
                let cols: Vec<Column> = schema
                    .map(|s| {
                        s.columns
                            .iter()
                            .filter(|col| footer.columns.iter().any(|ch| ch.column_id == col.id))
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                let set = c.entry("data_file").or_default();
                set.insert(encode_data_file_input(1, &cols, bytes));
                set.insert(encode_data_file_input(0, &[], bytes));
                for ch in &footer.columns {
                    for p in &ch.pages {
                        let r = p.block.range();
                        let Some(stored) = bytes.get(r.start as usize..r.end as usize) else { continue };
                        let target = match p.block.codec {
                            tessera::Codec::Lz4 => "lz4_block",
                            tessera::Codec::Zstd => "zstd_block",
                            tessera::Codec::None
                            | tessera::Codec::Jpeg
                            | tessera::Codec::Png
                            | tessera::Codec::WebP => continue,
                        };
                        c.entry(target).or_default().insert(encode_block_input(p.block.raw_len, stored));
                    }
                }
            }
            Some("tsm") => {
                c.entry("manifest").or_default().insert(with_flag(1));
            }
            Some("tsi") => {
                c.entry("segment").or_default().insert(with_flag(1));
            }
            Some("tst") => {
                c.entry("tag").or_default().insert(with_flag(1));
            }
            Some("tsx") => {
                c.entry("deletion_vector").or_default().insert(with_flag(1));
            }
            _ => {}
        }
    }
}

fn add_layout(c: &mut Corpora, objects: &[(String, Vec<u8>)], ats: &[At]) {
    let objects: Vec<(String, Vec<u8>)> =
        objects.iter().filter(|(_, b)| b.len() <= MAX_SEED_OBJECT).take(layout::MAX_OBJECTS).cloned().collect();
    for at in ats {
        let l = Layout { flags: 1 | layout::at_bits(at), objects: objects.clone() };
        c.entry("store_layout").or_default().insert(layout::encode(&l));
    }
}

fn synthetic(c: &mut Corpora) {
    // Codec seeds: repetitive and random-ish data at a few sizes.
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for len in [0usize, 1, 15, 64, 300, 4096] {
        let patterned: Vec<u8> = (0..len).map(|i| (i % 7) as u8).collect();
        let noisy: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        for raw in [patterned, noisy] {
            for (target, comp) in [("lz4_block", Compression::Lz4), ("zstd_block", Compression::Zstd { level: 3 })] {
                let stored = tessera::codec::compress(comp, &raw).expect("compress");
                c.entry(target).or_default().insert(encode_block_input(raw.len() as u64, &stored));
            }
        }
    }
    // Round-trip seeds: random bytes decode to varied datasets.
    for len in [16usize, 64, 128, 256, 512, 1024] {
        for _ in 0..3 {
            let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            c.entry("roundtrip").or_default().insert(bytes);
        }
    }
}

/// Every regular file under `dir`, sorted, with its path relative to `dir`.
fn walk(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(dir) {
                out.push((rel.to_string_lossy().replace('\\', "/"), p));
            }
        }
    }
    out.sort();
    out
}

/// Seeds from a fixtures directory: every object file by extension, and every dataset root
/// (a directory with a `branches/` sub-directory) as a store layout. Data files are matched
/// with the columns of the manifests next to them.
fn fixtures(c: &mut Corpora, dir: &Path) -> usize {
    let files = walk(dir);
    let objects: Vec<(String, Vec<u8>)> =
        files.iter().filter_map(|(rel, p)| std::fs::read(p).ok().map(|b| (rel.clone(), b))).collect();
    let mut roots: BTreeSet<String> = BTreeSet::new();
    for (rel, _) in &files {
        if let Some(i) = rel.find("branches/")
            && (i == 0 || rel.as_bytes()[i - 1] == b'/')
        {
            roots.insert(rel[..i].to_string());
        }
    }
    let mut in_root = vec![false; objects.len()];
    for root in &roots {
        let mut objs = Vec::new();
        for (i, (rel, b)) in objects.iter().enumerate() {
            if let Some(k) = rel.strip_prefix(root.as_str()) {
                in_root[i] = true;
                objs.push((k.to_string(), b.clone()));
            }
        }
        let mut schema = Schema::default();
        for (k, b) in &objs {
            if Path::new(k).extension().is_some_and(|e| e == "tsm")
                && b.len() >= 28
                && let Ok(m) = known_bugs::bounded_decode::<tessera::manifest::Manifest>(&b[24..b.len() - 4])
            {
                for col in m.schema.columns {
                    if schema.column_by_id(col.id).is_none() {
                        schema.columns.push(col);
                    }
                }
            }
        }
        add_objects(c, &objs, Some(&schema));
        add_layout(c, &objs, &[At::Latest, At::Version(1)]);
    }
    let loose: Vec<(String, Vec<u8>)> =
        objects.iter().zip(&in_root).filter(|(_, r)| !**r).map(|(o, _)| o.clone()).collect();
    add_objects(c, &loose, None);
    roots.len()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(out) = args.first() else {
        eprintln!("usage: tessera-fuzz-seed <corpus-dir> [<fixtures-dir>]");
        std::process::exit(2);
    };
    let mut c = Corpora::new();
    let builders: [Builder; 5] = [
        ("smoke", smoke, &[At::Latest, At::Version(2), At::Tag("t".into()), At::Branch("dev".into())]),
        ("scalars", scalars, &[At::Latest]),
        ("tensors", tensors, &[At::Latest, At::Version(2), At::Version(3)]),
        ("empty", empty, &[At::Latest]),
        ("text", text, &[At::Latest]),
    ];
    for (name, build, ats) in builders {
        let store = build().unwrap_or_else(|e| panic!("seed dataset {name}: {e}"));
        let objs = objects(&store).expect("list seed store");
        let latest = Dataset::open_at(&store, &At::Latest, Limits::default()).expect("open seed");
        // Data files of dropped columns are matched against the schema that wrote them.
        let mut wide = latest.schema().clone();
        for v in 1..latest.version() {
            if let Ok(old) = latest.checkout(&At::Version(v)) {
                for col in &old.schema().columns {
                    if wide.column_by_id(col.id).is_none() {
                        wide.columns.push(col.clone());
                    }
                }
            }
        }
        add_objects(&mut c, &objs, Some(&wide));
        add_layout(&mut c, &objs, ats);
    }
    synthetic(&mut c);
    if let Some(fx) = args.get(1) {
        let mut f = Corpora::new();
        let roots = fixtures(&mut f, Path::new(fx));
        eprintln!("fixtures: {roots} dataset roots from {fx}");
        // Fill each corpus up to MAX_SEEDS with fixture seeds, in the order of their hashes.
        for (target, seeds) in f {
            let set = c.entry(target).or_default();
            let mut by_hash: Vec<(String, Vec<u8>)> = seeds
                .into_iter()
                .filter(|s| !set.contains(s))
                .map(|s| (hex::encode(sha2::Sha256::digest(&s)), s))
                .collect();
            by_hash.sort();
            let room = MAX_SEEDS.saturating_sub(set.len());
            set.extend(by_hash.into_iter().take(room).map(|(_, s)| s));
        }
    }
    let mut written = 0;
    for (target, seeds) in &c {
        let dir = Path::new(out).join(target);
        std::fs::create_dir_all(&dir).expect("create corpus dir");
        for s in seeds {
            let name = hex::encode(sha2::Sha256::digest(s));
            let path = dir.join(name);
            if !path.exists() {
                std::fs::write(&path, s).expect("write seed");
                written += 1;
            }
        }
        eprintln!("{target}: {} seeds", seeds.len());
    }
    eprintln!("{written} new files under {out}");
}
