//! Opened inputs: a [`Source`] per format, the work items its producer sends, and the
//! [`Decoder`] the decoder threads share. Formats that know their columns up front (image
//! folders, NumPy, JSON Lines) plan them here; the rest are inferred from the first samples.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tessera::{Column, DType, Dim, ImageLayout, Kind};

use crate::detect::{Format, media_files, table_files, tar_files};
use crate::error::{IngestError, IngestResult};
use crate::input::audio::AUDIO_EXTENSIONS;
use crate::input::columns::ColumnEdits;
use crate::input::imagefolder::{self, FolderColumns, ImageOptions, Media};
use crate::input::parquet::{self, ARROW_EXTENSIONS, PARQUET_EXTENSIONS};
use crate::input::video::VIDEO_EXTENSIONS;
use crate::input::wds::{self, RawSample, WdsOptions};
use crate::input::{self, Bad, Decoded, InferOptions, Sample, jsonl, media, npy};
use crate::progress::Total;

/// A source, opened and ready to produce work.
pub(crate) enum Source {
    Folder(imagefolder::Folder),
    Wds(Vec<PathBuf>),
    Npy(npy::NpySource),
    Jsonl(jsonl::Plan),
    Table(parquet::TableSource),
    Audio(Vec<PathBuf>),
    Video(Vec<PathBuf>),
}

/// One unit of work for the decoders.
pub(crate) enum Work {
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
pub(crate) struct Decoder {
    pub(crate) classes: Arc<[String]>,
    /// What a class folder's files are.
    pub(crate) media: Media,
    pub(crate) folder_columns: FolderColumns,
    pub(crate) wds: WdsOptions,
    pub(crate) jsonl: Option<jsonl::Plan>,
}

impl Decoder {
    pub(crate) fn decode(&self, work: Work) -> Vec<Decoded> {
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

/// What progress counts for a source.
pub(crate) fn progress_total(source: &Source) -> Total {
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
pub(crate) type Opened = (Source, Option<Vec<Column>>, Option<PathBuf>);

/// Opens the inputs as a source and plans its columns where the format knows them up front.
pub(crate) fn open_source(
    format: Format,
    inputs: &[PathBuf],
    image: &ImageOptions,
    folder_columns: &FolderColumns,
    infer: &InferOptions,
    edits: &ColumnEdits,
) -> IngestResult<Opened> {
    Ok(match format {
        Format::Imagefolder | Format::Auto => {
            let [root] = inputs else {
                return Err(IngestError::usage("an image-folder ingest takes one root folder"));
            };
            if !root.is_dir() {
                return Err(IngestError::not_found(format!("image folder {} does not exist", root.display())));
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
            let cols = src.columns(&edits.source_spec(&infer.ragged)).map_err(IngestError::usage)?;
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

/// Sends the source's work items in input order; stops when `send` returns false.
pub(crate) fn produce(source: Source, send: &mut dyn FnMut(Work) -> bool) {
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
