//! `tessera ingest`: the command's arguments, mapped onto the `tessera-ingest` crate (which
//! decodes, assembles, writes and commits), a progress bar, and the summary.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser as _};
use tessera::{Compression, DType};
use tessera_ingest::{ColumnEdits, Filter, Format, IngestOptions, IngestReport, Observer, RaggedSpec, Sampling, Total};

use super::{Ctx, DatasetArg, emit, emit_json, fmt_bytes, parse_size};
use crate::error::{CliError, CliResult, Exit};
use crate::progress::{self, Progress, visible};

/// Arguments of `tessera ingest`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = INGEST_HELP)]
pub(crate) struct Args {
    #[command(flatten)]
    ds: DatasetArg,
    /// Inputs: an image-folder root; .tar shards or a folder of them; .npy/.npz files or a
    /// folder of them; .jsonl files; audio or video files or a folder of them; Parquet or
    /// Arrow IPC files or a folder of them.
    #[arg(value_name = "INPUT")]
    inputs: Vec<String>,
    /// Input format; `auto` decides by file extensions and folder layout.
    #[arg(long, default_value = "auto", value_parser = format_parser())]
    format: Format,
    /// Resize images (shorter side) and center-crop to N×N or H×W (e.g. 224, 224x160). Without
    /// it images keep their native size in a ragged [?, ?, C] column.
    #[arg(long, value_name = "N|HxW")]
    size: Option<String>,
    /// Resampling filter for --size.
    #[arg(long, default_value = "triangle", value_parser = filter_parser())]
    filter: Filter,
    /// Channels images are converted to: 1 (gray), 3 (RGB) or 4 (RGBA).
    #[arg(long, default_value_t = 3)]
    channels: u8,
    /// Store image columns as their JPEG, PNG or WebP files, byte for byte (compression
    /// `encoded`: lossy or lossless as the files are, decoded by readers and loaders). Images
    /// resized by --size, or whose channels differ from --channels, are stored decoded.
    #[arg(long)]
    keep_encoded: bool,
    /// Also store each image's original file bytes in an extra `bytes` column
    /// `<image column>_original`.
    #[arg(long)]
    keep_original: bool,
    /// Per-column compression, COL=CODEC with CODEC none, lz4, zstd, zstd:LEVEL or encoded (image
    /// files as they are, see --keep-encoded); `*` sets the default for unnamed columns.
    /// Repeatable or comma-separated. New datasets only. Default: zstd:3 for text and JSON,
    /// none for the rest (decoded pixels of photos barely compress; lz4 would cost the loader
    /// more than it saves).
    #[arg(long, value_name = "COL=CODEC", value_delimiter = ',')]
    compress: Vec<String>,
    /// Dims that vary between samples: `COL=?,4` (`?` varies, a number is fixed), or a bare
    /// `COL` for every dim. Without it, ingest infers them from the first samples it reads.
    /// Repeatable; `img=?,?,3,boxes=?,4` also works.
    #[arg(long, value_name = "COL[=DIMS]")]
    ragged: Vec<String>,
    /// Store an input field under another name, OLD=NEW (e.g. img=image). Repeatable or
    /// comma-separated.
    #[arg(long, value_name = "OLD=NEW", value_delimiter = ',')]
    rename: Vec<String>,
    /// The kind of a column (by its new name), COL=KIND with KIND image[:hwc|chw|hw], text, json,
    /// embedding[:cosine|dot|l2], tokens[:VOCAB], bbox[:xyxy|xywh|cxcywh], mask, audio:RATE,
    /// video[:FPS] or generic. Repeatable or comma-separated.
    #[arg(long, value_name = "COL=KIND", value_delimiter = ',')]
    kind: Vec<String>,
    /// Commit message.
    #[arg(short, long)]
    message: Option<String>,
    /// Append to this branch (must exist) instead of main.
    #[arg(long, value_name = "BRANCH")]
    branch: Option<String>,
    /// Skip corrupt inputs (listed in the summary) instead of stopping the ingest. A value
    /// whose shape does not fit its column still stops it (exit 2, with the --ragged to use).
    #[arg(long)]
    skip_bad: bool,
    /// Decoding threads (default: the number of CPUs).
    #[arg(short, long)]
    jobs: Option<usize>,
    /// Target raw size of one data file (e.g. 64M, 512K).
    #[arg(long, default_value = "64M", value_name = "SIZE")]
    file_size: String,
    /// How a new dataset indexes its fragments: `log` (readable by every 1.0 reader) or `tree`
    /// (bounded index nodes: opening costs the same at any size; SPEC.md §8.3). Given when
    /// appending, `tree` converts a log; a tree stays a tree.
    #[arg(long, value_name = "LAYOUT")]
    index: Option<String>,
    /// Name of the image column (image folders).
    #[arg(long, default_value = "image", value_name = "NAME")]
    image_column: String,
    /// Name of the label column (class folders of images, audio or video).
    #[arg(long, default_value = "label", value_name = "NAME")]
    label_column: String,
    #[command(flatten)]
    media: MediaArgs,
}

