//! `tessera ingest`: decode inputs once into typed columns and commit them as one new version.
//!
//! Pipeline: a producer thread walks the inputs in order (file lists, tar entries, array row
//! chunks, text lines) and sends work items over a bounded channel; `--jobs` worker threads
//! (`std::thread::scope`) decode them in parallel; the main thread puts results back in input
//! order, assembles column buffers and hands batches to the reference crate's
//! [`tessera::DatasetWriter`], which writes data files as they fill. The commit happens only
//! after every input was processed, so a failed ingest commits nothing.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use image::imageops::FilterType;
use tessera::cast::{Number, push_number};
use tessera::{
    Batch, Column, ColumnData, Compression, DType, Dataset, DatasetWriter, Dim, ImageLayout, Kind, Limits, Schema,
    Store, WriteOptions,
};

use super::{Ctx, DatasetArg, emit, emit_json, fmt_bytes, parse_size};
use crate::error::{CliError, CliResult, Exit};
use crate::input::audio::{AUDIO_EXTENSIONS, AudioOptions};
use crate::input::columns::{self, ColumnEdits, RaggedSpec};
use crate::input::imagefolder::{self, FolderColumns, ImageOptions, Media};
use crate::input::parquet::{self, ARROW_EXTENSIONS, PARQUET_EXTENSIONS};
use crate::input::video::{Sampling, VIDEO_EXTENSIONS, VideoOptions};
use crate::input::wds::{self, RawSample, WdsOptions};
use crate::input::{self, Bad, Decoded, InferOptions, Sample, Value, jsonl, media, npy};
use crate::progress::{Progress, Total, visible};

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
    #[arg(long, value_enum, default_value = "auto")]
    format: Format,
    /// Resize images (shorter side) and center-crop to N×N or H×W (e.g. 224, 224x160). Without
    /// it images keep their native size in a ragged [?, ?, C] column.
    #[arg(long, value_name = "N|HxW")]
    size: Option<String>,
    /// Resampling filter for --size.
    #[arg(long, value_enum, default_value = "triangle")]
    filter: Filter,
    /// Channels images are converted to: 1 (gray), 3 (RGB) or 4 (RGBA).
    #[arg(long, default_value_t = 3, value_parser = parse_channels)]
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
    #[arg(long, value_name = "HZ", value_parser = clap::value_parser!(u32).range(1..=768_000))]
    sample_rate: Option<u32>,
    /// Downmix audio to one channel (the mean), stored as [samples] instead of [samples, channels].
    #[arg(long)]
    mono: bool,
    /// Audio sample type: f32 (full scale ±1.0) or i16.
    #[arg(long, value_enum, default_value = "f32")]
    audio_dtype: AudioDType,
    /// Keep every K-th video frame (frames 0, K, 2K, …); not with --fps.
    #[arg(long, value_name = "K", conflicts_with = "fps", value_parser = clap::value_parser!(u32).range(1..))]
    every: Option<u32>,
    /// Sample video frames at this rate (repeating or dropping frames), so every video of the
    /// column has one frame rate.
    #[arg(long, value_name = "FPS", value_parser = parse_fps)]
    fps: Option<f64>,
    /// Keep at most N frames of each video (decoding stops there).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
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

fn parse_fps(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if f > 0.0 && f <= 1000.0 => Ok(f),
        _ => Err("the frame rate must be a number in (0, 1000]".into()),
    }
}

impl MediaArgs {
    /// The decoders' options; video frames are sized like images (`--size`, `--filter`).
    fn decode_options(&self, image: ImageOptions, keep_original: bool) -> WdsOptions {
        let dtype = match self.audio_dtype {
            AudioDType::F32 => DType::F32,
            AudioDType::I16 => DType::I16,
        };
        let sampling = match (self.fps, self.every) {
            (Some(f), _) => Sampling::Fps(f),
            (None, Some(k)) => Sampling::Every(k),
            (None, None) => Sampling::All,
        };
        WdsOptions {
            image,
            keep_original,
            audio: AudioOptions { sample_rate: self.sample_rate, mono: self.mono, dtype },
            video: VideoOptions { sampling, max_frames: self.max_frames, size: image.size, filter: image.filter },
        }
    }
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

/// Input formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
enum Format {
    /// Decide from the inputs.
    Auto,
    /// `ROOT/<class>/**/<image>`.
    Imagefolder,
    /// WebDataset .tar shards.
    Wds,
    /// NumPy .npy / .npz.
    Npy,
    /// JSON Lines.
    Jsonl,
    /// Parquet files (.parquet, .pq), e.g. a Hugging Face dataset's.
    Parquet,
    /// Arrow IPC files, file or stream format (.arrow, .arrows, .feather, .ipc).
    Arrow,
    /// Audio files (wav, flac, mp3, ogg, m4a) or folders of them.
    Audio,
    /// Video files (mp4, mkv, webm, mov, avi) or folders of them.
    Video,
}

/// Resampling filters.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Filter {
    /// Nearest neighbour.
    Nearest,
    /// Bilinear (antialiased when shrinking).
    Triangle,
    /// Bicubic.
    CatmullRom,
    /// Gaussian.
    Gaussian,
    /// Lanczos with window 3.
    Lanczos3,
}

impl Filter {
    fn image(self) -> FilterType {
        match self {
            Self::Nearest => FilterType::Nearest,
            Self::Triangle => FilterType::Triangle,
            Self::CatmullRom => FilterType::CatmullRom,
            Self::Gaussian => FilterType::Gaussian,
            Self::Lanczos3 => FilterType::Lanczos3,
        }
    }
}

fn parse_channels(s: &str) -> Result<u8, String> {
    match s {
        "1" => Ok(1),
        "3" => Ok(3),
        "4" => Ok(4),
        _ => Err("channels must be 1, 3 or 4".into()),
    }
}

