//! Augmentation in the loader (issue 30): RandomResizedCrop(224) + horizontal flip +
//! normalise to f16 CHW, batch 256, on photos stored decoded at shorter side 256 (ragged
//! shapes) and as JPEG files in an encoded column; against torchvision.transforms.v2 in a
//! `DataLoader` with worker processes on the same images (PIL from the JPEG files, and from
//! the decoded arrays), all in one run on the same cores.
//!
//! ```text
//! cargo run --release -p tessera-loader --example augment_bench -- [--images N] [--workers W] [--batch B] [--dir DIR] [--no-baselines] [--budget-mb MB]
//! ```
//! Defaults: 2,000 images, 2 workers, batch 256. Photos: the colour pictures of
//! scikit-image (`TESSERA_PHOTOS`, else `.venv-peers`, see `benches/src/photos.rs`), each
//! image a random crop of one (area 25–100 %, aspect 3/4–4/3) resized to shorter side 256,
//! JPEG q90; without them, synthetic pictures. Every loader run: global shuffle, two warm-up
//! epochs, three timed epochs (the torchvision baselines: one warm-up epoch, three timed). The baselines run `benches/augment/torchvision_baseline.py` with
//! `.venv-peers/bin/python` (torchvision, and Grain's `MapDataset`), which also measures the resize's PSNR against
//! torchvision's. Last line: one JSON summary. `AUGMENT_BENCH_EPOCHS=1` prints each loader
//! epoch's rate to stderr.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use tessera::{Batch, Column, ColumnData, Compression, DType, Dataset, Dim, ImageLayout, Kind, Schema, WriteOptions};
use tessera_loader::sampler::SplitMix64;
use tessera_loader::{Elem, HostBatch, Loader, LoaderConfig, ShuffleMode, Transform};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const SHORTER: u32 = 256;
const QUALITY: u8 = 90;
const PHOTOS: [&str; 9] = [
    "astronaut.png",
    "chelsea.png",
    "coffee.png",
    "hubble_deep_field.jpg",
    "ihc.png",
    "motorcycle_left.png",
    "motorcycle_right.png",
    "retina.jpg",
    "rocket.jpg",
];

struct Args {
    images: usize,
    workers: usize,
    batch: usize,
    dir: Option<PathBuf>,
    baselines: bool,
    budget_mb: Option<u64>,
}

