//! Compressed image pages at speed: each codec's own single-core decode rate on mm224 image
//! pages, and the loader's rate per codec against `read()` of the uncompressed files, measured
//! in the same run (the `codecs` bench binary prints both; `loader_latency` reads
//! [`lz4_vs_none`] for its summary line).
//!
//! The images are crops of real photographs when they are installed ([`crate::photos`]):
//! sensor noise is what decides how well pixels compress, and generated pictures get it wrong.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tessera::datafile::{Block, decode_block_into};
use tessera::{Codec, Compression};
use tessera_loader_tch::throughput::{measure, raw_read_limit};
use tessera_loader_tch::{Loader, LoaderConfig, ShuffleMode};

use crate::mm224::{self, Rng, SIDE, SOURCE};
use crate::photos;

/// Boxed errors, as the bench binaries report them.
pub type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The image codecs compared: name and the column's compression.
pub const CODECS: [(&str, Compression); 4] = [
    ("none", Compression::None),
    ("lz4", Compression::Lz4),
    ("zstd-1", Compression::Zstd { level: 1 }),
    ("zstd-3", Compression::Zstd { level: 3 }),
];

/// The codecs the loader rows cover (zstd-1 decodes like zstd-3, see the decode rows).
pub const LOADER_CODECS: [&str; 3] = ["none", "lz4", "zstd-3"];

/// The source pictures: real photos when installed, else the generated ones; and which.
///
/// # Errors
/// A photo that exists but does not decode.
pub fn pictures() -> BenchResult<(Vec<Vec<u8>>, &'static str)> {
    Ok(match photos::real_pictures()? {
        Some(p) => (p, "real photos (scikit-image)"),
        None => ((0..16).map(mm224::picture).collect(), "generated pictures (real photos not installed)"),
    })
}

fn compression(codec: &str) -> BenchResult<Compression> {
    CODECS.iter().find(|(n, _)| *n == codec).map(|&(_, c)| c).ok_or_else(|| format!("no codec {codec}").into())
}

/// The mm224 dataset of `rows` rows with `codec` image pages under
/// `target/codec-mm224-<codec>-<rows>`, written on first use.
///
/// # Errors
/// Storage errors.
pub fn dataset(codec: &str, rows: usize, pictures: &[Vec<u8>]) -> BenchResult<PathBuf> {
    let dir = PathBuf::from(format!("target/codec-mm224-{codec}-{rows}"));
    let loc = dir.to_str().unwrap_or_default();
    if !tessera::Dataset::open(loc).is_ok_and(|d| d.row_count() == rows as u64) {
        mm224::generate_from(&dir, rows, compression(codec)?, pictures)?;
    }
    Ok(dir)
}

/// One codec's own decode rate on image pages.
#[derive(Clone, Debug)]
pub struct DecodeRate {
    /// Codec name.
    pub codec: &'static str,
    /// Stored bytes per raw byte (pages that do not shrink are stored raw, as writers do).
    pub ratio: f64,
    /// Share of pages stored with the codec (the rest did not shrink).
    pub compressed_pages: f64,
    /// Decoded MB/s on one core, decode only.
    pub decode_mb_s: f64,
    /// Decoded MB/s on one core with the CRC-32 check of the stored bytes (what a verified read
    /// costs).
    pub verified_mb_s: f64,
}

/// Random 224×224 crops of `pictures`, one page each (an mm224 image page holds one image).
#[must_use]
pub fn crops(pictures: &[Vec<u8>], n: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(7);
    (0..n)
        .map(|_| {
            let pic = &pictures[rng.below(pictures.len() as u64) as usize];
            let (ox, oy) = (rng.below((SOURCE - SIDE) as u64) as usize, rng.below((SOURCE - SIDE) as u64) as usize);
            let mut img = Vec::with_capacity(SIDE * SIDE * 3);
            for y in 0..SIDE {
                let at = ((oy + y) * SOURCE + ox) * 3;
                img.extend_from_slice(&pic[at..at + SIDE * 3]);
            }
            img
        })
        .collect()
}