/// Parses `224` or `224x160` (height x width).
fn parse_image_size(s: &str) -> CliResult<(u32, u32)> {
    let bad = || CliError::usage(format!("bad --size {s:?} (use N or HxW, e.g. 224 or 224x160)"));
    let (h, w) = if let Some((h, w)) = s.split_once(['x', 'X']) {
        (h.trim().parse::<u32>().map_err(|_| bad())?, w.trim().parse::<u32>().map_err(|_| bad())?)
    } else {
        let n = s.trim().parse::<u32>().map_err(|_| bad())?;
        (n, n)
    };
    if h == 0 || w == 0 || h > 65_535 || w > 65_535 {
        return Err(bad());
    }
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

/// A source, opened and ready to produce work.
enum Source {
    Folder(imagefolder::Folder),
    Wds(Vec<PathBuf>),
    Npy(npy::NpySource),
    Jsonl(jsonl::Plan),
    Table(parquet::TableSource),
    Audio(Vec<PathBuf>),
    Video(Vec<PathBuf>),
}

/// One unit of work for the decoders.
enum Work {
    /// A file of a class folder and its class index.
    Class(PathBuf, usize),
    Wds(RawSample),
    Lines(Vec<(String, String)>),
    Table(parquet::TableChunk),
    Audio(PathBuf),
    Video(PathBuf),
    Ready(Vec<Sample>),
    Bad(Bad),
}

/// What the decoder threads share.
struct Decoder {
    classes: Arc<[String]>,
    /// What a class folder's files are.
    media: Media,
    folder_columns: FolderColumns,
    wds: WdsOptions,
    jsonl: Option<jsonl::Plan>,
}

impl Decoder {
    fn decode(&self, work: Work) -> Vec<Decoded> {
        match work {
            Work::Class(path, class) => {
                let label = Some((self.folder_columns.label.as_str(), class, &self.classes));
                vec![match self.media {
                    Media::Image => {
                        imagefolder::decode_file(&path, class, &self.classes, &self.wds.image, &self.folder_columns)
                    }
                    Media::Audio => media::audio_sample(&path, &self.wds.audio, label),
                    Media::Video => media::video_sample(&path, &self.wds.video, label),
                }]
            }
            Work::Wds(raw) => vec![wds::decode_sample(raw, &self.wds)],
            Work::Lines(lines) => match &self.jsonl {
                Some(plan) => lines.into_iter().map(|(origin, l)| jsonl::decode_line(origin, &l, plan)).collect(),
                None => Vec::new(),
            },
            Work::Table(chunk) => parquet::decode_chunk(&chunk, &self.wds),
            Work::Audio(path) => vec![media::audio_sample(&path, &self.wds.audio, None)],
            Work::Video(path) => vec![media::video_sample(&path, &self.wds.video, None)],
            Work::Ready(samples) => samples.into_iter().map(Ok).collect(),
            Work::Bad(b) => vec![Err(b)],
        }
    }
}

/// Decides the format of the inputs.
fn detect(inputs: &[PathBuf]) -> CliResult<Format> {
    let mut kinds = HashSet::new();
    for p in inputs {
        if !p.exists() {
            return Err(CliError::not_found(format!("input {} does not exist", p.display())));
        }
        if p.is_dir() {
            let entries: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| CliError::io(p, &e))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .collect();
            let has =
                |exts: &[&str]| entries.iter().any(|e| e.is_file() && exts.contains(&input::extension(e).as_str()));
            if has(&["tar"]) {
                kinds.insert(Format::Wds);
            } else if has(&["npy", "npz"]) {
                kinds.insert(Format::Npy);
            } else if has(&["jsonl", "ndjson"]) {
                kinds.insert(Format::Jsonl);
            } else if has(&PARQUET_EXTENSIONS) {
                kinds.insert(Format::Parquet);
            } else if has(&ARROW_EXTENSIONS) {
                kinds.insert(Format::Arrow);
            } else if has(&AUDIO_EXTENSIONS) {
                kinds.insert(Format::Audio);
            } else if has(&VIDEO_EXTENSIONS) {
                kinds.insert(Format::Video);
            } else if entries.iter().any(|e| e.is_dir()) {
                kinds.insert(Format::Imagefolder);
            } else {
                return Err(CliError::usage(format!(
                    "cannot tell the format of folder {} (use --format)",
                    p.display()
                )));
            }
        } else {
            match input::extension(p).as_str() {
                "tar" => kinds.insert(Format::Wds),
                "npy" | "npz" => kinds.insert(Format::Npy),
                "jsonl" | "ndjson" => kinds.insert(Format::Jsonl),
                e if PARQUET_EXTENSIONS.contains(&e) => kinds.insert(Format::Parquet),
                e if ARROW_EXTENSIONS.contains(&e) => kinds.insert(Format::Arrow),
                e if AUDIO_EXTENSIONS.contains(&e) => kinds.insert(Format::Audio),
                e if VIDEO_EXTENSIONS.contains(&e) => kinds.insert(Format::Video),
                _ => return Err(CliError::usage(format!("cannot tell the format of {} (use --format)", p.display()))),
            };
        }
    }
    match kinds.len() {
        1 => Ok(kinds.into_iter().next().unwrap_or(Format::Auto)),
        _ => Err(CliError::usage("inputs mix formats; ingest one format at a time")),
    }
}

/// Expands folders of shards into their `.tar` files.
fn tar_files(inputs: &[PathBuf]) -> CliResult<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| CliError::io(p, &e))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|f| input::extension(f) == "tar")
                .collect();
            found.sort();
            out.extend(found);
        } else if p.exists() {
            out.push(p.clone());
        } else {
            return Err(CliError::not_found(format!("input {} does not exist", p.display())));
        }
    }
    if out.is_empty() {
        return Err(CliError::not_found("no .tar shards in the inputs"));
    }
    Ok(out)
}

fn format_name(f: Format) -> &'static str {
    match f {
        Format::Auto => "auto",
        Format::Imagefolder => "imagefolder",
        Format::Wds => "wds",
        Format::Npy => "npy",
        Format::Jsonl => "jsonl",
        Format::Parquet => "parquet",
        Format::Arrow => "arrow",
        Format::Audio => "audio",
        Format::Video => "video",
    }
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
    let format = if args.format == Format::Auto { detect(&inputs)? } else { args.format };
    let size = args.size.as_deref().map(parse_image_size).transpose()?;
    let compress = parse_compress(&args.compress)?;
    let target_file_bytes = parse_size(&args.file_size).map_err(CliError::usage)?;
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, usize::from)).clamp(1, 256);
    let branch = args.branch.clone().unwrap_or_else(|| "main".to_string());
    let ragged = RaggedSpec::parse(&args.ragged).map_err(CliError::usage)?;
    let edits = ColumnEdits::parse(&args.rename, &args.kind).map_err(CliError::usage)?;
    let infer = InferOptions { fixed_images: size.is_some(), ragged };
    let keep_files = args.keep_encoded || compress.iter().any(|(_, z)| *z == Compression::Encoded);
    let image = ImageOptions { size, filter: args.filter.image(), channels: args.channels, keep_files };
    let folder_columns = FolderColumns {
        image: args.image_column.clone(),
        label: args.label_column.clone(),
        encoded: args.keep_original.then(|| format!("{}_original", args.image_column)),
    };

    let (source, planned, sidecar_dir) = open_source(format, &inputs, &image, &folder_columns, &infer, &edits)?;
    // The sidecar names the columns as the input files do: --rename applies to it too.
    let sidecar = match &sidecar_dir {
        Some(d) => input::read_sidecar(d)?.map(|cols| {
            cols.into_iter().map(|c| Column { name: edits.name(&c.name).to_string(), ..c }).collect::<Vec<_>>()
        }),
        None => None,
    };

    // The target: an existing dataset to append to, or a location to create one at. A local
    // folder this ingest makes is removed again if it fails.
    let fresh_dir = !location.contains("://") && !Path::new(&location).exists();
    let store = open_target_store(&location)?;
    let base = match tessera::dataset::latest_version(&store, &branch) {
        Ok(_) => Some(Dataset::open_at(&store, &tessera::At::Branch(branch.clone()), Limits::default())?),
        Err(e) if e.class() == tessera::ErrorClass::NotFound => {
            if branch != "main" {
                return Err(CliError::not_found(format!(
                    "branch {branch:?} does not exist in {location} (create it with `tessera branch`)"
                )));
            }
            None
        }
        Err(e) => return Err(e.into()),
    };
    if let (Some(b), Source::Folder(folder)) = (&base, &source) {
        check_classes(b.schema(), &folder_columns.label, &folder.classes)?;
    }
    if base.is_some() && !compress.is_empty() {
        ctx.info("note: --compress is ignored when appending (compression is part of the existing schema)");
    }

    let total = progress_total(&source);
    // A class folder's classes, what its files are, how many others it has, and its format.
    let (classes, media, ignored, format_name): (Arc<[String]>, _, _, _) = match &source {
        Source::Folder(f) => (f.classes.clone(), f.media, (f.ignored.len(), f.media.noun()), f.media.format_name()),
        _ => (Arc::from(Vec::new()), Media::Image, (0, "images"), format_name(format)),
    };
    let decoder = Decoder {
        classes,
        media,
        folder_columns,
        wds: args.media.decode_options(image, args.keep_original),
        jsonl: match &source {
            Source::Jsonl(p) => Some(p.clone()),
            _ => None,
        },
    };
    let index = args.index.as_deref().map(str::parse::<tessera::IndexLayout>).transpose().map_err(CliError::from)?;
    let options = WriteOptions { target_file_bytes, index: index.unwrap_or_default(), ..WriteOptions::default() };
    let mut sink = Sink {
        ctx,
        store,
        location: location.clone(),
        base,
        options,
        sidecar,
        compress,
        keep_encoded: args.keep_encoded,
        edits,
        infer,
        pending: Vec::new(),
        pending_bytes: 0,
        fresh_dir,
        target: None,
        skip_bad: args.skip_bad,
        skipped: Vec::new(),
        rows: 0,
        images: 0,
        raw_bytes: 0,
        input_bytes: 0,
        appended_bytes: 0,
        progress: Progress::new("ingest", total, visible(ctx.quiet)),
    };

    if let Some(p) = planned {
        sink.start_planned(p)?;
    }
    let producer = move |send: &mut dyn FnMut(Work) -> bool| produce(source, send);
    let result = pipeline(jobs, producer, &decoder, &mut |out| sink.consume(out));
    sink.progress.finish();
    if let Err(e) = result {
        return Err(sink.abort_notes(e));
    }
    let message = args.message.take().unwrap_or_else(|| format!("ingest {format_name} from {}", args.inputs.join(" ")));
    sink.finish(&message, format_name, ignored)
}

