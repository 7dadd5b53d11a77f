//! Class folders: `ROOT/<class>/**/<file>`, one class per sub-folder, class ids in sorted
//! folder-name order. Images give torchvision's `ImageFolder` layout; a folder without images
//! whose classes hold audio clips (Speech Commands: `yes/*.wav`, `no/*.wav`) or videos gives
//! the same class labels for those (decoded by `media.rs`). JPEG, PNG and WebP files are
//! decoded once, converted to the requested channel count, optionally resized (shorter side)
//! and center-cropped to a fixed size.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use image::imageops::FilterType;
use image::{DynamicImage, ImageFormat};

use super::audio::AUDIO_EXTENSIONS;
use super::video::VIDEO_EXTENSIONS;
use super::{Bad, Decoded, ImageValue, Sample, Value, extension};
use crate::error::{IngestError, IngestResult};

/// Extensions (lower case) decoded as images.
pub(crate) const IMAGE_EXTENSIONS: [&str; 4] = ["jpg", "jpeg", "png", "webp"];

/// How images are decoded and shaped.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ImageOptions {
    /// Target `(height, width)`: resize the shorter side, then center-crop. `None` keeps the
    /// native size.
    pub(crate) size: Option<(u32, u32)>,
    /// Resampling filter for resizing.
    pub(crate) filter: FilterType,
    /// Channels to convert to: 1 (luma), 3 (RGB) or 4 (RGBA).
    pub(crate) channels: u8,
    /// Keep the file of an image whose pixels are its exact decode (for encoded columns).
    pub(crate) keep_files: bool,
}

/// Decodes a JPEG, PNG or WebP image and shapes it as `opts` asks.
///
/// # Errors
/// A message for unknown formats and decoder failures (corrupt files).
pub(crate) fn decode_image(bytes: &[u8], opts: &ImageOptions) -> Result<ImageValue, String> {
    let reader = image::ImageReader::new(Cursor::new(bytes)).with_guessed_format().map_err(|e| e.to_string())?;
    match reader.format() {
        Some(ImageFormat::Jpeg | ImageFormat::Png | ImageFormat::WebP) => {}
        Some(f) => return Err(format!("unsupported image format {f:?} (JPEG, PNG and WebP are)")),
        None => return Err("not a JPEG, PNG or WebP image".into()),
    }
    let img = reader.decode().map_err(|e| format!("cannot decode image: {e}"))?;
    // The file is the stored form only if the pixels are exactly its decode [CMP-07].
    let native = matches!(
        (img.color(), opts.channels),
        (image::ColorType::L8, 1) | (image::ColorType::Rgb8, 3) | (image::ColorType::Rgba8, 4)
    );
    let file = (opts.keep_files && native && opts.size.is_none()).then(|| Arc::from(bytes));
    // Convert first: resizing fewer (or 8-bit) channels is cheaper.
    let img = match opts.channels {
        1 => DynamicImage::ImageLuma8(img.into_luma8()),
        4 => DynamicImage::ImageRgba8(img.into_rgba8()),
        _ => DynamicImage::ImageRgb8(img.into_rgb8()),
    };
    let img = match opts.size {
        Some((h, w)) => resize_fill(img, w, h, opts.filter),
        None => img,
    };
    let (width, height) = (img.width(), img.height());
    let pixels = match img {
        DynamicImage::ImageLuma8(b) => b.into_raw(),
        DynamicImage::ImageRgba8(b) => b.into_raw(),
        DynamicImage::ImageRgb8(b) => b.into_raw(),
        other => other.into_rgb8().into_raw(),
    };
    Ok(ImageValue { height, width, channels: opts.channels, pixels, file })
}

/// Resizes so the image covers `tw × th` (shorter side to target), then crops the center.
pub(crate) fn resize_fill(img: DynamicImage, tw: u32, th: u32, filter: FilterType) -> DynamicImage {
    let (w, h) = (img.width(), img.height());
    if (w, h) == (tw, th) {
        return img;
    }
    let scale = f64::max(f64::from(tw) / f64::from(w), f64::from(th) / f64::from(h));
    let nw = ((f64::from(w) * scale).round() as u32).max(tw);
    let nh = ((f64::from(h) * scale).round() as u32).max(th);
    let resized = if (nw, nh) == (w, h) { img } else { img.resize_exact(nw, nh, filter) };
    resized.crop_imm((nw - tw) / 2, (nh - th) / 2, tw, th)
}

/// What the files of a class folder are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Media {
    /// Images (JPEG, PNG, WebP).
    Image,
    /// Audio clips.
    Audio,
    /// Videos.
    Video,
}

impl Media {
    /// The media a file extension (lower case) names.
    fn of(ext: &str) -> Option<Self> {
        if IMAGE_EXTENSIONS.contains(&ext) {
            Some(Self::Image)
        } else if AUDIO_EXTENSIONS.contains(&ext) {
            Some(Self::Audio)
        } else if VIDEO_EXTENSIONS.contains(&ext) {
            Some(Self::Video)
        } else {
            None
        }
    }

    /// The plural noun of the files (`images`, `clips`, `videos`).
    pub(crate) fn noun(self) -> &'static str {
        match self {
            Self::Image => "images",
            Self::Audio => "clips",
            Self::Video => "videos",
        }
    }

    /// The ingest format name (`imagefolder`, `audiofolder`, `videofolder`).
    pub(crate) fn format_name(self) -> &'static str {
        match self {
            Self::Image => "imagefolder",
            Self::Audio => "audiofolder",
            Self::Video => "videofolder",
        }
    }
}