/// Single-core decode rates of every codec on `pages` image pages, each timed for at least
/// `min_time`.
///
/// # Errors
/// A codec that fails to round-trip a page.
pub fn decode_rates(pictures: &[Vec<u8>], pages: usize, min_time: Duration) -> BenchResult<Vec<DecodeRate>> {
    let raw = crops(pictures, pages);
    let raw_bytes: usize = raw.iter().map(Vec::len).sum();
    let what = || "bench page".to_string();
    let mut out = Vec::new();
    for (name, compression) in CODECS {
        // As the writer stores them: a page that does not shrink is kept raw.
        let stored: Vec<(Block, Vec<u8>)> = raw
            .iter()
            .map(|r| {
                let mut s = tessera::codec::compress(compression, r)?;
                let mut codec = compression.codec();
                if codec != Codec::None && s.len() >= r.len() {
                    s.clone_from(r);
                    codec = Codec::None;
                }
                let block = Block {
                    offset: 0,
                    stored_len: s.len() as u64,
                    raw_len: r.len() as u64,
                    codec,
                    crc32: crc32fast::hash(&s),
                };
                Ok::<_, tessera::Error>((block, s))
            })
            .collect::<Result<_, _>>()?;
        let stored_bytes: usize = stored.iter().map(|(_, s)| s.len()).sum();
        let compressed = stored.iter().filter(|(b, _)| b.codec != Codec::None).count();
        let mut buf = vec![0u8; SIDE * SIDE * 3];
        for ((block, s), r) in stored.iter().zip(&raw) {
            decode_block_into(block, s, &mut buf, true, &what)?;
            if buf != *r {
                return Err(format!("{name}: a page does not round-trip").into());
            }
        }
        let mut rate = |verify: bool| -> BenchResult<f64> {
            let t = Instant::now();
            let mut passes = 0u64;
            while passes < 3 || t.elapsed() < min_time {
                for (block, s) in &stored {
                    decode_block_into(block, black_box(s), &mut buf, verify, &what)?;
                }
                black_box(&buf);
                passes += 1;
            }
            Ok(raw_bytes as f64 * passes as f64 / 1e6 / t.elapsed().as_secs_f64())
        };
        let decode_mb_s = rate(false)?;
        let verified_mb_s = rate(true)?;
        out.push(DecodeRate {
            codec: name,
            ratio: stored_bytes as f64 / raw_bytes as f64,
            compressed_pages: compressed as f64 / stored.len() as f64,
            decode_mb_s,
            verified_mb_s,
        });
    }
    Ok(out)
}

/// One loader row.
#[derive(Clone, Debug)]
pub struct LoaderRate {
    /// Codec name.
    pub codec: &'static str,
    /// Best samples/s over the repetitions.
    pub samples_per_sec: f64,
    /// Share of `read()` of the uncompressed data files, in the same run.
    pub of_read: f64,
    /// Bytes the loader read per epoch.
    pub bytes_per_epoch: u64,
}

/// The loader settings of the codec rows: batch 64, global shuffle, checksums on.
fn config(dir: &std::path::Path, workers: usize) -> LoaderConfig {
    LoaderConfig::new(dir.to_str().unwrap_or_default())
        .with_batch_size(64)
        .with_seed(1)
        .with_shuffle(ShuffleMode::Global)
        .with_workers(workers)
}

/// `read()` of the uncompressed files (samples/s), then the loader on each of
/// [`LOADER_CODECS`] (`epochs` timed epochs after one warm-up, `reps` times, interleaved; the
/// best of each is kept).
///
/// # Errors
/// Storage and loader errors.
pub fn loader_rates(
    rows: usize,
    epochs: u64,
    reps: usize,
    workers: usize,
    pictures: &[Vec<u8>],
) -> BenchResult<(f64, Vec<LoaderRate>)> {
    let dirs: Vec<(&'static str, PathBuf)> = LOADER_CODECS
        .iter()
        .map(|&c| Ok::<_, Box<dyn std::error::Error>>((c, dataset(c, rows, pictures)?)))
        .collect::<Result<_, _>>()?;
    let (_, secs) = raw_read_limit(&Loader::open(config(&dirs[0].1, workers))?, 3)?;
    let read_rate = rows as f64 / secs.as_secs_f64();
    let mut best: Vec<LoaderRate> = dirs
        .iter()
        .map(|(c, _)| LoaderRate { codec: c, samples_per_sec: 0.0, of_read: 0.0, bytes_per_epoch: 0 })
        .collect();
    for _ in 0..reps {
        for ((_, dir), row) in dirs.iter().zip(best.iter_mut()) {
            let loader = Loader::open(config(dir, workers))?;
            let t = measure(&loader, 1, epochs)?;
            if t.samples_per_sec() > row.samples_per_sec {
                row.samples_per_sec = t.samples_per_sec();
                row.of_read = t.samples_per_sec() / read_rate;
                row.bytes_per_epoch = t.storage_bytes / epochs.max(1);
            }
        }
    }
    Ok((read_rate, best))
}

/// The loader's rate on lz4 image pages over its rate on uncompressed ones (local files, real
/// photos when installed, 2 workers, global shuffle, checksums on; best of 2), for the
/// `lz4_vs_none` figure of `loader_latency --json`'s summary.
///
/// # Errors
/// As [`loader_rates`].
pub fn lz4_vs_none(rows: usize) -> BenchResult<f64> {
    let (pictures, _) = pictures()?;
    let (_, rates) = loader_rates(rows, 2, 2, 2, &pictures)?;
    let rate = |c: &str| rates.iter().find(|r| r.codec == c).map_or(0.0, |r| r.samples_per_sec);
    Ok(rate("lz4") / rate("none").max(f64::MIN_POSITIVE))
}
