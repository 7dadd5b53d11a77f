//! The varshape workload: variable-shape multimodal samples, where every modality but the
//! label has a size of its own per row (issue 11's "variable-shape columns at line rate").
//!
//! | column | dtype | shape | content |
//! |---|---|---|---|
//! | `image` | u8 | `[96..=512, 96..=512, 3]` ragged | a crop of a photo-like picture (`mm224::picture`) |
//! | `audio` | f32 | `[8_000..=160_000]` ragged | 0.5–10 s of 16 kHz tones and noise |
//! | `caption` | utf8 | text | 20–200 bytes of words |
//! | `boxes` | f32 | `[0..=20, 4]` ragged | normalised boxes |
//! | `label` | i64 | `[]` | class 0..1000 |
//!
//! About 620 KB per row on average; sizes are drawn independently and uniformly, so a batch's
//! largest row is several times its average one (what makes padding expensive).

use std::path::Path;
use std::time::Instant;

use tessera::{Batch, Column, ColumnData, Compression, DType, Dataset, Dim, ImageLayout, Kind, Schema, WriteOptions};

use crate::mm224::{Rng, SOURCE, picture};

/// Rows of the standard varshape workload.
pub const ROWS: usize = 2_000;
/// Audio sample rate.
pub const SAMPLE_RATE: u32 = 16_000;

/// The varshape schema, every column but `label` compressed with `codec`.
///
/// # Panics
/// Never: the schema is valid by construction.
#[must_use]
pub fn schema(codec: Compression) -> Schema {
    Schema::new([
        Column::new("image", DType::U8, &[Dim::Ragged, Dim::Ragged, Dim::Fixed(3)])
            .with_kind(Kind::Image { layout: ImageLayout::Hwc })
            .with_compression(codec),
        Column::new("audio", DType::F32, &[Dim::Ragged])
            .with_kind(Kind::Audio { sample_rate: SAMPLE_RATE })
            .with_compression(codec),
        Column::new("caption", DType::Utf8, &[]).with_kind(Kind::Text).with_compression(codec),
        Column::new("boxes", DType::F32, &[Dim::Ragged, Dim::Fixed(4)]).with_compression(codec),
        Column::new("label", DType::I64, &[]),
    ])
    .expect("varshape schema is valid")
}

const WORDS: [&str; 16] = [
    "a", "dog", "runs", "across", "the", "snowy", "field", "while", "two", "children", "watch", "from", "red", "house",
    "under", "clouds",
];

/// One row's values: image (side, side, bytes), audio, caption, boxes, label.
struct Row {
    hw: (u64, u64),
    image: Vec<u8>,
    audio: Vec<f32>,
    caption: String,
    boxes: Vec<f32>,
    label: i64,
}

fn row(rng: &mut Rng, pictures: &[Vec<u8>]) -> Row {
    let (h, w) = (96 + rng.below(417) as usize, 96 + rng.below(417) as usize);
    let pic = &pictures[rng.below(pictures.len() as u64) as usize];
    let (oy, ox) = (rng.below((SOURCE - h + 1) as u64) as usize, rng.below((SOURCE - w + 1) as u64) as usize);
    let mut image = Vec::with_capacity(h * w * 3);
    for y in 0..h {
        let at = ((oy + y) * SOURCE + ox) * 3;
        image.extend_from_slice(&pic[at..at + w * 3]);
    }
    let samples = 8_000 + rng.below(152_001) as usize;
    let (f1, f2) = (100.0 + rng.unit() * 900.0, 100.0 + rng.unit() * 2_000.0);
    let step = std::f32::consts::TAU / SAMPLE_RATE as f32;
    let audio = (0..samples)
        .map(|i| {
            let t = i as f32 * step;
            0.4 * (f1 * t).sin() + 0.2 * (f2 * t).sin() + 0.05 * (rng.unit() - 0.5)
        })
        .collect();
    let target = 20 + rng.below(181) as usize;
    let mut caption = String::with_capacity(target + 10);
    while caption.len() < target {
        if !caption.is_empty() {
            caption.push(' ');
        }
        caption.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
    }
    caption.truncate(target);
    let boxes = (0..rng.below(21) * 4).map(|_| rng.unit()).collect();
    Row { hw: (h as u64, w as u64), image, audio, caption, boxes, label: rng.below(1000) as i64 }
}

/// Writes the workload (`rows` samples, columns compressed with `codec`) to `dir`, replacing
/// what is there. The rows are the same for every codec.
///
/// # Errors
/// Storage errors.
pub fn generate(dir: &Path, rows: usize, codec: Compression) -> tessera::Result<Dataset> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .map_err(|e| tessera::Error::Usage(format!("cannot clear {}: {e}", dir.display())))?;
    }
    let loc = dir.to_str().ok_or_else(|| tessera::Error::Usage("non-UTF-8 path".into()))?;
    let ds = Dataset::create(loc, schema(codec), &WriteOptions::default())?;
    let pictures: Vec<Vec<u8>> = (0..8).map(picture).collect();
    let mut writer = ds.writer(WriteOptions::default());
    let mut rng = Rng::new(7);
    let t = Instant::now();
    let chunk = 64;
    let sch = schema(codec);
    let col = |name: &str| {
        sch.column(name).map(ColumnData::for_column).ok_or_else(|| tessera::Error::Usage(format!("no column {name}")))
    };
    for start in (0..rows).step_by(chunk) {
        let n = chunk.min(rows - start);
        let (mut image, mut audio, mut caption, mut boxes) =
            (col("image")?, col("audio")?, col("caption")?, col("boxes")?);
        let mut labels = Vec::with_capacity(n);
        for _ in 0..n {
            let r = row(&mut rng, &pictures);
            image.push_row(&[r.hw.0, r.hw.1, 3], &r.image)?;
            let audio_bytes: Vec<u8> = r.audio.iter().flat_map(|x| x.to_le_bytes()).collect();
            audio.push_row(&[r.audio.len() as u64], &audio_bytes)?;
            caption.push_row(&[r.caption.len() as u64], r.caption.as_bytes())?;
            let box_bytes: Vec<u8> = r.boxes.iter().flat_map(|x| x.to_le_bytes()).collect();
            boxes.push_row(&[r.boxes.len() as u64 / 4, 4], &box_bytes)?;
            labels.push(r.label);
        }
        let batch = Batch::new()
            .with("image", image)?
            .with("audio", audio)?
            .with("caption", caption)?
            .with("boxes", boxes)?
            .with("label", ColumnData::from_scalars(&labels))?;
        writer.append(&batch)?;
    }
    let ds = writer.commit("varshape")?;
    eprintln!("generated {rows} varshape rows ({codec:?}) in {:.1} s", t.elapsed().as_secs_f64());
    Ok(ds)
}
