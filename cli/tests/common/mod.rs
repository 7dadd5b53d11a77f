//! Helpers shared by the CLI tests: run the built binary, write small inputs.

#![allow(dead_code, clippy::missing_panics_doc, unreachable_pub)]

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use image::{ImageFormat, RgbImage};

/// Runs `tessera` with arguments.
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera")).args(args).output().expect("the tessera binary runs")
}

/// Runs `tessera`, asserts success, returns stdout.
pub fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "tessera {args:?} failed with {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("stdout is UTF-8")
}

/// Runs `tessera --json ...`, asserts success, parses stdout.
pub fn json(args: &[&str]) -> serde_json::Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let text = ok(&a);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("tessera {args:?} printed invalid JSON ({e}): {text}"))
}

/// The exit code and stderr of a failing run.
pub fn fails(args: &[&str]) -> (i32, String, String) {
    let out = run(args);
    assert!(!out.status.success(), "tessera {args:?} should fail");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A deterministic test picture.
pub fn picture(w: u32, h: u32, seed: u32) -> RgbImage {
    RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x * 13 + seed * 7) as u8, (y * 29 + seed * 3) as u8, ((x ^ y) * 5 + seed) as u8])
    })
}

/// PNG bytes of a picture.
pub fn png_bytes(img: &RgbImage) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, ImageFormat::Png).expect("PNG encodes");
    out.into_inner()
}

/// Lossless WebP bytes of a picture.
pub fn webp_bytes(img: &RgbImage) -> Vec<u8> {
    let mut out = Vec::new();
    image::codecs::webp::WebPEncoder::new_lossless(&mut out)
        .encode(img.as_raw(), img.width(), img.height(), image::ExtendedColorType::Rgb8)
        .expect("WebP encodes");
    out
}

/// JPEG bytes of a picture.
pub fn jpeg_bytes(img: &RgbImage) -> Vec<u8> {
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90).encode_image(img).expect("JPEG encodes");
    out
}

/// Writes an image folder: `classes` sub-folders with `per_class` images each, PNG, JPEG and
/// lossless WebP in turn, of varying sizes. Returns (path, class index) in the order ingest reads them
/// (class names sorted, then paths sorted).
pub fn image_folder(root: &Path, classes: &[&str], per_class: u32) -> Vec<(PathBuf, usize)> {
    let mut sorted: Vec<&str> = classes.to_vec();
    sorted.sort_unstable();
    let mut out = Vec::new();
    for (ci, class) in sorted.iter().enumerate() {
        let dir = root.join(class);
        std::fs::create_dir_all(&dir).unwrap();
        let mut files = Vec::new();
        for i in 0..per_class {
            let seed = ci as u32 * 100 + i;
            let img = picture(12 + i * 3 + ci as u32, 10 + i * 2, seed);
            let (name, bytes) = match i % 3 {
                0 => (format!("img{i}.png"), png_bytes(&img)),
                1 => (format!("img{i}.jpg"), jpeg_bytes(&img)),
                _ => (format!("img{i}.webp"), webp_bytes(&img)),
            };
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            files.push(p);
        }
        files.sort();
        out.extend(files.into_iter().map(|p| (p, ci)));
    }
    out
}

/// A `.npy` file's bytes, written by hand: version 1.0 header padded to 64 bytes.
pub fn npy(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
    let shape = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.extend_from_slice(data);
    out
}

/// Appends a file to a tar being built.
pub fn tar_add(b: &mut tar::Builder<Vec<u8>>, name: &str, data: &[u8]) {
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    b.append_data(&mut h, name, data).unwrap();
}

/// Path as &str.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Number of versions in main's history.
pub fn versions(ds: &Path) -> usize {
    json(&["log", s(ds)]).as_array().unwrap().len()
}

/// The canonical dump's schema and per-column digests, for round-trip comparisons.
pub fn digest(ds: &Path) -> (serde_json::Value, serde_json::Value) {
    let d = tessera::dump::dump(&tessera::Dataset::open(s(ds)).unwrap()).unwrap();
    let cols: serde_json::Map<String, serde_json::Value> =
        d["columns"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v["sha256"].clone())).collect();
    (d["schema"].clone(), serde_json::Value::Object(cols))
}

/// A mono 16-bit PCM WAV file.
pub fn wav(rate: u32, samples: &[i16]) -> Vec<u8> {
    let data: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
    let mut out = b"RIFF".to_vec();
    out.extend_from_slice(&(36 + data.len() as u32).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * 2).to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(&data);
    out
}