/// What the progress bar counts for a source.
fn progress_total(source: &Source) -> Total {
    match source {
        Source::Folder(f) => Total::Count(f.files.len() as u64, f.media.noun()),
        Source::Wds(shards) => {
            Total::Bytes(shards.iter().filter_map(|s| std::fs::metadata(s).ok()).map(|m| m.len()).sum())
        }
        Source::Npy(n) => Total::Count(n.rows, "rows"),
        Source::Jsonl(p) => Total::Count(p.lines, "rows"),
        Source::Table(t) => t.rows.map_or(Total::Bytes(t.bytes), |r| Total::Count(r, "rows")),
        Source::Audio(files) => Total::Count(files.len() as u64, "clips"),
        Source::Video(files) => Total::Count(files.len() as u64, "videos"),
    }
}

/// What an opened source yields: the source, its columns when known up front, and the
/// folder a schema sidecar would be in.
type Opened = (Source, Option<Vec<Column>>, Option<PathBuf>);

/// Opens the inputs as a source and plans its columns where the format knows them up front.
fn open_source(
    format: Format,
    inputs: &[PathBuf],
    image: &ImageOptions,
    folder_columns: &FolderColumns,
    infer: &InferOptions,
    edits: &ColumnEdits,
) -> CliResult<Opened> {
    Ok(match format {
        Format::Imagefolder | Format::Auto => {
            let [root] = inputs else {
                return Err(CliError::usage("an image-folder ingest takes one root folder"));
            };
            if !root.is_dir() {
                return Err(CliError::not_found(format!("image folder {} does not exist", root.display())));
            }
            let folder = imagefolder::scan(root)?;
            if folder.media != Media::Image {
                // Columns come from the first clip, as for a folder of clips; the label's
                // names are the folder's.
                return Ok((Source::Folder(folder), None, None));
            }
            let c = u64::from(image.channels);
            let shape = match image.size {
                Some((h, w)) => [Dim::Fixed(u64::from(h)), Dim::Fixed(u64::from(w)), Dim::Fixed(c)],
                None => [Dim::Ragged, Dim::Ragged, Dim::Fixed(c)],
            };
            let mut cols = vec![
                Column::new(&folder_columns.image, DType::U8, &shape)
                    .with_kind(Kind::Image { layout: ImageLayout::Hwc }),
                Column::new(&folder_columns.label, DType::I64, &[])
                    .with_kind(Kind::ClassLabel { names: folder.classes.to_vec() }),
            ];
            if let Some(enc) = &folder_columns.encoded {
                cols.push(Column::new(enc, DType::Bytes, &[]));
            }
            let cols = cols
                .into_iter()
                .map(|c| {
                    let z = input::default_compression(&c);
                    c.with_compression(z)
                })
                .collect();
            (Source::Folder(folder), Some(cols), None)
        }
        Format::Wds => {
            let shards = tar_files(inputs)?;
            let dir = shards.first().and_then(|s| s.parent()).map(Path::to_path_buf);
            (Source::Wds(shards), None, dir)
        }
        Format::Npy => {
            let src = npy::open(inputs)?;
            // `--ragged` names the columns as stored; the arrays have their input names.
            let cols = src.columns(&edits.source_spec(&infer.ragged)).map_err(CliError::usage)?;
            let dir = src.dir.clone();
            (Source::Npy(src), Some(cols), Some(dir))
        }
        Format::Jsonl => {
            let plan = jsonl::scan(inputs)?;
            let cols = plan.columns();
            (Source::Jsonl(plan), Some(cols), Some(jsonl::sidecar_dir(inputs)))
        }
        // Columns come from the first rows (list lengths, image channels), like WebDataset's.
        Format::Parquet | Format::Arrow => {
            let exts: &[&str] = if format == Format::Parquet { &PARQUET_EXTENSIONS } else { &ARROW_EXTENSIONS };
            let files = table_files(inputs, exts)?;
            let dir = files.first().and_then(|f| f.parent()).map(Path::to_path_buf);
            (Source::Table(parquet::open(files, format == Format::Parquet)?), None, dir)
        }
        // Columns come from the first clip (channels, rate, frame size).
        Format::Audio => (Source::Audio(media_files(inputs, &AUDIO_EXTENSIONS)?), None, None),
        Format::Video => (Source::Video(media_files(inputs, &VIDEO_EXTENSIONS)?), None, None),
    })
}

/// The media files of the inputs (folders expanded by extension, in name order).
fn media_files(inputs: &[PathBuf], extensions: &[&str]) -> CliResult<Vec<PathBuf>> {
    if let Some(p) = inputs.iter().find(|p| !p.exists()) {
        return Err(CliError::not_found(format!("input {} does not exist", p.display())));
    }
    let files = input::expand_inputs(inputs, extensions)?;
    if files.is_empty() {
        return Err(CliError::not_found(format!("no {} files in the inputs", extensions.join("/"))));
    }
    Ok(files)
}

/// The table files of the inputs (folders expanded by extension, in name order).
fn table_files(inputs: &[PathBuf], extensions: &[&str]) -> CliResult<Vec<PathBuf>> {
    if let Some(p) = inputs.iter().find(|p| !p.exists()) {
        return Err(CliError::not_found(format!("input {} does not exist", p.display())));
    }
    let files = input::expand_inputs(inputs, extensions)?;
    if files.is_empty() {
        return Err(CliError::not_found(format!("no .{} files in the inputs", extensions.join("/."))));
    }
    Ok(files)
}

/// Removes `dir` and the folders under it if they hold no file (what a failed ingest into a
/// new local folder leaves); anything else stays.
fn remove_empty_dirs(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.filter_map(Result::ok) {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_empty_dirs(&e.path());
            }
        }
    }
    // Fails (and keeps the folder) when something is left in it.
    let _ = std::fs::remove_dir(dir);
}

/// Refuses to turn an unrelated, non-empty local folder into a dataset.
fn open_target_store(location: &str) -> CliResult<Store> {
    if !location.contains("://") {
        let p = Path::new(location);
        if p.is_file() {
            return Err(CliError::usage(format!("{location} is a file, not a dataset folder")));
        }
        if p.is_dir()
            && !p.join("branches").is_dir()
            && std::fs::read_dir(p).map_err(|e| CliError::io(p, &e))?.next().is_some()
        {
            return Err(CliError::usage(format!(
                "{location} is a non-empty folder that is not a Tessera dataset (is the dataset argument first?)"
            )));
        }
    }
    Ok(Store::open(location)?)
}