fn args() -> Res<Args> {
    let mut a = Args { images: 2000, workers: 2, batch: 256, dir: None, baselines: true, budget_mb: None };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--images" => a.images = value()?.parse()?,
            "--workers" => a.workers = value()?.parse()?,
            "--batch" => a.batch = value()?.parse()?,
            "--dir" => a.dir = Some(PathBuf::from(value()?)),
            "--no-baselines" => a.baselines = false,
            "--budget-mb" => a.budget_mb = Some(value()?.parse()?),
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    Ok(a)
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// scikit-image's colour photos, or `None` when they are not installed.
fn photos() -> Option<Vec<image::RgbImage>> {
    let dir = std::env::var_os("TESSERA_PHOTOS").map(PathBuf::from).or_else(|| {
        std::fs::read_dir(repo().join(".venv-peers/lib")).ok()?.filter_map(Result::ok).find_map(|e| {
            let d = e.path().join("site-packages/skimage/data");
            d.join(PHOTOS[0]).is_file().then_some(d)
        })
    })?;
    PHOTOS.iter().map(|p| image::open(dir.join(p)).ok().map(|i| i.to_rgb8())).collect()
}

/// Uniform in `[0, 1)` from the loader's `SplitMix64`.
fn unit(r: &mut SplitMix64) -> f64 {
    (r.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

#[allow(clippy::many_single_char_names)] // sizes and coordinates
/// Image `i`: a random crop of a photo (or a synthetic gradient), shorter side 256.
fn picture(photos: Option<&[image::RgbImage]>, i: u64) -> image::RgbImage {
    let mut r = SplitMix64::new(i * 7 + 3);
    let Some(photos) = photos else {
        let (w, h) = (SHORTER + (r.next_u64() % 128) as u32, SHORTER);
        return image::RgbImage::from_fn(w, h, |x, y| image::Rgb([(x + i as u32) as u8, y as u8, (x ^ y) as u8]));
    };
    let p = &photos[(r.next_u64() % photos.len() as u64) as usize];
    let (pw, ph) = (f64::from(p.width()), f64::from(p.height()));
    let area = pw * ph * (0.25 + 0.75 * unit(&mut r));
    let aspect = 0.75 + (4.0 / 3.0 - 0.75) * unit(&mut r);
    let w = (area * aspect).sqrt().min(pw).max(8.0);
    let h = (area / aspect).sqrt().min(ph).max(8.0);
    let (x0, y0) = ((pw - w) * unit(&mut r), (ph - h) * unit(&mut r));
    let crop = image::imageops::crop_imm(p, x0 as u32, y0 as u32, w as u32, h as u32).to_image();
    let s = f64::from(SHORTER) / w.min(h);
    let (ow, oh) = (((w * s).round() as u32).max(SHORTER), ((h * s).round() as u32).max(SHORTER));
    image::imageops::resize(&crop, ow, oh, image::imageops::FilterType::Triangle)
}

fn image_column(compression: Compression) -> Column {
    Column::new("image", DType::U8, &[Dim::Ragged, Dim::Ragged, Dim::Fixed(3)])
        .with_kind(Kind::Image { layout: ImageLayout::Hwc })
        .with_compression(compression)
}

/// The JPEG folder and the two datasets (`encoded`, `decoded`) of the same pixels.
fn build(root: &Path, n: usize) -> Res<(PathBuf, PathBuf, PathBuf, bool)> {
    let photos = photos();
    let files = root.join("jpeg");
    std::fs::create_dir_all(&files)?;
    let (enc_root, dec_root) = (root.join("encoded"), root.join("decoded"));
    let mut enc_ds = Dataset::create(
        enc_root.to_str().ok_or("path")?,
        Schema::new([image_column(Compression::Encoded)])?,
        &WriteOptions::default(),
    )?;
    let mut dec_ds = Dataset::create(
        dec_root.to_str().ok_or("path")?,
        Schema::new([image_column(Compression::None)])?,
        &WriteOptions::default(),
    )?;
    let shape = image_column(Compression::None).shape;
    for start in (0..n).step_by(250) {
        let mut enc = ColumnData::empty(DType::U8, &shape, false);
        let mut dec = ColumnData::empty(DType::U8, &shape, false);
        for i in start..(start + 250).min(n) {
            let img = picture(photos.as_deref(), i as u64);
            let mut file = Vec::new();
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut file, QUALITY).encode_image(&img)?;
            std::fs::write(files.join(format!("{i:06}.jpg")), &file)?;
            enc.push_encoded(&file)?;
            // The decoded dataset holds exactly the pixels a reader gets from the JPEG.
            let k = enc.len() - 1;
            dec.push_row(&enc.row_shape(k), enc.row(k))?;
        }
        enc_ds = enc_ds.append(&Batch::new().with("image", enc)?, "images", WriteOptions::default())?;
        dec_ds = dec_ds.append(&Batch::new().with("image", dec)?, "images", WriteOptions::default())?;
    }
    Ok((files, enc_root, dec_root, photos.is_some()))
}

/// Loader epochs before the timed ones, and the timed ones.
const WARMUP: u64 = 2;
const TIMED: u64 = 3;

/// Samples per second over [`TIMED`] epochs after [`WARMUP`] epochs, and the last batch's
/// image shape.
fn rate(root: &Path, args: &Args, augment: bool) -> Res<(f64, Vec<i64>)> {
    let a = args;
    let mut cfg = LoaderConfig::new(root.to_str().ok_or("path")?)
        .with_batch_size(a.batch)
        .with_shuffle(ShuffleMode::Global)
        .with_seed(1)
        .with_workers(a.workers);
    if let Some(mb) = a.budget_mb {
        cfg = cfg.with_memory_budget(mb << 20);
    }
    if augment {
        cfg = cfg.with_transform(
            "image",
            [
                Transform::random_resized_crop(224, 224),
                Transform::HorizontalFlip { p: 0.5 },
                Transform::imagenet_normalize(Elem::F16),
            ],
        );
    }
    let loader = Loader::open(cfg)?;
    // Two warm-up epochs (the first allocates the buffers; the pool sizes the ragged staging
    // from the first epoch's needs for the second), then three timed ones.
    let mut shape = Vec::new();
    let (mut n, mut t) = (0usize, None);
    for epoch in 0..WARMUP + TIMED {
        if epoch == WARMUP {
            t = Some(Instant::now());
            n = 0;
        }
        let (t0, n0) = (Instant::now(), n);
        for b in loader.epoch(epoch)? {
            let b: HostBatch = b?;
            n += b.rows.len();
            shape.clone_from(&b.columns[0].shape);
        }
        if std::env::var_os("AUGMENT_BENCH_EPOCHS").is_some() {
            eprintln!("  epoch {epoch}: {:.0} img/s", (n - n0) as f64 / t0.elapsed().as_secs_f64());
        }
    }
    let rate = n as f64 / t.map_or(f64::NAN, |t| t.elapsed().as_secs_f64());
    Ok((rate, shape))
}

/// The torchvision baselines' JSON line, or why they did not run.
fn baselines(files: &Path, a: &Args) -> Result<String, String> {
    let python = repo().join(".venv-peers/bin/python");
    if !python.exists() {
        return Err("no .venv-peers (scripts/setup.sh bench)".into());
    }
    let out = Command::new(python)
        .arg(repo().join("benches/augment/torchvision_baseline.py"))
        .args([files.to_str().unwrap_or("."), &a.workers.to_string(), &a.batch.to_string()])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    String::from_utf8_lossy(&out.stdout).lines().last().map(str::to_owned).ok_or_else(|| "no output".into())
}

fn field(json: &str, key: &str) -> Option<f64> {
    json.split(&format!("\"{key}\": ")).nth(1)?.split([',', '}']).next()?.trim().parse().ok()
}

fn main() -> Res<()> {
    let a = args()?;
    let tmp = tempfile::tempdir()?;
    let root = a.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let t = Instant::now();
    let (files, enc, dec, real) = build(&root, a.images)?;
    println!(
        "{} {} images (shorter side {SHORTER}, JPEG q{QUALITY}) written in {:.1} s",
        a.images,
        if real { "photo" } else { "synthetic" },
        t.elapsed().as_secs_f64()
    );
    let (plain, _) = rate(&dec, &a, false)?;
    let (r_dec, shape) = rate(&dec, &a, true)?;
    let (r_enc, _) = rate(&enc, &a, true)?;
    println!(
        "loader, {} workers, batch {}, global shuffle; RandomResizedCrop(224) + flip + normalise f16 CHW:",
        a.workers, a.batch
    );
    println!("  decoded column {r_dec:.0} img/s ({:.0} per worker), batch {shape:?}", r_dec / a.workers as f64);
    println!("  encoded column {r_enc:.0} img/s");
    println!("  decoded column, no transforms (padded ragged batch): {plain:.0} img/s");
    let base = if a.baselines { baselines(&files, &a) } else { Err("--no-baselines".into()) };
    let (tv_pil, tv_arr, grain, psnr) = match &base {
        Ok(line) => {
            println!("torchvision baselines: {line}");
            let f = |k| field(line, k);
            (f("pil_jpeg_img_s"), f("decoded_arrays_img_s"), f("grain_arrays_img_s"), f("resize_psnr_db"))
        }
        Err(e) => {
            println!("torchvision baselines skipped: {e}");
            (None, None, None, None)
        }
    };
    let ratio = |x: f64, y: Option<f64>| y.map_or("null".to_owned(), |y| format!("{:.2}", x / y));
    let opt = |v: Option<f64>| v.map_or("null".to_owned(), |v| format!("{v:.1}"));
    println!(
        "{{\"summary\": {{\"images\": {}, \"photos\": {real}, \"workers\": {}, \"batch\": {}, \"tessera_decoded_img_s\": {r_dec:.1}, \
         \"tessera_decoded_img_s_per_worker\": {:.1}, \"tessera_encoded_img_s\": {r_enc:.1}, \"tessera_plain_img_s\": {plain:.1}, \
         \"torchvision_pil_img_s\": {}, \"torchvision_arrays_img_s\": {}, \"grain_arrays_img_s\": {}, \
         \"decoded_vs_torchvision_arrays\": {}, \"encoded_vs_torchvision_pil\": {}, \"resize_psnr_db\": {}}}}}",
        a.images,
        a.workers,
        a.batch,
        r_dec / a.workers as f64,
        opt(tv_pil),
        opt(tv_arr),
        opt(grain),
        ratio(r_dec, tv_arr),
        ratio(r_enc, tv_pil),
        opt(psnr),
    );
    Ok(())
}
