//! What an ingest can be asked to do: [`IngestOptions`], with the one validation every front
//! end gets (the CLI's flags and the Python keyword arguments map onto it).

use image::imageops::FilterType;
use tessera::{Compression, DType, IndexLayout};

pub use crate::detect::Format;
use crate::error::{IngestError, IngestResult};
use crate::input::columns::{ColumnEdits, RaggedSpec};
pub use crate::input::video::Sampling;

/// Resampling filters for resizing images and video frames (the `image` crate's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Filter {
    /// Nearest neighbour.
    Nearest,
    /// Bilinear, antialiased when shrinking (the default: torchvision's `antialias=True`
    /// bilinear is the common training preprocessing).
    #[default]
    Triangle,
    /// Bicubic (Catmull-Rom).
    CatmullRom,
    /// Gaussian.
    Gaussian,
    /// Lanczos with window 3.
    Lanczos3,
}

impl Filter {
    /// Every filter, by name.
    pub const ALL: [(Filter, &'static str); 5] = [
        (Self::Nearest, "nearest"),
        (Self::Triangle, "triangle"),
        (Self::CatmullRom, "catmull-rom"),
        (Self::Gaussian, "gaussian"),
        (Self::Lanczos3, "lanczos3"),
    ];

    /// The filter's name (`triangle`, …), as `--filter` and `filter=` take it.
    #[must_use]
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(f, _)| *f == self).map_or("triangle", |(_, n)| n)
    }

    /// What the filter is, in a few words (the CLI's `--help`).
    #[must_use]
    pub fn description(self) -> &'static str {
        match self {
            Self::Nearest => "Nearest neighbour",
            Self::Triangle => "Bilinear (antialiased when shrinking)",
            Self::CatmullRom => "Bicubic",
            Self::Gaussian => "Gaussian",
            Self::Lanczos3 => "Lanczos with window 3",
        }
    }

    pub(crate) fn image(self) -> FilterType {
        match self {
            Self::Nearest => FilterType::Nearest,
            Self::Triangle => FilterType::Triangle,
            Self::CatmullRom => FilterType::CatmullRom,
            Self::Gaussian => FilterType::Gaussian,
            Self::Lanczos3 => FilterType::Lanczos3,
        }
    }
}

impl std::str::FromStr for Filter {
    type Err = IngestError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.iter().find(|(_, n)| *n == s).map(|(f, _)| *f).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|(_, n)| *n).collect();
            IngestError::usage(format!("unknown filter {s:?} (expected one of {})", names.join(", ")))
        })
    }
}

/// How to ingest. `Default` is what `tessera ingest DATASET INPUT...` does without flags.
// Each bool is an independent switch a user sets; no two form a state machine.
#[allow(clippy::struct_excessive_bools)]
#[derive(Clone, Debug)]
pub struct IngestOptions {
    /// The input format; [`Format::Auto`] decides by extensions and folder layout.
    pub format: Format,
    /// Resize images and video frames (shorter side) and centre-crop to `(height, width)`.
    /// `None` keeps native sizes (a ragged column).
    pub size: Option<(u32, u32)>,
    /// The resampling filter for `size`.
    pub filter: Filter,
    /// Channels images are converted to: 1 (gray), 3 (RGB) or 4 (RGBA).
    pub channels: u8,
    /// Store image columns as their JPEG, PNG or WebP files, byte for byte (compression
    /// `encoded`); images that are resized or converted are stored decoded.
    pub keep_encoded: bool,
    /// Also store each image's file in a `bytes` column `<image column>_original`.
    pub keep_original: bool,
    /// The image column of an image folder.
    pub image_column: String,
    /// The label column of class folders (of images, audio or video).
    pub label_column: String,
    /// Resample every audio clip to this rate (Hz); `None` keeps the first clip's rate, and a
    /// clip at another rate is a usage error.
    pub sample_rate: Option<u32>,
    /// Downmix audio to one channel (`[samples]` instead of `[samples, channels]`).
    pub mono: bool,
    /// Audio sample type: [`DType::F32`] (full scale ±1.0) or [`DType::I16`].
    pub audio_dtype: DType,
    /// Which video frames are kept.
    pub sampling: Sampling,
    /// Keep at most this many frames of each video.
    pub max_frames: Option<u32>,
    /// Per-column compression (`*` for the columns not named); new datasets only.
    pub compress: Vec<(String, Compression)>,
    /// Dims stored ragged (`--ragged`); others are inferred from the first samples.
    pub ragged: RaggedSpec,
    /// Renames of input fields and kinds of columns (`--rename`, `--kind`).
    pub columns: ColumnEdits,
    /// The commit message; `None` for `ingest FORMAT from INPUTS`.
    pub message: Option<String>,
    /// The branch to append to (it must exist); `None` for `main`.
    pub branch: Option<String>,
    /// Skip inputs that cannot be decoded (listed in the report) instead of stopping.
    pub skip_bad: bool,
    /// Decoder threads; `None` for the number of CPUs.
    pub jobs: Option<usize>,
    /// Target raw size of one data file.
    pub file_bytes: u64,
    /// How a new dataset indexes its fragments; given when appending, `tree` converts a log.
    pub index: Option<IndexLayout>,
}