/// Checks that every folder class exists in the dataset's class names (appends map by name).
fn check_classes(schema: &Schema, label: &str, classes: &[String]) -> CliResult<()> {
    let Some(col) = schema.column(label) else { return Ok(()) };
    if let Kind::ClassLabel { names } = &col.kind {
        let unknown: Vec<&String> = classes.iter().filter(|c| !names.contains(c)).collect();
        if !unknown.is_empty() {
            return Err(CliError::usage(format!(
                "classes {unknown:?} are not in the dataset's {label:?} class names {names:?}; the schema cannot change in an append"
            )));
        }
    }
    Ok(())
}

/// Applies `--rename` to the columns a source planned (named after its input fields).
fn rename_planned(mut cols: Vec<Column>, edits: &ColumnEdits) -> CliResult<Vec<Column>> {
    let fields: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
    edits.check_renames(&fields).map_err(CliError::usage)?;
    for c in &mut cols {
        c.name = edits.name(&c.name).to_string();
    }
    Ok(cols)
}

/// Applies the sidecar, `--kind` and `--compress` to planned or inferred (renamed) columns.
fn finish_columns(
    cols: Vec<Column>,
    sidecar: Option<&[Column]>,
    compress: &[(String, Compression)],
    keep_encoded: bool,
    edits: &ColumnEdits,
) -> CliResult<Vec<Column>> {
    let mut cols = match sidecar {
        Some(s) => input::apply_sidecar(cols, s),
        None => cols,
    };
    let names: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
    edits.check_kinds(&names).map_err(CliError::usage)?;
    edits.apply_kinds(&mut cols).map_err(CliError::usage)?;
    for (name, _) in compress {
        if name != "*" && !cols.iter().any(|c| c.name == *name) {
            let names: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
            return Err(CliError::usage(format!("--compress names unknown column {name:?} (columns: {names:?})")));
        }
    }
    let default = compress.iter().find(|(n, _)| n == "*").map(|(_, c)| *c);
    for c in &mut cols {
        if let Some((_, z)) = compress.iter().find(|(n, _)| *n == c.name) {
            c.compression = *z;
        } else if keep_encoded && c.encodable() {
            c.compression = Compression::Encoded;
        } else if let Some(z) = default {
            c.compression = z;
        }
    }
    Ok(cols)
}

/// Sends the source's work items in input order; stops when `send` returns false.
fn produce(source: Source, send: &mut dyn FnMut(Work) -> bool) {
    match source {
        Source::Folder(f) => {
            for (path, class) in f.files {
                if !send(Work::Class(path, class)) {
                    return;
                }
            }
        }
        Source::Wds(shards) => wds::read_shards(&shards, &mut |r| {
            send(match r {
                Ok(s) => Work::Wds(s),
                Err(b) => Work::Bad(b),
            })
        }),
        Source::Npy(mut src) => {
            let per_chunk = src.rows_per_chunk(4 << 20);
            let mut start = 0;
            while start < src.rows {
                let w = match src.read_chunk(start, per_chunk) {
                    Ok(samples) => Work::Ready(samples),
                    Err(b) => Work::Bad(b),
                };
                if !send(w) {
                    return;
                }
                start += per_chunk;
            }
        }
        Source::Audio(files) => {
            for path in files {
                if !send(Work::Audio(path)) {
                    return;
                }
            }
        }
        Source::Video(files) => {
            for path in files {
                if !send(Work::Video(path)) {
                    return;
                }
            }
        }
        Source::Table(t) => t.read(&mut |r| {
            send(match r {
                Ok(chunk) => Work::Table(chunk),
                Err(b) => Work::Bad(b),
            })
        }),
        Source::Jsonl(plan) => jsonl::read_lines(&plan.files, 256, &mut |r| {
            send(match r {
                Ok(lines) => Work::Lines(lines),
                Err(b) => Work::Bad(b),
            })
        }),
    }
}

/// Runs the producer, `jobs` decoders and the in-order consumer (on this thread). When the
/// consumer fails, dropping its receiver makes the decoders and then the producer stop.
fn pipeline<P>(
    jobs: usize,
    producer: P,
    decoder: &Decoder,
    consume: &mut dyn FnMut(Vec<Decoded>) -> CliResult<()>,
) -> CliResult<()>
where
    P: FnOnce(&mut dyn FnMut(Work) -> bool) + Send,
{
    std::thread::scope(|s| {
        let (work_tx, work_rx) = mpsc::sync_channel::<(u64, Work)>(jobs * 2);
        let (out_tx, out_rx) = mpsc::sync_channel::<(u64, Vec<Decoded>)>(jobs * 4);
        let work_rx = Arc::new(Mutex::new(work_rx));
        s.spawn(move || {
            let mut seq = 0u64;
            producer(&mut |w| {
                let ok = work_tx.send((seq, w)).is_ok();
                seq += 1;
                ok
            });
        });
        for _ in 0..jobs {
            let rx = Arc::clone(&work_rx);
            let tx = out_tx.clone();
            s.spawn(move || {
                loop {
                    let next = match rx.lock() {
                        Ok(guard) => guard.recv(),
                        Err(_) => return,
                    };
                    let Ok((seq, work)) = next else { return };
                    if tx.send((seq, decoder.decode(work))).is_err() {
                        return;
                    }
                }
            });
        }
        drop(out_tx);
        drop(work_rx);
        consume_in_order(out_rx, consume)
    })
}

/// Feeds results to `consume` in sequence order. Returning drops the receiver.
fn consume_in_order(
    rx: mpsc::Receiver<(u64, Vec<Decoded>)>,
    consume: &mut dyn FnMut(Vec<Decoded>) -> CliResult<()>,
) -> CliResult<()> {
    let mut pending: BTreeMap<u64, Vec<Decoded>> = BTreeMap::new();
    let mut next = 0u64;
    for (seq, out) in rx {
        pending.insert(seq, out);
        while let Some(o) = pending.remove(&next) {
            next += 1;
            consume(o)?;
        }
    }
    Ok(())
}

/// The writer side: schema, dataset, column buffers, counters.
struct Sink {
    ctx: Ctx,
    store: Store,
    location: String,
    base: Option<Dataset>,
    options: WriteOptions,
    sidecar: Option<Vec<Column>>,
    compress: Vec<(String, Compression)>,
    /// `--keep-encoded`: image columns that `--compress` does not name are stored `encoded`.
    keep_encoded: bool,
    edits: ColumnEdits,
    infer: InferOptions,
    /// Samples held back until the schema is inferred from them (sources without planned
    /// columns), and their decoded bytes.
    pending: Vec<Sample>,
    pending_bytes: u64,
    /// The dataset is a local folder this ingest made (removed again on failure).
    fresh_dir: bool,
    target: Option<Target>,
    skip_bad: bool,
    skipped: Vec<Bad>,
    rows: u64,
    images: u64,
    raw_bytes: u64,
    input_bytes: u64,
    appended_bytes: u64,
    progress: Progress,
}

/// The dataset being appended to, once the schema is known. A new dataset is created only
/// when the first batch is ready, so an ingest that fails early leaves nothing behind.
struct Target {
    schema: Schema,
    base: Option<Dataset>,
    created: bool,
    writer: Option<DatasetWriter>,
    asm: Assembler,
    /// Samples the schema was inferred from (0 when planned or appending).
    inferred_from: usize,
    /// The dataset existed before this ingest.
    appending: bool,
}

