//! Which inputs are which: the format of a list of paths (by extension and folder layout),
//! the files a folder holds, and the target location (never an unrelated folder).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use tessera::Store;

use crate::error::{IngestError, IngestResult};
use crate::input;
use crate::input::audio::AUDIO_EXTENSIONS;
use crate::input::parquet::{ARROW_EXTENSIONS, PARQUET_EXTENSIONS};
use crate::input::video::VIDEO_EXTENSIONS;

/// Input formats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Format {
    /// Decide from the inputs.
    #[default]
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

impl Format {
    /// Every format, in the order `--help` lists them.
    pub const ALL: [Format; 9] = [
        Self::Auto,
        Self::Imagefolder,
        Self::Wds,
        Self::Npy,
        Self::Jsonl,
        Self::Parquet,
        Self::Arrow,
        Self::Audio,
        Self::Video,
    ];

    /// What the format reads, in a few words (the CLI's `--help`).
    #[must_use]
    pub fn description(self) -> &'static str {
        match self {
            Self::Auto => "Decide from the inputs",
            Self::Imagefolder => "`ROOT/<class>/**/<file>`: class folders of images, audio or video",
            Self::Wds => "WebDataset .tar shards",
            Self::Npy => "NumPy .npy / .npz",
            Self::Jsonl => "JSON Lines",
            Self::Parquet => "Parquet files (.parquet, .pq), e.g. a Hugging Face dataset's",
            Self::Arrow => "Arrow IPC files, file or stream format (.arrow, .arrows, .feather, .ipc)",
            Self::Audio => "Audio files (wav, flac, mp3, ogg, m4a) or folders of them",
            Self::Video => "Video files (mp4, mkv, webm, mov, avi) or folders of them",
        }
    }

    /// The format's name (`imagefolder`, `wds`, …), as `--format` and `format=` take it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Imagefolder => "imagefolder",
            Self::Wds => "wds",
            Self::Npy => "npy",
            Self::Jsonl => "jsonl",
            Self::Parquet => "parquet",
            Self::Arrow => "arrow",
            Self::Audio => "audio",
            Self::Video => "video",
        }
    }
}

impl std::str::FromStr for Format {
    type Err = IngestError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|f| f.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|f| f.name()).collect();
            IngestError::usage(format!("unknown input format {s:?} (expected one of {})", names.join(", ")))
        })
    }
}

/// Decides the format of the inputs.
pub(crate) fn detect(inputs: &[PathBuf]) -> IngestResult<Format> {
    let mut kinds = HashSet::new();
    for p in inputs {
        if !p.exists() {
            return Err(IngestError::not_found(format!("input {} does not exist", p.display())));
        }
        if p.is_dir() {
            let entries: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| IngestError::io(p, &e))?
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
                return Err(IngestError::usage(format!(
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
                _ => {
                    return Err(IngestError::usage(format!(
                        "cannot tell the format of {} (use --format)",
                        p.display()
                    )));
                }
            };
        }
    }
    match kinds.len() {
        1 => Ok(kinds.into_iter().next().unwrap_or(Format::Auto)),
        _ => Err(IngestError::usage("inputs mix formats; ingest one format at a time")),
    }
}

/// Expands folders of shards into their `.tar` files.
pub(crate) fn tar_files(inputs: &[PathBuf]) -> IngestResult<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| IngestError::io(p, &e))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|f| input::extension(f) == "tar")
                .collect();
            found.sort();
            out.extend(found);
        } else if p.exists() {
            out.push(p.clone());
        } else {
            return Err(IngestError::not_found(format!("input {} does not exist", p.display())));
        }
    }
    if out.is_empty() {
        return Err(IngestError::not_found("no .tar shards in the inputs"));
    }
    Ok(out)
}

/// The media files of the inputs (folders expanded by extension, in name order).
pub(crate) fn media_files(inputs: &[PathBuf], extensions: &[&str]) -> IngestResult<Vec<PathBuf>> {
    expanded(inputs, extensions, &extensions.join("/"))
}

/// The table files of the inputs (folders expanded by extension, in name order).
pub(crate) fn table_files(inputs: &[PathBuf], extensions: &[&str]) -> IngestResult<Vec<PathBuf>> {
    expanded(inputs, extensions, &format!(".{}", extensions.join("/.")))
}

/// The files of the inputs with one of `extensions` (folders expanded, in name order); none
/// is a `not_found` error naming them as `named`.
fn expanded(inputs: &[PathBuf], extensions: &[&str], named: &str) -> IngestResult<Vec<PathBuf>> {
    if let Some(p) = inputs.iter().find(|p| !p.exists()) {
        return Err(IngestError::not_found(format!("input {} does not exist", p.display())));
    }
    let files = input::expand_inputs(inputs, extensions)?;
    if files.is_empty() {
        return Err(IngestError::not_found(format!("no {named} files in the inputs")));
    }
    Ok(files)
}

/// Removes `dir` and the folders under it if they hold no file (what a failed ingest into a
/// new local folder leaves); anything else stays.
pub(crate) fn remove_empty_dirs(dir: &Path) {
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
pub(crate) fn open_target_store(location: &str) -> IngestResult<Store> {
    if !location.contains("://") {
        let p = Path::new(location);
        if p.is_file() {
            return Err(IngestError::usage(format!("{location} is a file, not a dataset folder")));
        }
        if p.is_dir()
            && !p.join("branches").is_dir()
            && std::fs::read_dir(p).map_err(|e| IngestError::io(p, &e))?.next().is_some()
        {
            return Err(IngestError::usage(format!(
                "{location} is a non-empty folder that is not a Tessera dataset (is the dataset argument first?)"
            )));
        }
    }
    Ok(Store::open(location)?)
}