/// Audio and video decoding (folders of media files, WebDataset audio members).
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Audio and video")]
struct MediaArgs {
    /// Resample every audio clip to this rate in Hz (rubato's FFT resampler). Without it the
    /// first clip's rate is the column's, and a clip at another rate stops the ingest (exit 2).
    #[arg(long, value_name = "HZ")]
    sample_rate: Option<u32>,
    /// Downmix audio to one channel (the mean), stored as [samples] instead of [samples, channels].
    #[arg(long)]
    mono: bool,
    /// Audio sample type: f32 (full scale ±1.0) or i16.
    #[arg(long, value_enum, default_value = "f32")]
    audio_dtype: AudioDType,
    /// Keep every K-th video frame (frames 0, K, 2K, …); not with --fps.
    #[arg(long, value_name = "K", conflicts_with = "fps")]
    every: Option<u32>,
    /// Sample video frames at this rate (repeating or dropping frames), so every video of the
    /// column has one frame rate.
    #[arg(long, value_name = "FPS")]
    fps: Option<f64>,
    /// Keep at most N frames of each video (decoding stops there).
    #[arg(long, value_name = "N")]
    max_frames: Option<u32>,
}

/// Audio sample types.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum AudioDType {
    /// 32-bit float.
    F32,
    /// 16-bit signed integer.
    I16,
}

const INGEST_HELP: &str = "\
Examples:
  tessera ingest ./imagenet.tessera ./imagenet/train --size 224
  tessera ingest -d s3://bucket/ds shards/*.tar --skip-bad -m 'add shard batch 7'
  tessera ingest ./ds features.npz labels.npy
  tessera ingest ./captions captions.jsonl
  tessera ingest ./speech clips/ --sample-rate 16000 --mono
  tessera ingest ./videos videos/ --fps 4 --max-frames 16 --size 112

Columns: image folders give `image` (u8, kind image hwc; [H, W, C] with --size, else
[?, ?, C]) and `label` (i64, kind class_label with the sorted folder names). WebDataset fields
map by extension: jpg/jpeg/png/webp -> image tensor, npy -> tensor, cls -> i64, txt -> text,
json -> json, other -> bytes; `KEY.jpg` becomes column `image`, `KEY.seg.png` column `seg`.
NumPy arrays become one column each (first axis = rows); NAME.lengths.npy + NAME.values.npy
form a ragged column and NAME.valid.npy its null mask. JSON Lines fields become scalar or
text columns (first non-null value decides; int then float gives f64; nulls make a column
nullable). A tessera.schema.json next to the inputs (written by `tessera export`) restores
kinds, class names and dtypes.

Shapes: WebDataset, Parquet and Arrow columns are inferred from the first samples (up to 256,
or 64 MiB decoded): a dim that differs among them is stored ragged, a field some of them lack
is nullable. A later value whose shape does not fit stops the ingest with exit 2 and the
--ragged entry that fits it (`--ragged tokens=?`). --rename img=image --kind image=image
renames and types columns.

