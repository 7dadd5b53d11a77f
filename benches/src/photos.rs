//! Real photographs as mm224 source pictures, for the benchmarks where pixel statistics matter
//! (how well image pages compress, how fast they decompress).
//!
//! The photos are the colour pictures scikit-image ships in its wheel (the peers' workload in
//! `benches/peers/workload.py` uses the same ones), found in the peers' virtualenv
//! (`scripts/setup.d/50-peers.sh`) or in the folder `TESSERA_PHOTOS` names. Each is cut to its
//! centre square and resized (bilinear) to [`crate::mm224::SOURCE`] pixels a side; the mm224 generator
//! then takes random 224×224 crops of them.

use std::path::{Path, PathBuf};

use crate::mm224::SOURCE;

/// The colour photographs in scikit-image's `skimage/data/`.
pub const PHOTOS: [&str; 9] = [
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

/// The folder holding [`PHOTOS`]: `TESSERA_PHOTOS`, else scikit-image's data folder in
/// `.venv-peers` (relative to the working directory, the repository root).
#[must_use]
pub fn photo_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("TESSERA_PHOTOS") {
        return Some(PathBuf::from(dir));
    }
    let lib = Path::new(".venv-peers/lib");
    std::fs::read_dir(lib).ok()?.filter_map(Result::ok).find_map(|e| {
        let data = e.path().join("site-packages/skimage/data");
        data.join(PHOTOS[0]).is_file().then_some(data)
    })
}

/// The photos as `SOURCE`×`SOURCE`×3 RGB pictures, or `None` when they are not installed.
///
/// # Errors
/// A photo that exists but does not decode.
pub fn real_pictures() -> Result<Option<Vec<Vec<u8>>>, image::ImageError> {
    let Some(dir) = photo_dir() else { return Ok(None) };
    let side = SOURCE as u32;
    let mut out = Vec::with_capacity(PHOTOS.len());
    for name in PHOTOS {
        let rgb = image::open(dir.join(name))?.to_rgb8();
        let short = rgb.width().min(rgb.height());
        let (x, y) = ((rgb.width() - short) / 2, (rgb.height() - short) / 2);
        let square = image::imageops::crop_imm(&rgb, x, y, short, short).to_image();
        let resized = image::imageops::resize(&square, side, side, image::imageops::FilterType::Triangle);
        out.push(resized.into_raw());
    }
    Ok(Some(out))
}
