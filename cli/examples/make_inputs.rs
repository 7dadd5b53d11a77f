//! Writes synthetic ingest inputs for throughput measurements: an image folder of JPEGs
//! (10 classes), the same images as WebDataset tar shards, and an embedding per image.
//!
//! ```text
//! cargo run --release -p tessera-cli --example make_inputs -- OUT [N] [SIDE] [SHARDS]
//! ```
//! writes `OUT/folder/class_K/img_NNNNNN.jpg` and `OUT/wds/shard-NNNN.tar` (`.jpg` + `.cls`),
//! N images (default 2000) of SIDE×SIDE pixels (default 256), JPEG quality 90, in SHARDS
//! shards (default 4). The pictures are smooth gradients with noise, so they compress about
//! like photographs (tens of KB each at 256×256). `OUT/emb/` holds `emb.npy` (f32 `[N, 16]`,
//! one vector per image: its class's direction plus features of its own) and `label.npy`
//! (i64 class); every 25th vector is a near-copy of the one before it (a near-duplicate for
//! the curation recipe).

use std::io::Write;
use std::path::PathBuf;

fn picture(side: u32, seed: u64) -> image::RgbImage {
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
    let mut noise = move || {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) % 24) as u8
    };
    let (a, b) = ((seed % 7 + 1) as u32, (seed % 5 + 2) as u32);
    image::RgbImage::from_fn(side, side, |x, y| {
        let r = ((x * a + y) % 256) as u8;
        let g = ((y * b + x / 2) % 256) as u8;
        let bl = (((x ^ y) + seed as u32) % 256) as u8;
        image::Rgb([r.saturating_add(noise()), g.saturating_add(noise()), bl.saturating_add(noise())])
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = PathBuf::from(args.first().ok_or("usage: make_inputs OUT [N] [SIDE] [SHARDS]")?);
    let n: u64 = args.get(1).map_or(Ok(2000), |s| s.parse())?;
    let side: u32 = args.get(2).map_or(Ok(256), |s| s.parse())?;
    let shards: u64 = args.get(3).map_or(Ok(4), |s| s.parse())?.max(1);
    let per_shard = n.div_ceil(shards);
    let mut total = 0usize;
    let mut tar: Option<tar::Builder<std::fs::File>> = None;
    std::fs::create_dir_all(out.join("wds"))?;
    for i in 0..n {
        let class = i % 10;
        let mut jpeg = Vec::new();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 90).encode_image(&picture(side, i))?;
        total += jpeg.len();
        let dir = out.join("folder").join(format!("class_{class}"));
        std::fs::create_dir_all(&dir)?;
        std::fs::File::create(dir.join(format!("img_{i:06}.jpg")))?.write_all(&jpeg)?;
        if i % per_shard == 0 {
            if let Some(t) = tar.take() {
                t.into_inner()?.sync_all()?;
            }
            let f = std::fs::File::create(out.join("wds").join(format!("shard-{:04}.tar", i / per_shard)))?;
            tar = Some(tar::Builder::new(f));
        }
        if let Some(t) = tar.as_mut() {
            for (ext, data) in [("jpg", jpeg.as_slice()), ("cls", class.to_string().as_bytes())] {
                let mut h = tar::Header::new_gnu();
                h.set_size(data.len() as u64);
                h.set_mode(0o644);
                h.set_entry_type(tar::EntryType::Regular);
                t.append_data(&mut h, format!("{i:06}.{ext}"), data)?;
            }
        }
    }
    if let Some(t) = tar.take() {
        t.into_inner()?.sync_all()?;
    }
    write_embeddings(&out.join("emb"), n)?;
    println!("wrote {n} JPEGs ({side}x{side}, {:.1} KB average) to {}", total as f64 / n as f64 / 1e3, out.display());
    Ok(())
}

/// Elements per embedding.
const EMB_DIM: usize = 16;

/// `dir/emb.npy` (f32 `[n, 16]`) and `dir/label.npy` (i64 `[n]`).
fn write_embeddings(dir: &std::path::Path, n: u64) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut emb: Vec<f32> = Vec::with_capacity(n as usize * EMB_DIM);
    for i in 0..n {
        if i % 25 == 24 {
            let prev: Vec<f32> = emb[emb.len() - EMB_DIM..].iter().map(|x| x + 1e-4).collect();
            emb.extend(prev);
            continue;
        }
        let class = (i % 10) as usize;
        emb.extend((0..EMB_DIM).map(|j| {
            let own = (i as f32 * 1.324_7 * (j + 1) as f32).cos() * 0.3;
            if j == class { 1.0 + own } else { own }
        }));
    }
    let labels: Vec<i64> = (0..n as i64).map(|i| i % 10).collect();
    npy(
        &dir.join("emb.npy"),
        "<f4",
        &format!("({n}, {EMB_DIM})"),
        &emb.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(),
    )?;
    npy(
        &dir.join("label.npy"),
        "<i8",
        &format!("({n},)"),
        &labels.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(),
    )
}

/// A version 1.0 `.npy` file: magic, header dict padded to 64 bytes, data.
fn npy(path: &std::path::Path, descr: &str, shape: &str, data: &[u8]) -> std::io::Result<()> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    f.write_all(b"\x93NUMPY\x01\x00")?;
    f.write_all(&(header.len() as u16).to_le_bytes())?;
    f.write_all(header.as_bytes())?;
    f.write_all(data)?;
    f.flush()
}