/// Rows buffered before a batch goes to the writer.
const BATCH_ROWS: usize = 1024;
/// Raw bytes buffered before a batch goes to the writer.
const BATCH_BYTES: u64 = 8 << 20;
/// Samples looked at to infer a schema (which dims vary, which fields are optional).
const INFER_SAMPLES: usize = 256;
/// Decoded bytes held for inference at most (fewer samples when they are large).
const INFER_BYTES: u64 = 64 << 20;

/// Decoded bytes of a value (what inference holds in memory).
fn value_bytes(v: &Value) -> u64 {
    (match v {
        Value::Image(i) => i.pixels.len(),
        Value::Audio(a) => a.bytes.len(),
        Value::Video(v) => v.pixels.len(),
        Value::Tensor { bytes, .. } | Value::Bytes(bytes) => bytes.len(),
        Value::Text(t) | Value::Json(t) => t.len(),
        Value::Class { .. } | Value::Int(_) | Value::Float(_) | Value::Bool(_) | Value::Null => 8,
    }) as u64
}

impl Sink {
    fn consume(&mut self, out: Vec<Decoded>) -> CliResult<()> {
        let units = out.len() as u64;
        let rows_before = self.rows;
        let mut bytes = 0;
        for d in out {
            match d {
                Ok(mut sample) => {
                    bytes += sample.input_bytes;
                    for (name, _) in &mut sample.fields {
                        let new = self.edits.name(name);
                        if new != name {
                            *name = new.to_string();
                        }
                    }
                    if self.target.is_none() {
                        self.pending_bytes += sample.fields.iter().map(|(_, v)| value_bytes(v)).sum::<u64>();
                        self.pending.push(sample);
                        if self.pending.len() >= INFER_SAMPLES || self.pending_bytes >= INFER_BYTES {
                            self.start_pending()?;
                        }
                    } else {
                        self.push(sample)?;
                    }
                }
                Err(b) => self.bad(b)?,
            }
        }
        self.progress.advance(units, self.rows - rows_before, bytes);
        Ok(())
    }

    /// Adds one sample to the column buffers (a bad one is skipped or ends the ingest).
    fn push(&mut self, sample: Sample) -> CliResult<()> {
        let Some(t) = self.target.as_mut() else { return Err(CliError::other("no schema yet")) };
        let (origin, in_bytes) = (sample.origin.clone(), sample.input_bytes);
        match t.asm.push(sample) {
            Ok(images) => {
                self.rows += 1;
                self.images += images;
                self.input_bytes += in_bytes;
            }
            Err(Reject::Bad(reason)) => self.bad(Bad::new(origin, reason))?,
            Err(Reject::Schema(e)) => return Err(self.schema_question(&origin, &e)),
        }
        if self.target.as_ref().is_some_and(|t| t.asm.rows >= BATCH_ROWS || t.asm.bytes >= BATCH_BYTES) {
            self.flush()?;
        }
        Ok(())
    }

    /// A sample that does not fit the schema: exit 2, with the flag that makes it fit where
    /// there is one. Never skipped: `--skip-bad` would drop every such row.
    fn schema_question(&self, origin: &str, e: &SchemaMismatch) -> CliError {
        let Some(t) = self.target.as_ref() else { return CliError::other("no schema yet") };
        let Some(col) = e.column.and_then(|i| t.schema.columns.get(i)) else {
            return CliError::usage(format!("{origin}: {}", e.reason));
        };
        let mut err = CliError::usage(format!("{origin}: column {:?}: {}", col.name, e.reason));
        match (&e.shape, columns::ragged_hint(col, e.shape.as_deref().unwrap_or_default())) {
            (Some(_), Some(hint)) if t.appending => {
                err = err.note(format!(
                    "the dataset stores {:?} as {}; an append cannot change it (a new dataset takes {hint})",
                    col.name,
                    super::fmt_shape(&col.shape)
                ));
            }
            (Some(_), Some(hint)) => {
                if t.inferred_from > 0 {
                    err = err.note(format!(
                        "the shape was inferred from the first {} samples, which all had {}",
                        t.inferred_from,
                        super::fmt_shape(&col.shape)
                    ));
                }
                err = err.note(format!("rerun with {hint} to store the dims that vary as ragged"));
            }
            _ if e.missing && t.inferred_from > 0 => {
                err = err.note(format!(
                    "all of the first {} samples had this field, so the column is not nullable; a {} beside the inputs can declare it nullable",
                    t.inferred_from,
                    input::SIDECAR
                ));
            }
            _ => {}
        }
        err
    }

    /// A bad input: skipped and listed with `--skip-bad`, else the end of the ingest.
    fn bad(&mut self, b: Bad) -> CliResult<()> {
        if self.skip_bad {
            self.progress.println(&format!("skipping {}: {}", b.origin, b.reason));
            self.skipped.push(b);
            Ok(())
        } else {
            Err(CliError::data(format!("bad input {}: {}", b.origin, b.reason))
                .note("--skip-bad skips inputs that cannot be decoded and lists each in the summary"))
        }
    }

    /// Starts with the columns a source planned (named after its input fields).
    fn start_planned(&mut self, cols: Vec<Column>) -> CliResult<()> {
        let cols = rename_planned(cols, &self.edits).and_then(|p| self.finish_columns(p));
        cols.and_then(|c| self.start(c)).map_err(|e| self.abort_notes(e))
    }

    /// Applies the sidecar, `--kind` and `--compress` to the (renamed) columns.
    fn finish_columns(&self, cols: Vec<Column>) -> CliResult<Vec<Column>> {
        finish_columns(cols, self.sidecar.as_deref(), &self.compress, self.keep_encoded, &self.edits)
    }

    /// Infers the schema from the held samples, starts, and adds them.
    fn start_pending(&mut self) -> CliResult<()> {
        let pending = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        let cols = self.infer_columns(&pending)?;
        self.start(cols)?;
        if let Some(t) = self.target.as_mut()
            && !t.appending
        {
            t.inferred_from = pending.len();
        }
        for s in pending {
            self.push(s)?;
        }
        Ok(())
    }

    /// The columns the samples imply together: in order of first appearance, a dim that
    /// differs among them ragged (unless `--ragged` gave it), a field that some lack or
    /// leave null nullable.
    fn infer_columns(&self, samples: &[Sample]) -> CliResult<Vec<Column>> {
        // Column, samples with a value, and whether a null was seen.
        let mut cols: Vec<(Column, usize)> = Vec::new();
        let mut nulls: Vec<(String, String)> = Vec::new();
        for s in samples {
            for (name, v) in &s.fields {
                let seen = input::infer_column(name, v, &self.infer)
                    .map_err(|e| CliError::usage(format!("{}: column {name:?}: {e}", s.origin)))?;
                match (seen, cols.iter_mut().find(|(c, _)| c.name == *name)) {
                    (Some(seen), Some((c, n))) => {
                        columns::widen(c, &seen, self.infer.ragged.names(name));
                        *n += 1;
                    }
                    (Some(seen), None) => cols.push((seen, 1)),
                    (None, _) => nulls.push((name.clone(), s.origin.clone())),
                }
            }
        }
        if let Some((name, origin)) = nulls.iter().find(|(n, _)| !cols.iter().any(|(c, _)| c.name == *n)) {
            return Err(CliError::usage(format!(
                "{origin}: field {name:?} is null in all of the first {} samples, so its type is unknown",
                samples.len()
            ))
            .note(format!("a {} beside the inputs can declare its type", input::SIDECAR)));
        }
        let sources: Vec<String> = cols.iter().map(|(c, _)| self.edits.source_name(&c.name).to_string()).collect();
        self.edits.check_renames(&sources.iter().map(String::as_str).collect::<Vec<_>>()).map_err(CliError::usage)?;
        let out: Vec<Column> =
            cols.into_iter().map(|(c, n)| if n < samples.len() { c.nullable() } else { c }).collect();
        self.finish_columns(out)
    }

