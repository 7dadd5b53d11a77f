//! # Decode once: inputs into a Tessera dataset
//!
//! [`ingest`] reads image folders (class folders of images, audio or video), WebDataset
//! shards, NumPy arrays, JSON Lines, Parquet and Arrow IPC files, audio and video files,
//! decodes every sample once, and commits the rows as one new version of a dataset (created
//! when it does not exist). The `tessera ingest` command and the Python package's
//! `tessera.ingest` are front ends of this crate; a front end parses its own arguments into
//! [`IngestOptions`] and nothing else.
//!
//! | piece | module |
//! |---|---|
//! | the options and their validation | `options` |
//! | which format the inputs are; the target location | `detect` |
//! | the decoders, one per format; what they decode into; column inference | `input` |
//! | opened inputs, work items, the decoders' shared state | `source` |
//! | producer → decoder threads → in-order consumer | `pipeline` |
//! | the columns: renames, sidecar, kinds, compression; append checks | `plan` |
//! | samples into column buffers, checked whole (`tessera::cast`, the value rules) | `assemble` |
//! | schema inference, the writer, the one commit, clean-up on failure | `sink` |
//!
//! **Nothing is committed unless everything was.** Rows go to the reference's
//! `DatasetWriter` as batches fill, and the commit comes after the last input. A dataset the
//! ingest created is removed when it fails; an append's data files stay unreferenced until
//! `tessera gc`. Every value goes through one row assembler: a number that does not fit its
//! column (out of range, a fraction into an integer, a finite value that would become
//! infinite) makes its input bad.
//!
//! ```no_run
//! use tessera_ingest::{IngestOptions, Silent, ingest};
//!
//! let options = IngestOptions { size: Some((224, 224)), ..IngestOptions::default() };
//! let report = ingest("./imagenet.tessera", &["./imagenet/train".into()], &options, &mut Silent)?;
//! println!("{} rows as version {}", report.rows, report.version);
//! # Ok::<(), tessera_ingest::IngestError>(())
//! ```

mod assemble;
mod detect;
mod error;
mod input;
mod options;
mod pipeline;
mod plan;
mod progress;
mod report;
mod sink;
mod source;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tessera::{Column, Compression, Dataset, Limits, WriteOptions};

pub use error::{IngestError, IngestResult};
pub use input::columns::{ColumnEdits, RaggedSpec};
pub use options::{Filter, Format, IngestOptions, Sampling};
pub use progress::{Observer, Silent, Total};
pub use report::{IngestReport, Skipped};

use crate::detect::{detect, open_target_store};
use crate::input::InferOptions;
use crate::input::audio::AudioOptions;
use crate::input::imagefolder::{FolderColumns, ImageOptions, Media};
use crate::input::video::VideoOptions;
use crate::input::wds::WdsOptions;
use crate::plan::check_classes;
use crate::sink::{ColumnPlan, Place, Sink};
use crate::source::{Decoder, Source, open_source, produce, progress_total};

/// What `tessera export` writes for ingest to read back: the schema sidecar, NumPy headers
/// and WebDataset member names.
pub mod export {
    pub use crate::input::npy::{descr as npy_descr, header as npy_header};
    pub use crate::input::wds::canonical_name as wds_column_name;
    pub use crate::input::{SIDECAR, write_sidecar};
}

