//! Writes synthetic ingest inputs for throughput measurements: an image folder of JPEGs
//! (10 classes) and the same images as WebDataset tar shards.
//!
//! ```text
//! cargo run --release -p tessera-cli --example make_inputs -- OUT [N] [SIDE] [SHARDS]
//! ```
//! writes `OUT/folder/class_K/img_NNNNNN.jpg` and `OUT/wds/shard-NNNN.tar` (`.jpg` + `.cls`),
//! N images (default 2000) of SIDE×SIDE pixels (default 256), JPEG quality 90, in SHARDS
//! shards (default 4). The pictures are smooth gradients with noise, so they compress about
//! like photographs (tens of KB each at 256×256).

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
    println!("wrote {n} JPEGs ({side}x{side}, {:.1} KB average) to {}", total as f64 / n as f64 / 1e3, out.display());
    Ok(())
}
