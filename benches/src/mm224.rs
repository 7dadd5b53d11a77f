//! The mm224 workload: multimodal samples of about 153 KB, as the loader benchmark and the
//! peer comparisons use them.
//!
//! | column | dtype | shape | content |
//! |---|---|---|---|
//! | `image` | u8 | `[224, 224, 3]` | a random 224×224 crop of a deterministic, photo-like 512×512 picture |
//! | `label` | i64 | `[]` | class 0..100 |
//! | `tokens` | i32 | `[16..=256]` ragged | token ids |
//! | `embedding` | f32 | `[512]` | unit vector |
//!
//! The pictures are generated (smooth gradients, blobs, texture and sensor noise) rather than
//! shipped, so the workload needs no download and compresses about as badly as photographs do.

use std::path::Path;
use std::time::Instant;

use tessera::{
    Batch, Column, ColumnData, Compression, DType, Dataset, Dim, ImageLayout, Kind, Metric, Schema, WriteOptions,
};

/// Rows of the standard workload.
pub const ROWS: usize = 10_000;
/// Side of the source pictures crops are taken from.
pub const SOURCE: usize = 512;
/// Side of a crop.
pub const SIDE: usize = 224;

/// A tiny deterministic generator (xorshift64*).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A float in `[0, 1)`.
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// A photo-like RGB picture, `SOURCE`×`SOURCE`×3.
#[must_use]
pub fn picture(seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let base: [f32; 3] = [rng.unit() * 200.0, rng.unit() * 200.0, rng.unit() * 200.0];
    let grad: [f32; 3] = [rng.unit() - 0.5, rng.unit() - 0.5, rng.unit() - 0.5];
    let blobs: Vec<(f32, f32, f32, [f32; 3])> = (0..12)
        .map(|_| {
            let (x, y, r) = (rng.unit() * SOURCE as f32, rng.unit() * SOURCE as f32, 20.0 + rng.unit() * 120.0);
            (x, y, r, [rng.unit() * 120.0 - 60.0, rng.unit() * 120.0 - 60.0, rng.unit() * 120.0 - 60.0])
        })
        .collect();
    let mut out = vec![0u8; SOURCE * SOURCE * 3];
    for y in 0..SOURCE {
        for x in 0..SOURCE {
            let (fx, fy) = (x as f32, y as f32);
            let texture = ((fx * 0.31).sin() * (fy * 0.17).cos()) * 8.0;
            for c in 0..3 {
                let mut v = base[c] + grad[c] * (fx + fy) * 0.25 + texture;
                for (bx, by, r, col) in &blobs {
                    let d2 = (fx - bx).powi(2) + (fy - by).powi(2);
                    if d2 < r * r {
                        v += col[c] * (1.0 - d2 / (r * r));
                    }
                }
                v += (rng.unit() - 0.5) * 24.0; // sensor noise: what makes photos incompressible
                out[(y * SOURCE + x) * 3 + c] = v.clamp(0.0, 255.0) as u8;
            }
        }
    }
    out
}

/// The mm224 schema with the given image compression.
///
/// # Panics
/// Never: the schema is valid by construction.
#[must_use]
pub fn schema(image_compression: Compression) -> Schema {
    Schema::new([
        Column::new("image", DType::U8, &[Dim::Fixed(SIDE as u64), Dim::Fixed(SIDE as u64), Dim::Fixed(3)])
            .with_kind(Kind::Image { layout: ImageLayout::Hwc })
            .with_compression(image_compression),
        Column::new("label", DType::I64, &[]),
        Column::new("tokens", DType::I32, &[Dim::Ragged]).with_kind(Kind::Tokens { vocab_size: Some(50_000) }),
        Column::new("embedding", DType::F32, &[Dim::Fixed(512)]).with_kind(Kind::Embedding { metric: Metric::Cosine }),
    ])
    .expect("mm224 schema is valid")
}

/// Writes the workload (`rows` samples) to `dir`, replacing what is there. Returns the dataset.
///
/// # Errors
/// Storage errors.
pub fn generate(dir: &Path, rows: usize, image_compression: Compression) -> tessera::Result<Dataset> {
    let pictures: Vec<Vec<u8>> = (0..16).map(picture).collect();
    generate_from(dir, rows, image_compression, &pictures)
}