/// Ingests `inputs` into the dataset at `location` (a local path or an object-store URL):
/// appends a version to the branch, or creates the dataset (an empty version 1, the data as
/// version 2).
///
/// # Errors
/// [`IngestError`], whose class says what kind: `usage` (bad options, a value that does not
/// fit the schema, inputs that do not match an existing dataset), `not_found` (a missing
/// input, branch, or no samples at all), `malformed` (an input that cannot be decoded,
/// unless `skip_bad`), `conflict`, `io`. Nothing is committed then; the notes say what was
/// left behind.
pub fn ingest(
    location: &str,
    inputs: &[PathBuf],
    options: &IngestOptions,
    observer: &mut dyn Observer,
) -> IngestResult<IngestReport> {
    options.validate()?;
    if inputs.is_empty() {
        return Err(IngestError::usage("no inputs given"));
    }
    let format = if options.format == Format::Auto { detect(inputs)? } else { options.format };
    let jobs =
        options.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, usize::from)).clamp(1, 256);
    let branch = options.branch.clone().unwrap_or_else(|| "main".to_string());
    let edits = &options.columns;
    let infer = InferOptions { fixed_images: options.size.is_some(), ragged: options.ragged.clone() };
    let keep_files = options.keep_encoded || options.compress.iter().any(|(_, z)| *z == Compression::Encoded);
    let image =
        ImageOptions { size: options.size, filter: options.filter.image(), channels: options.channels, keep_files };
    let folder_columns = FolderColumns {
        image: options.image_column.clone(),
        label: options.label_column.clone(),
        encoded: options.keep_original.then(|| format!("{}_original", options.image_column)),
    };

    let (source, planned, sidecar_dir) = open_source(format, inputs, &image, &folder_columns, &infer, edits)?;
    // The sidecar names the columns as the input files do: the renames apply to it too.
    let sidecar = match &sidecar_dir {
        Some(d) => input::read_sidecar(d)?.map(|cols| {
            cols.into_iter().map(|c| Column { name: edits.name(&c.name).to_string(), ..c }).collect::<Vec<_>>()
        }),
        None => None,
    };

    // The target: an existing dataset to append to, or a location to create one at. A local
    // folder this ingest makes is removed again if it fails.
    let fresh_dir = !location.contains("://") && !Path::new(location).exists();
    let store = open_target_store(location)?;
    let base = match tessera::dataset::latest_version(&store, &branch) {
        Ok(_) => Some(Dataset::open_at(&store, &tessera::At::Branch(branch.clone()), Limits::default())?),
        Err(e) if e.class() == tessera::ErrorClass::NotFound => {
            if branch != "main" {
                return Err(IngestError::not_found(format!(
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
    if base.is_some() && !options.compress.is_empty() {
        observer.message("note: compression is ignored when appending (it is part of the existing schema)");
    }

    observer.start(progress_total(&source));
    // A class folder's classes, what its files are, how many others it has, and its format.
    let (classes, media, ignored, format_name): (Arc<[String]>, _, _, _) = match &source {
        Source::Folder(f) => (f.classes.clone(), f.media, (f.ignored.len(), f.media.noun()), f.media.format_name()),
        _ => (Arc::from(Vec::new()), Media::Image, (0, "images"), format.name()),
    };
    let decoder = Decoder {
        classes,
        media,
        folder_columns,
        wds: WdsOptions {
            image,
            keep_original: options.keep_original,
            audio: AudioOptions { sample_rate: options.sample_rate, mono: options.mono, dtype: options.audio_dtype },
            video: VideoOptions {
                sampling: options.sampling,
                max_frames: options.max_frames,
                size: image.size,
                filter: image.filter,
            },
        },
        jsonl: match &source {
            Source::Jsonl(p) => Some(p.clone()),
            _ => None,
        },
    };
    let write = WriteOptions {
        target_file_bytes: options.file_bytes,
        index: options.index.unwrap_or_default(),
        ..WriteOptions::default()
    };
    let place = Place { location: location.to_string(), store, base, fresh_dir };
    let plan = ColumnPlan {
        sidecar,
        compress: options.compress.clone(),
        keep_encoded: options.keep_encoded,
        edits: edits.clone(),
        infer,
    };
    let mut sink = Sink::new(place, plan, write, options.skip_bad, observer);
    if let Some(p) = planned {
        sink.start_planned(p)?;
    }
    let producer = move |send: &mut dyn FnMut(source::Work) -> bool| produce(source, send);
    let result = pipeline::pipeline(jobs, producer, &decoder, &mut |out| sink.consume(out));
    sink.decoded();
    if let Err(e) = result {
        return Err(sink.abort_notes(e));
    }
    let message = options.message.clone().unwrap_or_else(|| {
        let inputs: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
        format!("ingest {format_name} from {}", inputs.join(" "))
    });
    sink.finish(&message, format_name, ignored)
}