    /// Fixes the schema, opens the dataset to append to (or plans a new one), and starts the
    /// writer.
    fn start(&mut self, cols: Vec<Column>) -> CliResult<()> {
        let (schema, base) = if let Some(b) = self.base.take() {
            check_columns(b.schema(), &cols)?;
            (b.schema().clone(), Some(b))
        } else {
            let schema = Schema::new(cols).map_err(|e| CliError::usage(format!("cannot build a schema: {e}")))?;
            (schema, None)
        };
        let asm = Assembler::new(&schema);
        let writer = base.as_ref().map(|b| b.writer(self.options.clone()));
        let appending = base.is_some();
        self.target = Some(Target { schema, base, created: false, writer, asm, inferred_from: 0, appending });
        Ok(())
    }

    /// The writer, creating the dataset first if it is new.
    fn writer(&mut self) -> CliResult<&mut DatasetWriter> {
        let Some(t) = self.target.as_mut() else { return Err(CliError::other("no schema yet")) };
        if t.base.is_none() {
            t.base = Some(Dataset::create_in(&self.store, t.schema.clone(), &self.options)?);
            t.created = true;
        }
        let base = t.base.as_ref().ok_or_else(|| CliError::other("no dataset"))?;
        Ok(t.writer.get_or_insert_with(|| base.writer(self.options.clone())))
    }

    fn flush(&mut self) -> CliResult<()> {
        let Some(t) = self.target.as_mut() else { return Ok(()) };
        if t.asm.rows == 0 {
            return Ok(());
        }
        let (batch, raw) = t.asm.take_batch()?;
        self.writer()?.append(&batch)?;
        self.raw_bytes += raw;
        self.appended_bytes += raw;
        Ok(())
    }

    /// Removes what a failed ingest made (the dataset it created, the folder it made) and
    /// adds what is left behind to its error.
    fn abort_notes(&self, e: CliError) -> CliError {
        let mut e = e.note("no version was committed");
        if self.target.as_ref().is_some_and(|t| t.created) {
            match self.discard_created() {
                Ok(()) => e = e.note(format!("the dataset this ingest created at {} was removed", self.location)),
                Err(why) => {
                    e = e.note(format!(
                        "the dataset at {} was created (empty version 1) before the failure and could not be removed: {why}",
                        self.location
                    ));
                }
            }
        } else if self.appended_bytes >= self.options.target_file_bytes {
            e = e.note("data files already written for this ingest are unreferenced garbage until collected");
        }
        if self.fresh_dir {
            remove_empty_dirs(Path::new(&self.location));
        }
        e
    }

    /// Deletes every object of the dataset this ingest created, if nobody committed to it
    /// since (its main branch is still at our empty version 1).
    fn discard_created(&self) -> CliResult<()> {
        if tessera::dataset::latest_version(&self.store, "main")? != 1 {
            return Err(CliError::other("another writer committed to it meanwhile"));
        }
        for (key, _) in self.store.list_recursive("")? {
            self.store.delete(&key)?;
        }
        Ok(())
    }

    fn finish(mut self, message: &str, format: &str, (ignored, noun): (usize, &str)) -> CliResult<Exit> {
        let started = if self.target.is_none() && !self.pending.is_empty() { self.start_pending() } else { Ok(()) };
        if let Err(e) = started.and_then(|()| self.flush()) {
            return Err(self.abort_notes(e));
        }
        let seconds_decode = self.progress.seconds();
        let target = if self.rows == 0 { None } else { self.target.take() };
        let Some(t) = target else {
            if self.skipped.is_empty() {
                return Err(CliError::not_found("no samples in the inputs; nothing committed"));
            }
            return Err(CliError::data(format!("all {} inputs were bad; nothing committed", self.skipped.len())));
        };
        let (Some(base), Some(writer)) = (t.base, t.writer) else { return Err(CliError::other("no writer")) };
        let first_new = base.manifest().next_fragment_id;
        let new = writer.commit(message).map_err(|e| self.abort_notes(e.into()))?;
        let stored: u64 = new
            .fragments()
            .iter()
            .filter(|f| f.fragment.id >= first_new)
            .flat_map(|f| f.fragment.files.iter())
            .map(|f| f.size)
            .sum();
        let seconds = self.progress.seconds().max(seconds_decode).max(1e-9);
        let skipped: Vec<serde_json::Value> =
            self.skipped.iter().map(|b| serde_json::json!({"input": b.origin, "error": b.reason})).collect();
        if self.ctx.json {
            emit_json(&serde_json::json!({
                "dataset": self.location, "branch": new.branch(), "version": new.version(), "created": t.created,
                "format": format, "rows": self.rows, "images": self.images, "bytes_raw": self.raw_bytes,
                "bytes_stored": stored, "bytes_input": self.input_bytes, "seconds": seconds,
                "rows_per_sec": self.rows as f64 / seconds, "images_per_sec": self.images as f64 / seconds,
                "skipped": skipped, "ignored_files": ignored,
            }));
        } else {
            let mut s = format!(
                "ingested {} rows{} into {} as {}@{} ({}) in {seconds:.2} s\n",
                self.rows,
                if self.images > 0 { format!(" ({} images)", self.images) } else { String::new() },
                self.location,
                new.branch(),
                new.version(),
                if t.created { "new dataset" } else { "appended" },
            );
            let ratio = if stored > 0 { self.raw_bytes as f64 / stored as f64 } else { 0.0 };
            let _ = writeln!(
                s,
                "  bytes: raw {}, stored {} (ratio {ratio:.2}), input {}",
                fmt_bytes(self.raw_bytes),
                fmt_bytes(stored),
                fmt_bytes(self.input_bytes)
            );
            let _ = write!(s, "  rate: {:.0} rows/s", self.rows as f64 / seconds);
            if self.images > 0 {
                let _ = write!(s, ", {:.0} images/s", self.images as f64 / seconds);
            }
            let _ = writeln!(s, ", {:.1} MB/s input", self.input_bytes as f64 / seconds / 1e6);
            if ignored > 0 {
                let _ = writeln!(s, "  ignored {ignored} files that are not {noun}");
            }
            if !self.skipped.is_empty() {
                let _ = writeln!(s, "  skipped {} bad inputs:", self.skipped.len());
                for b in &self.skipped {
                    let _ = writeln!(s, "    {}: {}", b.origin, b.reason);
                }
            }
            emit(&s);
        }
        Ok(Exit::Ok)
    }
}