/// A scanned class folder.
#[derive(Debug)]
pub(crate) struct Folder {
    /// Class names (sorted sub-folder names).
    pub(crate) classes: Arc<[String]>,
    /// What the samples are: images when there are any, else audio clips, else videos.
    pub(crate) media: Media,
    /// The sample files and their class index, in class then path order.
    pub(crate) files: Vec<(PathBuf, usize)>,
    /// Files skipped because they are not of `media`.
    pub(crate) ignored: Vec<PathBuf>,
}

/// Scans `root`: each non-hidden sub-folder is a class; files anywhere below it are its
/// samples, all of one [`Media`] (images first, as before clips and videos were read). Files
/// directly in `root` are ignored.
///
/// # Errors
/// Not found for a missing root; usage error when there are no class folders.
pub(crate) fn scan(root: &Path) -> IngestResult<Folder> {
    let mut classes = Vec::new();
    for entry in std::fs::read_dir(root).map_err(|e| IngestError::io(root, &e))? {
        let entry = entry.map_err(|e| IngestError::io(root, &e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(IngestError::usage(format!("{}: folder name is not UTF-8", entry.path().display())));
        };
        if name.starts_with('.') || !entry.path().is_dir() {
            continue;
        }
        classes.push(name.to_string());
    }
    classes.sort();
    if classes.is_empty() {
        return Err(IngestError::usage(format!(
            "{}: no class sub-folders (expected ROOT/<class>/<image, audio or video files>)",
            root.display()
        )));
    }
    let mut found = Vec::new();
    for (i, class) in classes.iter().enumerate() {
        let mut in_class = Vec::new();
        walk(&root.join(class), &mut in_class)?;
        in_class.sort();
        found.extend(in_class.into_iter().map(|(p, _size)| (Media::of(&extension(&p)), p, i)));
    }
    let media = [Media::Image, Media::Audio, Media::Video]
        .into_iter()
        .find(|m| found.iter().any(|(f, _, _)| *f == Some(*m)))
        .unwrap_or(Media::Image);
    let (mut files, mut ignored) = (Vec::new(), Vec::new());
    for (m, p, i) in found {
        if m == Some(media) {
            files.push((p, i));
        } else {
            ignored.push(p);
        }
    }
    Ok(Folder { classes: classes.into(), media, files, ignored })
}

/// Collects the regular files below `dir` (skipping hidden entries) with their sizes.
fn walk(dir: &Path, out: &mut Vec<(PathBuf, u64)>) -> IngestResult<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| IngestError::io(dir, &e))? {
        let entry = entry.map_err(|e| IngestError::io(dir, &e))?;
        if entry.file_name().to_str().is_none_or(|n| n.starts_with('.')) {
            continue;
        }
        let path = entry.path();
        let meta = std::fs::metadata(&path).map_err(|e| IngestError::io(&path, &e))?;
        if meta.is_dir() {
            walk(&path, out)?;
        } else if meta.is_file() {
            out.push((path, meta.len()));
        }
    }
    Ok(())
}

/// Column names an image-folder sample uses.
#[derive(Clone, Debug)]
pub(crate) struct FolderColumns {
    /// The image column.
    pub(crate) image: String,
    /// The label column.
    pub(crate) label: String,
    /// The column of the original encoded bytes, when kept.
    pub(crate) encoded: Option<String>,
}

/// Reads and decodes one image file into a sample.
pub(crate) fn decode_file(
    path: &Path,
    class: usize,
    classes: &Arc<[String]>,
    opts: &ImageOptions,
    cols: &FolderColumns,
) -> Decoded {
    let origin = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| Bad::new(&origin, e.to_string()))?;
    let img = decode_image(&bytes, opts).map_err(|e| Bad::new(&origin, e))?;
    let input_bytes = bytes.len() as u64;
    let mut fields = vec![
        (cols.image.clone(), Value::Image(img)),
        (cols.label.clone(), Value::Class { index: class, names: classes.clone() }),
    ];
    if let Some(enc) = &cols.encoded {
        fields.push((enc.clone(), Value::Bytes(bytes)));
    }
    Ok(Sample { origin, fields, input_bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resize_fill_covers_then_crops() {
        let img = DynamicImage::ImageRgb8(image::RgbImage::from_fn(40, 20, |x, y| image::Rgb([x as u8, y as u8, 0])));
        let out = resize_fill(img, 10, 10, FilterType::Nearest);
        assert_eq!((out.width(), out.height()), (10, 10));
        // 40x20 -> 20x10, then the middle 10 columns: x = 5 of the resized image, which
        // samples source column 10 or 11.
        let px = out.into_rgb8().get_pixel(0, 0).0;
        assert!((10..=11).contains(&px[0]), "{px:?}");
    }

    #[test]
    fn rejects_garbage() {
        let opts = ImageOptions { size: None, filter: FilterType::Triangle, channels: 3, keep_files: false };
        assert!(decode_image(b"not an image", &opts).is_err());
        // A truncated PNG: signature only.
        assert!(decode_image(&[0x89, b'P', b'N', b'G', 13, 10, 26, 10], &opts).is_err());
    }
}
