//! Encoded image columns (issue 16): the loader over JPEG q90 224 × 224 images stored as they
//! are, against the same images stored decoded, and against PIL decoding in a `PyTorch`
//! `DataLoader` on the same files, in the same run; and the bytes each form stores.
//!
//! ```text
//! cargo run --release -p tessera-loader --example encoded_bench -- [--images N] [--workers W] [--batch B] [--dir DIR]
//! ```
//! Defaults: 4,000 images, 2 workers, batch 64, a fresh temporary directory (removed
//! afterwards). CI runs it with `--images 256`.
//!
//! The images are synthetic but photo-like (smooth gradients, shapes and sensor-like noise),
//! so their JPEGs are about the size of real ones. The same pixels go into three datasets:
//! `encoded` (the JPEG files, compression `encoded`), `decoded` (pixels, no compression) and
//! `decoded+zstd` (pixels, zstd level 3; bytes only). Every loader run is global shuffle, one
//! warm-up epoch, then one timed epoch; checksums on. PIL runs `benches/encoded/pil_loader.py`
//! with `.venv/bin/python` (Pillow from scripts/setup.d/30-encoded.sh) on the JPEG files.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use tessera::{Batch, Column, ColumnData, Compression, DType, Dataset, Dim, ImageLayout, Kind, Schema, WriteOptions};
use tessera_loader::sampler::SplitMix64;
use tessera_loader::{Loader, LoaderConfig, ShuffleMode};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const SIDE: u32 = 224;
const QUALITY: u8 = 90;

struct Args {
    images: usize,
    workers: usize,
    batch: usize,
    dir: Option<PathBuf>,
}

fn args() -> Res<Args> {
    let mut a = Args { images: 4000, workers: 2, batch: 64, dir: None };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--images" => a.images = value()?.parse()?,
            "--workers" => a.workers = value()?.parse()?,
            "--batch" => a.batch = value()?.parse()?,
            "--dir" => a.dir = Some(PathBuf::from(value()?)),
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    Ok(a)
}

/// A photo-like RGB picture: two gradients, a few discs, and noise.
fn picture(seed: u64) -> image::RgbImage {
    let mut rng = SplitMix64::new(seed + 1); // pictures need no better randomness
    let mut draw = || rng.next_u64();
    let (base_r, base_g, base_b) = (draw() % 256, draw() % 256, draw() % 256);
    let discs: Vec<(i64, i64, i64, u8)> = (0..4)
        .map(|_| ((draw() % 224) as i64, (draw() % 224) as i64, (20 + draw() % 60) as i64, (draw() % 256) as u8))
        .collect();
    let mut noise = SplitMix64::new(seed ^ 0x9e37_79b9);
    image::RgbImage::from_fn(SIDE, SIDE, |x, y| {
        let (xi, yi) = (i64::from(x), i64::from(y));
        let mut px =
            [(base_r + u64::from(x)) as u8, (base_g + u64::from(y) / 2) as u8, (base_b + u64::from(x + y) / 3) as u8];
        for &(cx, cy, rad, v) in &discs {
            if (xi - cx).pow(2) + (yi - cy).pow(2) < rad * rad {
                px = [v, v / 2, 255 - v];
            }
        }
        let jitter = (noise.next_u64() % 9) as u8;
        image::Rgb(px.map(|p| p.saturating_add(jitter).saturating_sub(4)))
    })
}

fn jpeg(img: &image::RgbImage) -> Res<Vec<u8>> {
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, QUALITY).encode_image(img)?;
    Ok(out)
}

fn image_column(compression: Compression) -> Column {
    let shape = [Dim::Fixed(u64::from(SIDE)), Dim::Fixed(u64::from(SIDE)), Dim::Fixed(3)];
    Column::new("image", DType::U8, &shape)
        .with_kind(Kind::Image { layout: ImageLayout::Hwc })
        .with_compression(compression)
}