impl Default for IngestOptions {
    fn default() -> Self {
        Self {
            format: Format::Auto,
            size: None,
            filter: Filter::default(),
            channels: 3,
            keep_encoded: false,
            keep_original: false,
            image_column: "image".into(),
            label_column: "label".into(),
            sample_rate: None,
            mono: false,
            audio_dtype: DType::F32,
            sampling: Sampling::All,
            max_frames: None,
            compress: Vec::new(),
            ragged: RaggedSpec::default(),
            columns: ColumnEdits::default(),
            message: None,
            branch: None,
            skip_bad: false,
            jobs: None,
            file_bytes: 64 << 20,
            index: None,
        }
    }
}

/// The largest `size` side accepted.
const MAX_SIZE: u32 = 65_535;
/// The highest audio sample rate accepted (Hz).
const MAX_SAMPLE_RATE: u32 = 768_000;
/// The highest video frame rate accepted for [`Sampling::Fps`].
const MAX_FPS: f64 = 1000.0;

impl IngestOptions {
    /// Checks the options' ranges.
    ///
    /// # Errors
    /// A usage error naming the option.
    pub fn validate(&self) -> IngestResult<()> {
        let bad = |m: String| Err(IngestError::usage(m));
        if let Some((h, w)) = self.size
            && (h == 0 || w == 0 || h > MAX_SIZE || w > MAX_SIZE)
        {
            return bad(format!("size {h}x{w}: each side must be in 1..={MAX_SIZE}"));
        }
        if ![1, 3, 4].contains(&self.channels) {
            return bad(format!("channels must be 1, 3 or 4, not {}", self.channels));
        }
        if let Some(r) = self.sample_rate
            && !(1..=MAX_SAMPLE_RATE).contains(&r)
        {
            return bad(format!("sample rate {r} Hz: must be in 1..={MAX_SAMPLE_RATE}"));
        }
        if !matches!(self.audio_dtype, DType::F32 | DType::I16) {
            return bad(format!("audio samples are f32 or i16, not {}", self.audio_dtype));
        }
        match self.sampling {
            Sampling::Fps(f) if !(f > 0.0 && f <= MAX_FPS) => {
                return bad(format!("the frame rate must be a number in (0, {MAX_FPS}], not {f}"));
            }
            Sampling::Every(0) => return bad("every: keep every K-th frame with K >= 1".into()),
            _ => {}
        }
        if self.max_frames == Some(0) {
            return bad("max frames must be at least 1".into());
        }
        if self.jobs == Some(0) {
            return bad("jobs must be at least 1".into());
        }
        if self.file_bytes == 0 {
            return bad("the data file size must be at least 1 byte".into());
        }
        if self.image_column.is_empty() || self.label_column.is_empty() {
            return bad("column names cannot be empty".into());
        }
        Ok(())
    }
}
