//! Page decode and CRC-32: the CPU cost per byte of every verified read.
//!
//! A loader that reads a sample fetches the sample's page, checks the page's CRC-32 and decodes
//! it into the batch buffer with [`tessera::datafile::decode_block_into`] (the path the
//! reference's own `DataFile::decode` and `tessera-loader` both take). That is all the CPU work
//! a read does per byte, so these numbers bound a loader's throughput per core.
//!
//! The page is realistic: 256 KiB (the writers' default page size, `[DF-20]`) of four 128×128
//! RGBA images of synthetic "photo" pixels (smooth gradients, sensor noise, textured patches and
//! flat letterbox bands), encoded by the reference writer (`DataFileWriter`) with each codec.
//! Throughput is in decoded bytes.
//!
//! Groups:
//! * `page_decode/{none,lz4,zstd-3}`: `decode_block_into` with the CRC check (the default);
//! * `page_decode_no_crc/{none,lz4,zstd-3}`: the same with `verify_checksums` off;
//! * `crc32/256KiB`: `crc32fast::hash` alone, the check every block read runs.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_main};
use tessera::datafile::{Block, DataFileWriter, decode_block_into};
use tessera::{Column, ColumnData, Compression, DType, Dim, ImageLayout, Kind, Schema};

/// Image height, width and channels (RGBA, so four images fill a 256 KiB page exactly).
const IMAGE: [u64; 3] = [128, 128, 4];
/// The page size writers aim at by default.
const PAGE_BYTES: u64 = tessera::datafile::DEFAULT_PAGE_BYTES;

/// Deterministic image-like pixels for `images` images of shape [`IMAGE`].
fn photo_pixels(images: u64) -> Vec<u8> {
    let [h, w, c] = IMAGE;
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut rand = move || {
        // xorshift64: cheap, deterministic noise.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out = Vec::with_capacity((images * h * w * c) as usize);
    for img in 0..images {
        for y in 0..h {
            for x in 0..w {
                let letterbox = y < h / 8 || y >= h - h / 8; // flat black bands
                let textured = ((x / 16) + (y / 16) + img) % 3 == 0; // foliage-like patches
                for ch in 0..c {
                    let v = if ch == 3 {
                        255 // opaque alpha
                    } else if letterbox {
                        0
                    } else {
                        let gradient = (x * (ch + 1) + y * (3 - ch) + img * 40) / 2;
                        let amplitude = if textured { 48 } else { 6 };
                        let noise = rand() % amplitude;
                        (gradient + noise) % 256
                    };
                    out.push(v as u8);
                }
            }
        }
    }
    out
}

/// One page of `pixels` as the reference writer stores it with `compression`: its block and
/// stored bytes.
fn encode_page(compression: Compression, pixels: &[u8]) -> (Block, Vec<u8>) {
    let dims: Vec<Dim> = IMAGE.iter().map(|&d| Dim::Fixed(d)).collect();
    let column = Column::new("image", DType::U8, &dims)
        .with_kind(Kind::Image { layout: ImageLayout::Hwc })
        .with_compression(compression);
    let schema = Schema::new([column]).expect("image schema is valid");
    let data = ColumnData::from_fixed(&IMAGE, pixels).expect("pixels are whole images");
    let file =
        DataFileWriter::with_page_bytes(PAGE_BYTES).encode(&[&schema.columns[0]], &[&data]).expect("data file encodes");
    let chunk = &file.footer.columns[0];
    assert_eq!(chunk.pages.len(), 1, "the pixels fill exactly one page");
    let block = chunk.pages[0].block;
    assert_eq!(block.raw_len, PAGE_BYTES, "the page holds 256 KiB");
    assert_eq!(block.codec, compression.codec(), "the codec shrinks the page, so the writer keeps it");
    let range = block.offset as usize..(block.offset + block.stored_len) as usize;
    (block, file.bytes[range].to_vec())
}

fn what() -> String {
    "bench page".to_string()
}

fn page_decode(c: &mut Criterion) {
    let pixels = photo_pixels(PAGE_BYTES / IMAGE.iter().product::<u64>());
    let codecs = [("none", Compression::None), ("lz4", Compression::Lz4), ("zstd-3", Compression::Zstd { level: 3 })];
    let pages: Vec<_> = codecs
        .iter()
        .map(|&(name, compression)| {
            let (block, stored) = encode_page(compression, &pixels);
            let mut out = vec![0u8; PAGE_BYTES as usize];
            decode_block_into(&block, &stored, &mut out, true, &what).expect("the page decodes");
            assert!(out == pixels, "{name}: the page decodes to its pixels");
            eprintln!(
                "page_decode: {name}: {} stored bytes for {} raw (ratio {:.3})",
                block.stored_len,
                block.raw_len,
                block.stored_len as f64 / block.raw_len as f64
            );
            (name, block, stored)
        })
        .collect();
    let mut out = vec![0u8; PAGE_BYTES as usize];
    for (group_name, verify_crc) in [("page_decode", true), ("page_decode_no_crc", false)] {
        let mut group = c.benchmark_group(group_name);
        group.throughput(Throughput::Bytes(PAGE_BYTES));
        for (name, block, stored) in &pages {
            group.bench_function(*name, |b| {
                b.iter(|| decode_block_into(block, black_box(stored), &mut out, verify_crc, &what));
            });
        }
        group.finish();
    }
}

fn crc32(c: &mut Criterion) {
    let pixels = photo_pixels(PAGE_BYTES / IMAGE.iter().product::<u64>());
    let mut group = c.benchmark_group("crc32");
    group.throughput(Throughput::Bytes(pixels.len() as u64));
    group.bench_function("256KiB", |b| b.iter(|| crc32fast::hash(black_box(&pixels))));
    group.finish();
}

/// Runs this file's groups with a short default configuration (a few seconds per benchmark);
/// command-line options (`--quick`, `--measurement-time`, a name filter) override it.
fn benches() {
    let mut c = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    page_decode(&mut c);
    crc32(&mut c);
}

criterion_main!(benches);