/// [`generate`] with crops taken from the given `SOURCE`×`SOURCE`×3 pictures (real photos, in
/// the codec benchmark) instead of the generated ones.
///
/// # Errors
/// Storage errors; `usage` for no pictures or a picture of the wrong size.
pub fn generate_from(
    dir: &Path,
    rows: usize,
    image_compression: Compression,
    pictures: &[Vec<u8>],
) -> tessera::Result<Dataset> {
    if pictures.is_empty() || pictures.iter().any(|p| p.len() != SOURCE * SOURCE * 3) {
        return Err(tessera::Error::Usage(format!("mm224 needs {SOURCE}x{SOURCE}x3 source pictures")));
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .map_err(|e| tessera::Error::Usage(format!("cannot clear {}: {e}", dir.display())))?;
    }
    let loc = dir.to_str().ok_or_else(|| tessera::Error::Usage("non-UTF-8 path".into()))?;
    let ds = Dataset::create(loc, schema(image_compression), &WriteOptions::default())?;
    let mut writer = ds.writer(WriteOptions::default());
    let mut rng = Rng::new(42);
    let chunk = 256;
    let t = Instant::now();
    for start in (0..rows).step_by(chunk) {
        let n = chunk.min(rows - start);
        let mut images = Vec::with_capacity(n * SIDE * SIDE * 3);
        let mut labels = Vec::with_capacity(n);
        let mut tokens: Vec<Vec<i32>> = Vec::with_capacity(n);
        let mut emb = Vec::with_capacity(n * 512);
        for _ in 0..n {
            let pic = &pictures[rng.below(pictures.len() as u64) as usize];
            let (ox, oy) = (rng.below((SOURCE - SIDE) as u64) as usize, rng.below((SOURCE - SIDE) as u64) as usize);
            for y in 0..SIDE {
                let at = ((oy + y) * SOURCE + ox) * 3;
                images.extend_from_slice(&pic[at..at + SIDE * 3]);
            }
            labels.push(rng.below(100) as i64);
            let len = 16 + rng.below(241) as usize;
            tokens.push((0..len).map(|_| rng.below(50_000) as i32).collect());
            let v: Vec<f32> = (0..512).map(|_| rng.unit() - 0.5).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
            emb.extend(v.iter().map(|x| x / norm));
        }
        let token_rows: Vec<&[i32]> = tokens.iter().map(Vec::as_slice).collect();
        let batch = Batch::new()
            .with("image", ColumnData::from_fixed(&[SIDE as u64, SIDE as u64, 3], &images)?)?
            .with("label", ColumnData::from_scalars(&labels))?
            .with("tokens", ColumnData::from_sequences(&token_rows))?
            .with("embedding", ColumnData::from_fixed(&[512], &emb)?)?;
        writer.append(&batch)?;
    }
    let ds = writer.commit("mm224")?;
    eprintln!("generated {rows} mm224 rows in {:.1} s", t.elapsed().as_secs_f64());
    Ok(ds)
}

/// The raw read limit: reads every data file of `dir` with `read()` into one reused buffer,
/// `passes` times after a warm-up pass, and returns (bytes per pass, best seconds per pass).
///
/// # Errors
/// I/O errors.
pub fn raw_read(dir: &Path, passes: usize) -> std::io::Result<(u64, f64)> {
    use std::io::Read;
    let mut files: Vec<_> = std::fs::read_dir(dir.join("data"))?.filter_map(Result::ok).map(|e| e.path()).collect();
    files.sort();
    let mut buf = vec![0u8; 1 << 20];
    let mut best = f64::INFINITY;
    let mut bytes = 0;
    for pass in 0..=passes {
        let t = Instant::now();
        bytes = 0;
        for f in &files {
            let mut file = std::fs::File::open(f)?;
            loop {
                let n = file.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                bytes += n as u64;
            }
        }
        if pass > 0 {
            best = best.min(t.elapsed().as_secs_f64());
        }
    }
    Ok((bytes, best))
}