Audio and video files (or folders of them) give `audio` (f32 or i16, kind audio with the
sample rate; [?, C], or [?] with --mono) or `video` (u8, kind video with the frame rate;
[?, H, W, 3] with --size, else [?, ?, ?, 3]) and `path` (text); class folders of them
(ROOT/yes/*.wav, ROOT/no/*.wav) add `label` as image folders do. One column has one sample or
frame rate: --sample-rate and --fps make every clip fit. WebDataset members wav, flac, mp3,
ogg and m4a decode as audio (column `audio`), mp4, mkv and webm as video (column `video`).

An existing dataset gets a new version appended (the inputs must have its columns; image
folder classes are mapped to its class names by name); a missing one is created. A corrupt
input stops the ingest before anything is committed (exit 1, its path on stderr), unless
--skip-bad; a schema question (a shape that does not fit, an unknown column) exits 2. A
dataset this ingest created is removed again when it fails; data files written for an append
stay unreferenced until garbage-collected. Creating a dataset commits an empty version 1
first; the data is version 2.";

/// `--format`: the ingest crate's formats, by name, with their descriptions in `--help`.
fn format_parser() -> impl clap::builder::TypedValueParser<Value = Format> {
    let values = Format::ALL.map(|f| PossibleValue::new(f.name()).help(f.description()));
    // Only the names above pass the parser, and each parses back to its format.
    PossibleValuesParser::new(values).map(|s| s.parse().unwrap_or_default())
}

/// `--filter`: the ingest crate's resampling filters, by name.
fn filter_parser() -> impl clap::builder::TypedValueParser<Value = Filter> {
    let values = Filter::ALL.map(|(f, name)| PossibleValue::new(name).help(f.description()));
    PossibleValuesParser::new(values).map(|s| s.parse().unwrap_or_default())
}

/// Parses `224` or `224x160` (height x width); the sides' range is the ingest's own check.
fn parse_image_size(s: &str) -> CliResult<(u32, u32)> {
    let bad = || CliError::usage(format!("bad --size {s:?} (use N or HxW, e.g. 224 or 224x160)"));
    let (h, w) = if let Some((h, w)) = s.split_once(['x', 'X']) {
        (h.trim().parse::<u32>().map_err(|_| bad())?, w.trim().parse::<u32>().map_err(|_| bad())?)
    } else {
        let n = s.trim().parse::<u32>().map_err(|_| bad())?;
        (n, n)
    };
    Ok((h, w))
}

/// Parses the `--compress` entries into (column or `*`, compression).
fn parse_compress(entries: &[String]) -> CliResult<Vec<(String, Compression)>> {
    entries
        .iter()
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let (col, codec) = e
                .split_once('=')
                .ok_or_else(|| CliError::usage(format!("bad --compress {e:?} (use COL=CODEC, e.g. image=lz4)")))?;
            let codec = codec.trim().parse().map_err(|e: tessera::ParseWordError| CliError::usage(e.to_string()))?;
            Ok((col.trim().to_string(), codec))
        })
        .collect()
}

/// The dataset (the first positional, or `--dataset` when every positional is an input);
/// leaves the inputs in `args.inputs`.
///
/// # Errors
/// Usage error without a dataset or without inputs.
fn dataset_and_inputs(args: &mut Args) -> CliResult<String> {
    // The dataset first; with --dataset every positional is an input.
    let location = match args.ds.dataset.clone() {
        Some(d) => {
            if let Some(first) = args.ds.location.take() {
                args.inputs.insert(0, first);
            }
            d
        }
        None => args
            .ds
            .location
            .take()
            .ok_or_else(|| CliError::usage("no dataset given: tessera ingest DATASET INPUT..."))?,
    };
    if args.inputs.is_empty() {
        return Err(CliError::usage("no inputs given: tessera ingest DATASET INPUT..."));
    }
    Ok(location)
}

/// Runs `tessera ingest`.
///
/// # Errors
/// See the exit codes in `tessera --help`.
pub(crate) fn run(ctx: Ctx, mut args: Args) -> CliResult<Exit> {
    let location = dataset_and_inputs(&mut args)?;
    let inputs: Vec<PathBuf> = args.inputs.iter().map(PathBuf::from).collect();
    let options = options(&args)?;
    let mut bar = Bar { ctx, progress: None };
    let report = tessera_ingest::ingest(&location, &inputs, &options, &mut bar)?;
    if let Some(p) = bar.progress.take() {
        p.finish();
    }
    if ctx.json {
        emit_json(&report.to_json());
    } else {
        emit(&summary(&report));
    }
    Ok(Exit::Ok)
}

/// The flags as ingest options (the ingest checks their ranges).
fn options(args: &Args) -> CliResult<IngestOptions> {
    let usage = CliError::usage;
    let m = &args.media;
    Ok(IngestOptions {
        format: args.format,
        size: args.size.as_deref().map(parse_image_size).transpose()?,
        filter: args.filter,
        channels: args.channels,
        keep_encoded: args.keep_encoded,
        keep_original: args.keep_original,
        image_column: args.image_column.clone(),
        label_column: args.label_column.clone(),
        sample_rate: m.sample_rate,
        mono: m.mono,
        audio_dtype: match m.audio_dtype {
            AudioDType::F32 => DType::F32,
            AudioDType::I16 => DType::I16,
        },
        sampling: match (m.fps, m.every) {
            (Some(f), _) => Sampling::Fps(f),
            (None, Some(k)) => Sampling::Every(k),
            (None, None) => Sampling::All,
        },
        max_frames: m.max_frames,
        compress: parse_compress(&args.compress)?,
        ragged: RaggedSpec::parse(&args.ragged).map_err(usage)?,
        columns: ColumnEdits::parse(&args.rename, &args.kind).map_err(usage)?,
        message: args.message.clone(),
        branch: args.branch.clone(),
        skip_bad: args.skip_bad,
        jobs: args.jobs,
        file_bytes: parse_size(&args.file_size).map_err(usage)?,
        index: args.index.as_deref().map(str::parse::<tessera::IndexLayout>).transpose().map_err(CliError::from)?,
    })
}

/// The progress bar, drawn once the ingest knows its total.
struct Bar {
    ctx: Ctx,
    progress: Option<Progress>,
}

impl Observer for Bar {
    fn start(&mut self, total: Total) {
        let total = match total {
            Total::Count(n, unit) => progress::Total::Count(n, unit),
            Total::Bytes(n) => progress::Total::Bytes(n),
        };
        self.progress = Some(Progress::new("ingest", total, visible(self.ctx.quiet)));
    }

    fn advance(&mut self, units: u64, rows: u64, bytes: u64) {
        if let Some(p) = &mut self.progress {
            p.advance(units, rows, bytes);
        }
    }

    fn message(&mut self, line: &str) {
        match &self.progress {
            Some(p) => p.println(line),
            None => self.ctx.info(line),
        }
    }

    fn decoded(&mut self) {
        if let Some(p) = self.progress.take() {
            p.finish();
        }
    }
}

/// The human summary of an ingest.
fn summary(r: &IngestReport) -> String {
    let seconds = r.seconds;
    let mut s = format!(
        "ingested {} rows{} into {} as {}@{} ({}) in {seconds:.2} s\n",
        r.rows,
        if r.images > 0 { format!(" ({} images)", r.images) } else { String::new() },
        r.location,
        r.branch,
        r.version,
        if r.created { "new dataset" } else { "appended" },
    );
    let ratio = if r.bytes_stored > 0 { r.bytes_raw as f64 / r.bytes_stored as f64 } else { 0.0 };
    let _ = writeln!(
        s,
        "  bytes: raw {}, stored {} (ratio {ratio:.2}), input {}",
        fmt_bytes(r.bytes_raw),
        fmt_bytes(r.bytes_stored),
        fmt_bytes(r.bytes_input)
    );
    let _ = write!(s, "  rate: {:.0} rows/s", r.rows as f64 / seconds);
    if r.images > 0 {
        let _ = write!(s, ", {:.0} images/s", r.images as f64 / seconds);
    }
    let _ = writeln!(s, ", {:.1} MB/s input", r.bytes_input as f64 / seconds / 1e6);
    if r.ignored_files > 0 {
        let _ = writeln!(s, "  ignored {} files that are not {}", r.ignored_files, r.ignored_noun);
    }
    if !r.skipped.is_empty() {
        let _ = writeln!(s, "  skipped {} bad inputs:", r.skipped.len());
        for b in &r.skipped {
            let _ = writeln!(s, "    {}: {}", b.input, b.error);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_parsing() {
        assert_eq!(parse_image_size("224").unwrap(), (224, 224));
        assert_eq!(parse_image_size("224x160").unwrap(), (224, 160));
        assert!(parse_image_size("big").is_err());
        assert!(parse_compress(&["image=zstd:99".into()]).is_err());
        assert_eq!(parse_compress(&["t = zstd:7".into()]).unwrap(), vec![("t".into(), Compression::Zstd { level: 7 })]);
        let c = parse_compress(&["image=lz4".into(), "*=none".into()]).unwrap();
        assert_eq!(c, vec![("image".into(), Compression::Lz4), ("*".into(), Compression::None)]);
        assert!(parse_compress(&["image".into()]).is_err());
    }
}