/// Writes the three datasets and the JPEG folder; returns their roots.
fn build(root: &Path, n: usize) -> Res<[PathBuf; 4]> {
    let files = root.join("jpeg");
    std::fs::create_dir_all(&files)?;
    let kinds =
        [("encoded", Compression::Encoded), ("decoded", Compression::None), ("zstd", Compression::Zstd { level: 3 })];
    let mut sets = Vec::new();
    for (name, z) in kinds {
        let loc = root.join(name);
        let ds =
            Dataset::create(loc.to_str().ok_or("path")?, Schema::new([image_column(z)])?, &WriteOptions::default())?;
        sets.push((loc, ds));
    }
    let shape = image_column(Compression::None).shape;
    for start in (0..n).step_by(500) {
        let end = (start + 500).min(n);
        let mut enc = ColumnData::empty(DType::U8, &shape, false);
        let mut dec = ColumnData::empty(DType::U8, &shape, false);
        for i in start..end {
            let file = jpeg(&picture(i as u64))?;
            std::fs::write(files.join(format!("{i:06}.jpg")), &file)?;
            enc.push_encoded(&file)?;
            // The decoded datasets hold exactly the pixels a reader gets from the JPEG.
            dec.push_row(&[224, 224, 3], enc.row(enc.len() - 1))?;
        }
        for (k, (_, ds)) in sets.iter_mut().enumerate() {
            let col = if k == 0 { enc.clone() } else { dec.clone() };
            *ds = ds.append(&Batch::new().with("image", col)?, "images", WriteOptions::default())?;
        }
    }
    let [(a, _), (b, _), (c, _)] = <[_; 3]>::try_from(sets).map_err(|_| "three datasets")?;
    Ok([a, b, c, files])
}

fn dir_bytes(p: &Path) -> Res<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(p)? {
        let e = e?;
        total += if e.file_type()?.is_dir() { dir_bytes(&e.path())? } else { e.metadata()?.len() };
    }
    Ok(total)
}

/// Samples per second of one timed epoch after a warm-up epoch.
fn loader_rate(root: &Path, a: &Args) -> Res<f64> {
    let cfg = LoaderConfig::new(root.to_str().ok_or("path")?)
        .with_batch_size(a.batch)
        .with_shuffle(ShuffleMode::Global)
        .with_seed(1)
        .with_workers(a.workers);
    let loader = Loader::open(cfg)?;
    let mut rate = 0.0;
    for epoch in 0..2 {
        let t = Instant::now();
        let mut n = 0usize;
        for b in loader.epoch(epoch)? {
            n += b?.rows.len();
        }
        rate = n as f64 / t.elapsed().as_secs_f64();
    }
    Ok(rate)
}

fn pil_rate(files: &Path, a: &Args) -> Res<f64> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let venv = repo.join(".venv/bin/python");
    let python = if venv.exists() { venv } else { PathBuf::from("python3") };
    let out = Command::new(python)
        .arg(repo.join("benches/encoded/pil_loader.py"))
        .args([files.to_str().ok_or("path")?, &a.workers.to_string(), &a.batch.to_string()])
        .output()?;
    if !out.status.success() {
        return Err(format!("pil_loader.py failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    // One JSON line; the rate is the number after `"samples_per_s": `.
    let text = String::from_utf8_lossy(&out.stdout);
    let rate = text.split("\"samples_per_s\": ").nth(1).and_then(|r| r.split([',', '}']).next());
    Ok(rate.ok_or("pil_loader.py printed no rate")?.trim().parse()?)
}

fn mb(b: u64) -> String {
    format!("{:.1} MB", b as f64 / 1e6)
}

fn main() -> Res<()> {
    let a = args()?;
    let tmp = tempfile::tempdir()?;
    let root = a.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let t = Instant::now();
    let [enc, dec, zst, files] = build(&root, a.images)?;
    println!("{} JPEG q{QUALITY} {SIDE}x{SIDE} images written in {:.1} s", a.images, t.elapsed().as_secs_f64());
    let (b_files, b_enc, b_dec, b_zst) = (dir_bytes(&files)?, dir_bytes(&enc)?, dir_bytes(&dec)?, dir_bytes(&zst)?);
    println!(
        "stored bytes: JPEG files {}, encoded dataset {}, decoded {}, decoded+zstd {}",
        mb(b_files),
        mb(b_enc),
        mb(b_dec),
        mb(b_zst)
    );
    println!(
        "  decoded / encoded = {:.2}x, decoded+zstd / encoded = {:.2}x",
        b_dec as f64 / b_enc as f64,
        b_zst as f64 / b_enc as f64
    );
    let r_enc = loader_rate(&enc, &a)?;
    let r_dec = loader_rate(&dec, &a)?;
    println!(
        "loader, {} workers, batch {}, global shuffle: encoded {r_enc:.0} samples/s, decoded {r_dec:.0} samples/s",
        a.workers, a.batch
    );
    match pil_rate(&files, &a) {
        Ok(r_pil) => {
            println!("PIL in a PyTorch DataLoader, {} workers: {r_pil:.0} samples/s", a.workers);
            println!("encoded loader / PIL DataLoader = {:.2}x", r_enc / r_pil);
        }
        Err(e) => println!("PIL DataLoader skipped: {e}"),
    }
    Ok(())
}