/// Checks that the input's columns can be appended to the dataset's schema.
fn check_columns(schema: &Schema, cols: &[Column]) -> CliResult<()> {
    let extra: Vec<&str> = cols.iter().filter(|c| schema.column(&c.name).is_none()).map(|c| c.name.as_str()).collect();
    let missing: Vec<&str> = schema
        .columns
        .iter()
        .filter(|c| !c.nullable && !cols.iter().any(|x| x.name == c.name))
        .map(|c| c.name.as_str())
        .collect();
    if !extra.is_empty() || !missing.is_empty() {
        let have: Vec<&str> = schema.columns.iter().map(|c| c.name.as_str()).collect();
        return Err(CliError::usage(format!(
            "the inputs do not match the dataset's columns {have:?}: extra {extra:?}, missing {missing:?}"
        )));
    }
    for c in cols {
        if let Some(s) = schema.column(&c.name)
            && matches!(s.kind, Kind::Image { .. })
            && matches!(c.shape.first(), Some(Dim::Ragged))
            && let Some(Dim::Fixed(h)) = s.shape.first()
        {
            return Err(CliError::usage(format!(
                "column {:?} holds {h}-pixel-high images of one size; pass --size to resize the inputs",
                c.name
            )));
        }
        if let Some(s) = schema.column(&c.name)
            && !input::sidecar_fits(c, s)
        {
            return Err(CliError::usage(format!(
                "column {:?}: input is {} {}, the dataset has {} {}",
                c.name,
                c.dtype,
                super::fmt_shape(&c.shape),
                s.dtype,
                super::fmt_shape(&s.shape)
            )));
        }
    }
    Ok(())
}

/// A row's encoding: `None` for null, else full shape and little-endian bytes.
type Row = Option<(Vec<u64>, Vec<u8>)>;

/// Why a sample cannot be added to the column buffers.
#[derive(Debug)]
enum Reject {
    /// A value breaks a rule of its column (range, dtype, JSON, UTF-8): the input is bad.
    Bad(String),
    /// The sample does not fit the schema: a schema question, not a data fault.
    Schema(SchemaMismatch),
}

/// A sample that does not fit the schema.
#[derive(Debug)]
struct SchemaMismatch {
    /// The column (index into the schema), when the field is one.
    column: Option<usize>,
    /// What does not fit.
    reason: String,
    /// The value's shape, when it is the shape that does not fit.
    shape: Option<Vec<u64>>,
    /// The sample lacks a non-nullable column.
    missing: bool,
}

/// Turns samples into column buffers for the schema, validating each sample completely
/// before any of its values is added (a bad sample leaves the buffers untouched).
struct Assembler {
    columns: Vec<Column>,
    builders: Vec<ColumnData>,
    index: HashMap<String, usize>,
    class_ids: Vec<Option<HashMap<String, i64>>>,
    rows: usize,
    bytes: u64,
}

impl Assembler {
    fn new(schema: &Schema) -> Self {
        let columns = schema.columns.clone();
        let builders = columns.iter().map(ColumnData::for_column).collect();
        let index = columns.iter().enumerate().map(|(i, c)| (c.name.clone(), i)).collect();
        let class_ids = columns
            .iter()
            .map(|c| match &c.kind {
                Kind::ClassLabel { names } => {
                    Some(names.iter().enumerate().map(|(i, n)| (n.clone(), i as i64)).collect())
                }
                _ => None,
            })
            .collect();
        Self { columns, builders, index, class_ids, rows: 0, bytes: 0 }
    }

    /// Adds a sample; returns how many image values it held.
    fn push(&mut self, sample: Sample) -> Result<u64, Reject> {
        let mut rows: Vec<Option<Row>> = vec![None; self.columns.len()];
        let mut files: Vec<Option<Arc<[u8]>>> = vec![None; self.columns.len()];
        let mut images = 0;
        for (name, v) in sample.fields {
            let Some(&i) = self.index.get(&name) else {
                let names: Vec<&str> = self.columns.iter().map(|c| c.name.as_str()).collect();
                return Err(Reject::Schema(SchemaMismatch {
                    column: None,
                    reason: format!("field {name:?} is not a column of the dataset (columns: {names:?})"),
                    shape: None,
                    missing: false,
                }));
            };
            if rows[i].is_some() {
                return Err(Reject::Bad(format!("field {name:?} appears twice")));
            }
            if let Some(reason) = media::kind_mismatch(&self.columns[i], &v) {
                return Err(Reject::Schema(SchemaMismatch { column: Some(i), reason, shape: None, missing: false }));
            }
            images += u64::from(matches!(v, Value::Image(_)));
            // An image file kept as the row's stored form (an encoded column) [CMP-06].
            files[i] = match &v {
                Value::Image(img) if self.columns[i].compression == Compression::Encoded => img.file.clone(),
                _ => None,
            };
            let row = encode(&self.columns[i], v, self.class_ids[i].as_ref())
                .map_err(|e| Reject::Bad(format!("column {name:?}: {e}")))?;
            if let Some((shape, bytes)) = &row {
                check_shape(&self.columns[i], shape).map_err(|reason| {
                    Reject::Schema(SchemaMismatch {
                        column: Some(i),
                        reason,
                        shape: Some(shape.clone()),
                        missing: false,
                    })
                })?;
                // The value rules of the column's dtype and kind are the reference's.
                self.columns[i].check_value(bytes).map_err(|e| match e {
                    tessera::Error::Usage(reason) => Reject::Bad(format!("column {name:?}: {reason}")),
                    other => Reject::Bad(format!("column {name:?}: {other}")),
                })?;
            }
            rows[i] = Some(row);
        }
        if let Some(i) = self.columns.iter().zip(&rows).position(|(c, r)| r.is_none() && !c.nullable) {
            return Err(Reject::Schema(SchemaMismatch {
                column: Some(i),
                reason: "the sample has no value for this column, which is not nullable".into(),
                shape: None,
                missing: true,
            }));
        }
        for (i, r) in rows.into_iter().enumerate() {
            match r.flatten() {
                Some((shape, bytes)) => {
                    self.bytes += bytes.len() as u64;
                    let pushed = match &files[i] {
                        Some(file) => self.builders[i].push_encoded(file),
                        None => self.builders[i].push_row(&shape, &bytes),
                    };
                    pushed.map_err(|e| Reject::Bad(e.to_string()))?;
                }
                None => self.builders[i].push_null().map_err(|e| Reject::Bad(e.to_string()))?,
            }
        }
        self.rows += 1;
        Ok(images)
    }

    /// The buffered rows as a batch, and their raw bytes.
    fn take_batch(&mut self) -> CliResult<(Batch, u64)> {
        let mut batch = Batch::new();
        let mut raw = 0;
        for (c, b) in self.columns.iter().zip(self.builders.iter_mut()) {
            let data = std::mem::replace(b, ColumnData::for_column(c));
            raw += data.values().len() as u64;
            batch.push(c.name.clone(), data)?;
        }
        self.rows = 0;
        self.bytes = 0;
        Ok((batch, raw))
    }
}

/// Checks a row shape against a column: rank, fixed dims.
fn check_shape(c: &Column, shape: &[u64]) -> Result<(), String> {
    if c.dtype.is_variable() {
        return if shape.len() == 1 { Ok(()) } else { Err("expected a string".into()) };
    }
    if shape.len() != c.shape.len() {
        return Err(format!("value has shape {shape:?}, column has {}", super::fmt_shape(&c.shape)));
    }
    for (d, &s) in c.shape.iter().zip(shape) {
        if let Dim::Fixed(f) = d
            && *f != s
        {
            return Err(format!("value has shape {shape:?}, column has {}", super::fmt_shape(&c.shape)));
        }
    }
    Ok(())
}

/// Encodes a value for a column (dtype conversions, class names); the value rules of the
/// column are checked on the result ([`Column::check_value`]).
fn encode(c: &Column, v: Value, class_ids: Option<&HashMap<String, i64>>) -> Result<Row, String> {
    let scalar = |bytes: Vec<u8>| Ok(Some((Vec::new(), bytes)));
    match v {
        Value::Null => {
            if c.nullable {
                Ok(None)
            } else {
                Err("null in a non-nullable column".into())
            }
        }
        Value::Image(img) => {
            if c.dtype != DType::U8 {
                return Err(format!("an 8-bit image cannot go in a {} column", c.dtype));
            }
            let (h, w, ch) = (u64::from(img.height), u64::from(img.width), u64::from(img.channels));
            let shape = if c.shape.len() == 2 && ch == 1 { vec![h, w] } else { vec![h, w, ch] };
            Ok(Some((shape, img.pixels)))
        }
        Value::Audio(a) => media::audio_row(c, a).map(Some),
        Value::Video(v) => media::video_row(c, v).map(Some),
        Value::Tensor { dtype, shape, bytes } => {
            if c.dtype.is_variable() {
                if dtype != DType::U8 || shape.len() != 1 {
                    return Err(format!("a {dtype} array of rank {} cannot be a {} value", shape.len(), c.dtype));
                }
                return Ok(Some((shape, bytes)));
            }
            if dtype == c.dtype || (c.dtype == DType::Bf16 && dtype == DType::U16) {
                Ok(Some((shape, bytes)))
            } else if c.dtype == DType::Bf16 && dtype == DType::F32 {
                // bf16 exported to Arrow as f32 (exact) narrows back bit for bit.
                let mut out = Vec::with_capacity(bytes.len() / 2);
                for x in bytes.chunks_exact(4).map(<f32 as tessera::Element>::from_le) {
                    tessera::cast::push_bf16_of_f32(x, &mut out).map_err(|e| e.to_string())?;
                }
                Ok(Some((shape, out)))
            } else if shape.is_empty() && c.shape.is_empty() && dtype.is_integer() && c.dtype.is_integer() {
                let x = int_of(dtype, &bytes).ok_or("bad integer")?;
                scalar(number_bytes(c, x)?)
            } else {
                Err(format!("array dtype {dtype} differs from the column's {}", c.dtype))
            }
        }
        Value::Class { index, names } => {
            let name = names.get(index).ok_or("class index out of range")?;
            let id = match class_ids {
                Some(ids) => {
                    *ids.get(name).ok_or_else(|| format!("class {name:?} is not in the column's class names"))?
                }
                None => index as i64,
            };
            scalar(number_bytes(c, Number::I64(id))?)
        }
        Value::Int(x) => scalar(number_bytes(c, Number::I64(x))?),
        Value::Float(x) => scalar(number_bytes(c, Number::F64(x))?),
        Value::Bool(b) => {
            if c.dtype == DType::Bool {
                scalar(vec![u8::from(b)])
            } else {
                Err(format!("a bool cannot go in a {} column", c.dtype))
            }
        }
        Value::Text(s) | Value::Json(s) => {
            if !c.dtype.is_variable() {
                return Err(format!("text cannot go in a {} column", c.dtype));
            }
            let bytes = s.into_bytes();
            Ok(Some((vec![bytes.len() as u64], bytes)))
        }
        Value::Bytes(b) => {
            if !c.dtype.is_variable() {
                return Err(format!("bytes cannot go in a {} column", c.dtype));
            }
            Ok(Some((vec![b.len() as u64], b)))
        }
    }
}

/// The value of one little-endian integer element.
fn int_of(dtype: DType, e: &[u8]) -> Option<Number> {
    let mut b = [0u8; 8];
    let n = dtype.item_size();
    b[..n].copy_from_slice(e.get(..n)?);
    Some(match dtype {
        DType::I8 => Number::I64(i64::from(i8::from_le_bytes([b[0]]))),
        DType::I16 => Number::I64(i64::from(i16::from_le_bytes([b[0], b[1]]))),
        DType::I32 => Number::I64(i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
        DType::I64 => Number::I64(i64::from_le_bytes(b)),
        _ => Number::U64(u64::from_le_bytes(b)),
    })
}

/// A number in the column's dtype, if the dtype can hold it (`tessera::cast`: the one rule
/// every front end applies; class ids are checked with the column's other value rules, after
/// encoding).
fn number_bytes(c: &Column, x: Number) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(8);
    push_number(c.dtype, x, &mut out).map_err(|e| format!("{} does not fit {}: {}", e.value, e.dtype, e.reason))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_parsing() {
        assert_eq!(parse_image_size("224").unwrap(), (224, 224));
        assert_eq!(parse_image_size("224x160").unwrap(), (224, 160));
        assert!(parse_image_size("0").is_err());
        assert!(parse_image_size("big").is_err());
        assert!(parse_compress(&["image=zstd:99".into()]).is_err());
        assert_eq!(parse_compress(&["t = zstd:7".into()]).unwrap(), vec![("t".into(), Compression::Zstd { level: 7 })]);
        let c = parse_compress(&["image=lz4".into(), "*=none".into()]).unwrap();
        assert_eq!(c, vec![("image".into(), Compression::Lz4), ("*".into(), Compression::None)]);
        assert!(parse_compress(&["image".into()]).is_err());
    }

    #[test]
    fn assembler_validates_whole_samples() {
        let schema =
            Schema::new([Column::new("x", DType::F32, &[Dim::Fixed(2)]), Column::new("n", DType::I32, &[]).nullable()])
                .unwrap();
        let mut a = Assembler::new(&schema);
        let t = |v: [f32; 2]| Value::Tensor {
            dtype: DType::F32,
            shape: vec![2],
            bytes: v.iter().flat_map(|f| f.to_le_bytes()).collect(),
        };
        let s = |fields| Sample { origin: "s".into(), fields, input_bytes: 0 };
        a.push(s(vec![("x".into(), t([1.0, 2.0])), ("n".into(), Value::Int(3))])).unwrap();
        a.push(s(vec![("x".into(), t([1.0, 2.0]))])).unwrap();
        // Wrong shape, out of range, unknown field: rejected without touching the buffers.
        let bad = Value::Tensor { dtype: DType::F32, shape: vec![1], bytes: vec![0; 4] };
        assert!(a.push(s(vec![("n".into(), Value::Int(1)), ("x".into(), bad)])).is_err());
        assert!(a.push(s(vec![("x".into(), t([0.0, 0.0])), ("n".into(), Value::Int(1 << 40))])).is_err());
        assert!(a.push(s(vec![("y".into(), Value::Int(1))])).is_err());
        let (batch, _) = a.take_batch().unwrap();
        assert_eq!(batch.num_rows(), 2);
        assert!(!batch.get("n").unwrap().is_valid(1));
    }

    #[test]
    fn numbers_go_in_only_where_they_fit() {
        let int = Column::new("n", DType::I32, &[]);
        let half = Column::new("h", DType::F16, &[]);
        let enc = |c: &Column, v| encode(c, v, None).map(|r| r.map(|(_, bytes)| bytes));
        assert_eq!(enc(&int, Value::Float(2.0)), Ok(Some(2i32.to_le_bytes().to_vec())));
        assert_eq!(enc(&int, Value::Float(2.5)), Err("2.5 does not fit i32: not an integer".into()));
        assert_eq!(enc(&int, Value::Int(1 << 40)), Err("1099511627776 does not fit i32: out of range".into()));
        assert_eq!(enc(&half, Value::Float(1e6)), Err("1000000.0 does not fit f16: would become infinite".into()));
        assert_eq!(enc(&half, Value::Int(2)), Ok(Some(half::f16::from_f32(2.0).to_le_bytes().to_vec())));
        let wide = Value::Tensor { dtype: DType::U64, shape: vec![], bytes: u64::MAX.to_le_bytes().to_vec() };
        let i64_column = Column::new("i", DType::I64, &[]);
        assert_eq!(enc(&i64_column, wide), Err("18446744073709551615 does not fit i64: out of range".into()));
    }
}
