//! Augmentation on the loader's filling threads: per-column pipelines of crops, flips,
//! resizes and conversions that write each row straight into its batch slot.
//!
//! A pipeline is checked against its column when the loader opens (a transform that cannot
//! apply is a [`LoaderError::Config`], never a failure mid-epoch) and must end in a shape
//! that does not depend on the row, so a ragged image column comes out as a dense
//! `[B, 3, 224, 224]` batch. Each row is read once: crops, flips and strides only change
//! how the row is viewed (`view.rs`), a resize resamples it once (`resample.rs`), and one pass
//! writes the slot in the output type and axis order. The stored row itself lands in a
//! staging buffer of the worker's batch (not in the adapter's tensor), so the batch buffer
//! holds only output.
//!
//! **Deterministic.** Op `i` of a row draws from a stream keyed by (seed, epoch, row id,
//! `i`) (`rng.rs`): results depend on nothing else, not on workers, ranks or resumption, and
//! the arithmetic is scalar `f32` in a fixed order, so every CPU computes the same bytes.
//! Random choices follow torchvision's definitions (`RandomResizedCrop`'s ten tries and
//! its fallback, `CenterCrop`'s rounding and padding), with logarithms and exponentials from
//! `libm` rather than the platform's maths library.
//!
//! Image ops act on the axes `[…, H, W, C]` of a row (`[H, W]` for two-dimensional rows;
//! leading axes, such as a video's frames, share one draw). Temporal ops act on axis 0.

mod pixels;
mod resample;
mod rng;
mod view;

use tessera::{Column, DType, Dim, ImageLayout, Kind};

use crate::assemble::{ColumnLayout, Elem};
use crate::batch::{HostColumn, HostLayout};
use crate::error::{LoaderError, Result};
use pixels::{Le, Out, OutBf16, OutF16, OutF32, OutU8, Pixels, U8s, put};
use resample::{Grid, Resampler};
use rng::OpRng;
use tessera::simd::Level;
use view::View;

/// The size a [`Transform::Resize`] produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeTo {
    /// Exactly `height × width`.
    Exact {
        /// Output height.
        height: usize,
        /// Output width.
        width: usize,
    },
    /// The shorter side becomes this long, the aspect ratio kept (the longer side
    /// truncated, as torchvision's `Resize(int)`). The shape then depends on the row: a
    /// fixed-size crop must follow.
    ShorterSide(usize),
}

/// Axis order of a normalised image.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ChannelOrder {
    /// `[…, H, W, C]`, as stored.
    #[default]
    Hwc,
    /// `[…, C, H, W]` (torch's convention; two-dimensional rows gain a channel axis of 1).
    Chw,
}

/// One augmentation op. Random ops draw from (seed, epoch, row id, op position).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Transform {
    /// torchvision's `RandomResizedCrop`: a crop of a random area fraction in `scale` and
    /// aspect ratio (log-uniform) in `ratio`, resized to `height × width` (antialiased
    /// bilinear).
    RandomResizedCrop {
        /// Output height.
        height: usize,
        /// Output width.
        width: usize,
        /// Area fraction range, within `(0, 1]`-ish (torchvision's default `(0.08, 1.0)`).
        scale: (f64, f64),
        /// Aspect ratio range (width / height; default `(3/4, 4/3)`).
        ratio: (f64, f64),
    },
    /// The centre `height × width`; zero padded where the image is smaller.
    CenterCrop {
        /// Output height.
        height: usize,
        /// Output width.
        width: usize,
    },
    /// Antialiased bilinear resize.
    Resize(ResizeTo),
    /// Mirrors left-right with probability `p`.
    HorizontalFlip {
        /// Probability in `[0, 1]`.
        p: f64,
    },
    /// Mirrors top-bottom with probability `p`.
    VerticalFlip {
        /// Probability in `[0, 1]`.
        p: f64,
    },
    /// Audio or video: `length` positions of axis 0, every `stride`-th from a random start;
    /// zero padded at the end when the row is shorter.
    RandomTimeCrop {
        /// Output length along axis 0.
        length: usize,
        /// Step between kept positions (≥ 1).
        stride: usize,
    },
    /// Any column: the first `shape[k]` positions of every axis, zero padded where the row
    /// is shorter (what makes a ragged column batchable at a fixed shape).
    CropPad {
        /// Output shape, one length per axis.
        shape: Vec<usize>,
    },
    /// `(x · s − mean[c]) / std[c]` in a floating type, where `s` is 1/255 for `u8` rows
    /// (torchvision's `ToDtype(scale=True)` then `Normalize`) and 1 otherwise. Last op only.
    Normalize {
        /// Per channel (or one value for all).
        mean: Vec<f32>,
        /// Per channel (or one value for all); non-zero.
        std: Vec<f32>,
        /// `F32`, `F16`, `Bf16` or `F64`.
        dtype: Elem,
        /// Axis order of the output.
        layout: ChannelOrder,
    },
    /// Converts elements (round half to even and saturate into integers); with `scale`,
    /// `u8` → float divides by 255 and float → `u8` multiplies by 255. Last op only.
    ToDtype {
        /// Output element type.
        dtype: Elem,
        /// Rescale between `u8` and floating ranges.
        scale: bool,
    },
}

impl Transform {
    /// `RandomResizedCrop(size)` with torchvision's defaults: scale `(0.08, 1)`, ratio
    /// `(3/4, 4/3)`.
    #[must_use]
    pub fn random_resized_crop(height: usize, width: usize) -> Self {
        Self::RandomResizedCrop { height, width, scale: (0.08, 1.0), ratio: (3.0 / 4.0, 4.0 / 3.0) }
    }

    /// `Normalize` with `ImageNet`'s mean and std, to `dtype` in CHW order.
    #[must_use]
    pub fn imagenet_normalize(dtype: Elem) -> Self {
        Self::Normalize {
            mean: vec![0.485, 0.456, 0.406],
            std: vec![0.229, 0.224, 0.225],
            dtype,
            layout: ChannelOrder::Chw,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Self::RandomResizedCrop { .. } => "RandomResizedCrop",
            Self::CenterCrop { .. } => "CenterCrop",
            Self::Resize(_) => "Resize",
            Self::HorizontalFlip { .. } => "HorizontalFlip",
            Self::VerticalFlip { .. } => "VerticalFlip",
            Self::RandomTimeCrop { .. } => "RandomTimeCrop",
            Self::CropPad { .. } => "CropPad",
            Self::Normalize { .. } => "Normalize",
            Self::ToDtype { .. } => "ToDtype",
        }
    }

    fn is_image_op(&self) -> bool {
        matches!(
            self,
            Self::RandomResizedCrop { .. }
                | Self::CenterCrop { .. }
                | Self::Resize(_)
                | Self::HorizontalFlip { .. }
                | Self::VerticalFlip { .. }
        )
    }
}

/// A column's ops, as [`LoaderConfig::with_transform`](crate::LoaderConfig::with_transform)
/// records them.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnTransform {
    /// A projected column.
    pub column: String,
    /// Applied in order.
    pub ops: Vec<Transform>,
}

/// The largest number of values one resize may produce for one row (1 GiB of `f32`).
const MAX_RESIZE_VALUES: usize = 1 << 28;

/// What the last pass writes.
#[derive(Clone, Debug, PartialEq)]
enum Output {
    /// The stored elements' bytes as they are (no resize, no conversion).
    Raw,
    /// `v · a[c] + b[c]` in `elem` (`a`, `b` one value per channel, or one for all).
    Values { elem: Elem, a: Vec<f32>, b: Vec<f32> },
}

/// A checked pipeline for one column.
#[derive(Clone, Debug)]
pub(crate) struct Pipeline {
    column: String,
    ops: Vec<Transform>,
    /// The stored element type, as the staging buffer holds it.
    elem: Elem,
    /// Image axes `(h, w, c)` of a row.
    image: Option<(usize, usize, Option<usize>)>,
    /// Output axis order (view axes).
    perm: Vec<usize>,
    output: Output,
    /// Output element type.
    pub(crate) out_elem: Elem,
    /// Per-row output dims.
    pub(crate) out_dims: Vec<u64>,
    /// Output bytes per row.
    pub(crate) row_bytes: usize,
}

fn usage(column: &str, op: &Transform, why: impl std::fmt::Display) -> LoaderError {
    LoaderError::config(format!("transform {} on column {column:?}: {why}", op.name()))
}

fn is_float(e: Elem) -> bool {
    matches!(e, Elem::F16 | Elem::Bf16 | Elem::F32 | Elem::F64)
}

impl Pipeline {
    /// Checks `ops` against `column` (whose stored rows arrive as `elem`) and works out the
    /// output's type and per-row shape.
    ///
    /// # Errors
    /// [`LoaderError::Config`] naming the op and the reason.
    #[allow(clippy::too_many_lines, clippy::many_single_char_names)] // one pass over the ops; each arm is short
    pub(crate) fn new(column: &Column, elem: Elem, ops: &[Transform]) -> Result<Self> {
        let name = column.name.as_str();
        let first =
            ops.first().ok_or_else(|| LoaderError::config(format!("column {name:?}: an empty transform list")))?;
        if matches!(column.dtype, DType::Utf8 | DType::Bytes) {
            return Err(usage(name, first, "text and bytes columns cannot be transformed"));
        }
        let rank = column.shape.len();
        let mut dims: Vec<Option<u64>> =
            column.shape.iter().map(|d| if let Dim::Fixed(x) = d { Some(*x) } else { None }).collect();
        let image = if rank >= 3 {
            Some((rank - 3, rank - 2, Some(rank - 1)))
        } else if rank == 2 {
            Some((0, 1, None))
        } else {
            None
        };
        let channels = match image {
            Some((_, _, Some(c))) => dims[c],
            _ => Some(1),
        };
        let mut resampled = false;
        let mut output = Output::Raw;
        let mut out_elem = elem;
        let mut perm: Vec<usize> = (0..rank).collect();
        let mut extra_channel = false;
        for (i, op) in ops.iter().enumerate() {
            let fail = |why: &str| Err(usage(name, op, why));
            if matches!(op, Transform::Normalize { .. } | Transform::ToDtype { .. }) && i + 1 != ops.len() {
                return fail("must be the last op");
            }
            if op.is_image_op() {
                let Some((h, w, c)) = image else {
                    return fail("image ops need rows of rank 2 ([H, W]) or more ([…, H, W, C])");
                };
                if matches!(column.kind, Kind::Image { layout: ImageLayout::Chw }) {
                    return fail("the column stores CHW images; image ops read […, H, W, C] or [H, W]");
                }
                if c.is_some() && channels.is_none() {
                    return fail("the channel axis (the last) must have a fixed size");
                }
                if matches!(op, Transform::RandomResizedCrop { .. } | Transform::Resize(_)) {
                    if column.dtype == DType::Bool {
                        return fail("bool rows cannot be resampled");
                    }
                    resampled = true;
                }
                match op {
                    Transform::RandomResizedCrop { height, width, scale, ratio } => {
                        let ok = |r: (f64, f64)| r.0.is_finite() && r.1.is_finite() && 0.0 < r.0 && r.0 <= r.1;
                        if !ok(*scale) || !ok(*ratio) {
                            return fail("scale and ratio must be finite ranges (lo, hi) with 0 < lo ≤ hi");
                        }
                        (dims[h], dims[w]) = (Some(*height as u64), Some(*width as u64));
                    }
                    Transform::CenterCrop { height, width } | Transform::Resize(ResizeTo::Exact { height, width }) => {
                        (dims[h], dims[w]) = (Some(*height as u64), Some(*width as u64));
                    }
                    Transform::Resize(ResizeTo::ShorterSide(s)) => {
                        if *s == 0 {
                            return fail("the shorter side must be at least 1");
                        }
                        (dims[h], dims[w]) = (None, None);
                    }
                    Transform::HorizontalFlip { p } | Transform::VerticalFlip { p } if !(0.0..=1.0).contains(p) => {
                        return fail("p must be within [0, 1]");
                    }
                    _ => {}
                }
                continue;
            }
            match op {
                Transform::RandomTimeCrop { length, stride } => {
                    if rank == 0 {
                        return fail("scalar rows have no time axis");
                    }
                    if *stride == 0 {
                        return fail("stride must be at least 1");
                    }
                    dims[0] = Some(*length as u64);
                }
                Transform::CropPad { shape } => {
                    if shape.len() != rank {
                        return fail(&format!("the shape has {} axes, the rows {rank}", shape.len()));
                    }
                    dims = shape.iter().map(|&d| Some(d as u64)).collect();
                }
                Transform::Normalize { mean, std, dtype, layout } => {
                    if !is_float(*dtype) {
                        return fail("the output type must be f32, f16, bf16 or f64");
                    }
                    if column.dtype == DType::Bool {
                        return fail("bool rows cannot be normalised");
                    }
                    let c = channels.unwrap_or(0) as usize;
                    for (what, v) in [("mean", mean), ("std", std)] {
                        if v.len() != 1 && v.len() != c {
                            return fail(&format!("{what} has {} values for {c} channels", v.len()));
                        }
                        if v.iter().any(|x| !x.is_finite()) {
                            return fail(&format!("{what} must be finite"));
                        }
                    }
                    if std.contains(&0.0) {
                        return fail("std must be non-zero");
                    }
                    let s = if elem == Elem::U8 { 1.0 / 255.0 } else { 1.0 };
                    let n = mean.len().max(std.len());
                    let at = |v: &[f32], k: usize| v[if v.len() == 1 { 0 } else { k }];
                    let a = (0..n).map(|k| s / at(std, k)).collect();
                    let b = (0..n).map(|k| -at(mean, k) / at(std, k)).collect();
                    output = Output::Values { elem: *dtype, a, b };
                    out_elem = *dtype;
                    if *layout == ChannelOrder::Chw {
                        match image {
                            Some((h, w, Some(c))) => {
                                perm = (0..h).chain([c, h, w]).collect();
                            }
                            Some((_, _, None)) => extra_channel = true,
                            None => return fail("CHW output needs image rows ([H, W] or […, H, W, C])"),
                        }
                    }
                }
                Transform::ToDtype { dtype, scale } => {
                    let k = match (*scale, elem, *dtype) {
                        (false, ..) => 1.0,
                        (true, Elem::U8, d) if is_float(d) => 1.0 / 255.0,
                        (true, s, Elem::U8) if is_float(s) => 255.0,
                        (true, ..) => return fail("scale converts between u8 and a floating type only"),
                    };
                    output = Output::Values { elem: *dtype, a: vec![k], b: vec![0.0] };
                    out_elem = *dtype;
                }
                _ => {}
            }
        }
        if resampled && output == Output::Raw {
            output = Output::Values { elem, a: vec![1.0], b: vec![0.0] };
        }
        let mut out_dims = Vec::with_capacity(rank + 1);
        for &p in &perm {
            match dims[p] {
                Some(d) => out_dims.push(d),
                None => {
                    return Err(LoaderError::config(format!(
                        "transforms on column {name:?}: the output shape depends on the row (axis {p}); end with a \
                         fixed-size RandomResizedCrop, CenterCrop, Resize(height, width) or CropPad"
                    )));
                }
            }
        }
        if extra_channel {
            out_dims.insert(out_dims.len() - 2, 1);
        }
        let row_bytes = out_dims
            .iter()
            .try_fold(out_elem.size() as u64, |a, &d| a.checked_mul(d))
            .and_then(|b| usize::try_from(b).ok())
            .filter(|&b| b <= 1 << 31)
            .ok_or_else(|| LoaderError::config(format!("transforms on column {name:?}: output rows over 2 GiB")))?;
        Ok(Self {
            column: name.to_owned(),
            ops: ops.to_vec(),
            elem,
            image,
            perm,
            output,
            out_elem,
            out_dims,
            row_bytes,
        })
    }
}

/// Checks the configured transforms against the projected columns: one pipeline per
/// transformed column (by position), whose stored rows are then staged packed.
///
/// # Errors
/// [`LoaderError::Config`] for a column that is not projected or named twice, or a
/// pipeline that cannot apply ([`Pipeline::new`]).
pub(crate) fn plan_columns(
    columns: &mut [ColumnLayout],
    transforms: &[ColumnTransform],
) -> Result<Vec<Option<Pipeline>>> {
    let mut out: Vec<Option<Pipeline>> = vec![None; columns.len()];
    for t in transforms {
        let Some(c) = columns.iter().position(|c| c.name == t.column) else {
            return Err(LoaderError::config(format!("transforms for {:?}: no such projected column", t.column)));
        };
        if out[c].is_some() {
            return Err(LoaderError::config(format!("transforms for {:?} are given twice", t.column)));
        }
        out[c] = Some(Pipeline::new(&columns[c].column, columns[c].kind, &t.ops)?);
        // Rows land back to back in the staging buffer, whatever their shapes.
        columns[c].packed = true;
    }
    Ok(out)
}

impl Pipeline {
    /// The transformed column as a batch of `rows` describes it: dense `[B, out…]`.
    pub(crate) fn host_column(&self, name: &str, rows: usize, valid: Option<Vec<bool>>) -> HostColumn {
        let mut shape = Vec::with_capacity(self.out_dims.len() + 1);
        shape.push(i64::try_from(rows).unwrap_or(i64::MAX));
        shape.extend(self.out_dims.iter().map(|&d| i64::try_from(d).unwrap_or(i64::MAX)));
        HostColumn {
            name: name.to_owned(),
            elem: self.out_elem,
            shape,
            byte_len: self.row_bytes * rows,
            layout: HostLayout::Fixed,
            valid,
            text: false,
        }
    }
}

/// Where the current pixels of a row are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cur {
    /// The stored row.
    Stored,
    /// `Scratch::a` (`f32`).
    Scratch,
}

/// A worker's reusable transform buffers.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    a: Vec<f32>,
    b: Vec<f32>,
    resampler: Resampler,
}

impl Scratch {
    /// Bytes held (counted against the worker's fetch allowance).
    pub(crate) fn capacity_bytes(&self) -> usize {
        (self.a.capacity() + self.b.capacity()) * 4 + self.resampler.capacity_bytes()
    }
}

/// The identity of a row for its random draws.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowKey {
    pub(crate) seed: u64,
    pub(crate) epoch: u64,
    pub(crate) row: u64,
}

/// Calls `f` with the current pixels as a [`Pixels`] source.
macro_rules! with_pixels {
    ($cur:expr, $stored:expr, $elem:expr, $a:expr, |$p:ident| $body:expr) => {
        match ($cur, $elem) {
            (Cur::Scratch, _) => {
                let $p: &[f32] = &$a[..];
                $body
            }
            (Cur::Stored, Elem::U8) => {
                let $p = U8s($stored);
                $body
            }
            (Cur::Stored, elem) => {
                let $p = Le { bytes: $stored, elem };
                $body
            }
        }
    };
}

impl Pipeline {
    /// Transforms one stored row (`src`, of per-row `dims`) into its output slot `dst`
    /// (`row_bytes` long). A null row (`src` empty with `valid = false`) becomes zeros.
    ///
    /// # Errors
    /// [`LoaderError::Corrupt`] when `src` does not match `dims`; [`LoaderError::Config`]
    /// when a resize of this row would exceed [`MAX_RESIZE_VALUES`].
    pub(crate) fn apply(&self, key: RowKey, src: &[u8], dims: &[u64], dst: &mut [u8], s: &mut Scratch) -> Result<()> {
        let what = || format!("column {:?}, row {}", self.column, key.row);
        let dims: Vec<usize> = dims.iter().map(|&d| usize::try_from(d).unwrap_or(usize::MAX)).collect();
        let elems = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if elems.and_then(|e| e.checked_mul(self.elem.size())) != Some(src.len()) {
            return Err(LoaderError::corrupt(what(), "row bytes do not match its shape"));
        }
        if dst.len() != self.row_bytes {
            return Err(LoaderError::WorkerPanicked(format!("{}: output slot of the wrong size", what())));
        }
        let mut view = View::dense(&dims);
        let mut cur = Cur::Stored;
        for (i, op) in self.ops.iter().enumerate() {
            let rng = || OpRng::new(key.seed, key.epoch, key.row, i);
            let (h, w, _) = self.image.unwrap_or((0, 0, None));
            match op {
                Transform::RandomResizedCrop { height, width, scale, ratio } => {
                    let (ih, iw) = (view.axes[h].out, view.axes[w].out);
                    let (top, left, ch, cw) = rrc_params(&mut rng(), ih, iw, *scale, *ratio);
                    view.crop(h, top, ch);
                    view.crop(w, left, cw);
                    self.resize(&mut view, &mut cur, src, (*height, *width), s, &what)?;
                }
                Transform::CenterCrop { height, width } => {
                    let (ih, iw) = (view.axes[h].out, view.axes[w].out);
                    view.crop(h, center_begin(ih, *height), *height);
                    view.crop(w, center_begin(iw, *width), *width);
                }
                Transform::Resize(to) => {
                    let (ih, iw) = (view.axes[h].out, view.axes[w].out);
                    let size = match *to {
                        ResizeTo::Exact { height, width } => (height, width),
                        ResizeTo::ShorterSide(side) => shorter_side(ih, iw, side),
                    };
                    self.resize(&mut view, &mut cur, src, size, s, &what)?;
                }
                Transform::HorizontalFlip { p } => {
                    if rng().unit() < *p {
                        view.flip(w);
                    }
                }
                Transform::VerticalFlip { p } => {
                    if rng().unit() < *p {
                        view.flip(h);
                    }
                }
                Transform::RandomTimeCrop { length, stride } => {
                    let n = view.axes[0].out;
                    let span = length.saturating_sub(1).saturating_mul(*stride).saturating_add(1);
                    let t0 = if n > span { rng().below_incl((n - span) as u64) } else { 0 };
                    view.crop(0, isize::try_from(t0).unwrap_or(0), span);
                    view.stride(0, *stride);
                }
                Transform::CropPad { shape } => {
                    for (k, &len) in shape.iter().enumerate() {
                        view.crop(k, 0, len);
                    }
                }
                Transform::Normalize { .. } | Transform::ToDtype { .. } => {}
            }
        }
        let out_count: usize = view.dims().iter().product();
        if out_count * self.out_elem.size() != dst.len() {
            return Err(LoaderError::WorkerPanicked(format!("{}: transformed shape differs from the plan", what())));
        }
        self.check_reach(&view, cur, src, s, &what)?;
        match (&self.output, cur) {
            (Output::Raw, Cur::Stored) => {
                let n = self.elem.size();
                #[allow(clippy::cast_sign_loss)] // reach checked above
                view.emit(&self.perm, None, |o, at, _| {
                    let d = &mut dst[o * n..(o + 1) * n];
                    match at {
                        Some(at) => d.copy_from_slice(&src[at as usize * n..(at as usize + 1) * n]),
                        None => d.fill(0),
                    }
                });
            }
            (Output::Raw, Cur::Scratch) => {
                return Err(LoaderError::WorkerPanicked(format!("{}: resampled without a value output", what())));
            }
            (Output::Values { elem, a, b }, cur) => self.write_values(&view, cur, src, s, (*elem, a, b), dst),
        }
        Ok(())
    }

    /// The value output: the view's pixels (`cur`) through the affine map `(elem, a, b)`,
    /// written as `elem` into `dst`.
    fn write_values(
        &self,
        view: &View,
        cur: Cur,
        src: &[u8],
        s: &Scratch,
        (elem, a, b): (Elem, &[f32], &[f32]),
        dst: &mut [u8],
    ) {
        let chan = self.image.and_then(|(_, _, c)| c);
        // One coefficient per channel index the walk reports (0 without channels).
        let channels = chan.map_or(1, |c| view.axes[c].out).max(1);
        let spread = |v: &[f32]| -> Vec<f32> { (0..channels).map(|c| v[if v.len() == 1 { 0 } else { c }]).collect() };
        let (a, b) = (spread(a), spread(b));
        let perm = self.perm.as_slice();
        with_pixels!(cur, src, self.elem, s.a, |px| {
            let pass = ValuePass { view, perm, chan, px: &px, a: &a, b: &b };
            match elem {
                Elem::F32 => values::<_, OutF32>(&pass, dst),
                Elem::F16 => values::<_, OutF16>(&pass, dst),
                Elem::Bf16 => values::<_, OutBf16>(&pass, dst),
                Elem::U8 => values::<_, OutU8>(&pass, dst),
                other => view.emit(perm, chan, |o, at, c| {
                    let v = at.map_or(0.0, |at| px.sample(at));
                    put(dst, o, other, v * a[c] + b[c]);
                }),
            }
        });
    }

    /// Checks that every source offset the view reads is inside the current pixels.
    fn check_reach(&self, view: &View, cur: Cur, src: &[u8], s: &Scratch, what: &dyn Fn() -> String) -> Result<()> {
        let len = match cur {
            Cur::Stored => src.len() / self.elem.size(),
            Cur::Scratch => s.a.len(),
        };
        match view.reach() {
            Some((lo, hi)) if lo < 0 || hi.unsigned_abs() >= len => {
                Err(LoaderError::WorkerPanicked(format!("{}: a transform view reaches outside its row", what())))
            }
            _ => Ok(()),
        }
    }

    /// Resamples the view's image axes to `size`, into `s.a`; the view becomes that.
    #[allow(clippy::many_single_char_names)] // h, w, c: the image axes
    fn resize(
        &self,
        view: &mut View,
        cur: &mut Cur,
        src: &[u8],
        (oh, ow): (usize, usize),
        s: &mut Scratch,
        what: &dyn Fn() -> String,
    ) -> Result<()> {
        let Some((h, w, c)) = self.image else { return Ok(()) };
        if !view.unpadded() {
            // Materialise the padding (zeros) first: the resampler reads unpadded grids.
            self.check_reach(view, *cur, src, s, what)?;
            let n: usize = view.dims().iter().product();
            let identity: Vec<usize> = (0..view.axes.len()).collect();
            fit(&mut s.b, n); // every element is written below
            let out = &mut s.b;
            with_pixels!(*cur, src, self.elem, s.a, |px| {
                view.emit(&identity, None, |o, at, _| out[o] = at.map_or(0.0, |at| px.sample(at)));
            });
            std::mem::swap(&mut s.a, &mut s.b);
            *view = View::dense(&view.dims());
            *cur = Cur::Scratch;
        }
        self.check_reach(view, *cur, src, s, what)?;
        let outer = &view.axes[..h];
        let channels = c.map_or(1, |c| view.axes[c].out);
        let (ih, iw) = (view.axes[h].out, view.axes[w].out);
        let per = oh.checked_mul(ow).and_then(|v| v.checked_mul(channels));
        let outer_count: usize = outer.iter().map(|a| a.out).product();
        let total = per.and_then(|p| p.checked_mul(outer_count)).filter(|&t| t <= MAX_RESIZE_VALUES);
        let (Some(per), Some(total)) = (per, total) else {
            return Err(LoaderError::config(format!(
                "{}: resizing to {oh}×{ow} needs more than {MAX_RESIZE_VALUES} values",
                what()
            )));
        };
        fit(&mut s.b, total);
        if ih == 0 || iw == 0 {
            s.b.fill(0.0); // an empty image resizes to black
        } else if per > 0 {
            let (ha, wa) = (view.axes[h], view.axes[w]);
            let ca = c.map(|c| view.axes[c]);
            let mut idx = vec![0usize; outer.len()];
            for block in 0..outer_count {
                let base: isize = outer.iter().zip(&idx).map(|(a, &i)| a.start + i as isize * a.step).sum::<isize>()
                    + ha.start
                    + wa.start
                    + ca.map_or(0, |a| a.start);
                let grid = Grid {
                    base,
                    sy: ha.step,
                    sx: wa.step,
                    sc: ca.map_or(0, |a| a.step),
                    height: ih,
                    width: iw,
                    channels,
                };
                let out = &mut s.b[block * per..(block + 1) * per];
                let rs = &mut s.resampler;
                with_pixels!(*cur, src, self.elem, s.a, |px| rs.run(&px, grid, oh, ow, out));
                for k in (0..idx.len()).rev() {
                    idx[k] += 1;
                    if idx[k] < outer[k].out {
                        break;
                    }
                    idx[k] = 0;
                }
            }
        }
        let mut dims = view.dims();
        (dims[h], dims[w]) = (oh, ow);
        std::mem::swap(&mut s.a, &mut s.b);
        // The resampler writes each output row as channel planes: `[…, H, C, W]` in memory.
        *view = View::dense(&dims);
        if let Some(c) = c {
            view.axes[w].step = 1;
            view.axes[c].step = isize::try_from(ow).unwrap_or(isize::MAX);
        }
        *cur = Cur::Scratch;
        Ok(())
    }
}

/// The last pass's inputs: the view walked in `perm` order (`chan` its channel axis), the
/// pixels it reads, and the affine map `v · a[c] + b[c]`.
struct ValuePass<'v, P> {
    view: &'v View,
    perm: &'v [usize],
    chan: Option<usize>,
    px: &'v P,
    a: &'v [f32],
    b: &'v [f32],
}

/// The last pass for a compile-time output type: `v · a[c] + b[c]` per element (padding
/// reads as 0), a line at a time in blocks of [`VALUES_BLOCK`]; compiled per
/// [`tessera::simd::Level`] like the resampler (a multiply, then an add, never fused: the
/// same bits at every level).
#[allow(unsafe_code)]
fn values<P: Pixels, O: Out>(pass: &ValuePass<'_, P>, dst: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if Level::current() == Level::Avx2 && Level::Avx2.is_available() {
        // SAFETY: `values_avx2` only requires the CPU to support AVX2, which
        // `is_x86_feature_detected!("avx2")` (in `is_available`) has just confirmed.
        unsafe { values_avx2::<P, O>(pass, dst) };
        return;
    }
    values_body::<P, O>(pass, dst);
}

/// [`values_body`] compiled with AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn values_avx2<P: Pixels, O: Out>(pass: &ValuePass<'_, P>, dst: &mut [u8]) {
    values_body::<P, O>(pass, dst);
}

/// Values converted per block: one 224-pixel line is one block.
const VALUES_BLOCK: usize = 256;

/// [`values`]' loops (`inline(always)`: each level's copy is compiled with its features).
#[allow(clippy::many_single_char_names, clippy::inline_always)] // a, b: the affine map
#[inline(always)]
fn values_body<P: Pixels, O: Out>(pass: &ValuePass<'_, P>, dst: &mut [u8]) {
    let ValuePass { view, perm, chan, px, a, b } = pass;
    let chan = *chan;
    let mut buf = [0.0f32; VALUES_BLOCK];
    for l in view.line_iter(perm, chan) {
        let (d0, n, src, step) = l.data.unwrap_or((l.len, 0, 0, 0));
        let mut j = 0;
        let mut at = src;
        while j < l.len {
            let m = if j < d0 {
                (d0 - j).min(VALUES_BLOCK)
            } else if j < d0 + n {
                (d0 + n - j).min(VALUES_BLOCK)
            } else {
                (l.len - j).min(VALUES_BLOCK)
            };
            let vals = &mut buf[..m];
            if j >= d0 && j < d0 + n {
                px.gather(at, step, vals);
                at += step * m as isize;
            } else {
                vals.fill(0.0);
            }
            match l.chan {
                Some(c) => {
                    let (ac, bc) = (a[c], b[c]);
                    for v in vals.iter_mut() {
                        *v = *v * ac + bc;
                    }
                }
                None => {
                    for (v, (ac, bc)) in vals.iter_mut().zip(a[j..].iter().zip(&b[j..])) {
                        *v = *v * ac + bc;
                    }
                }
            }
            if l.out_step == 1 {
                O::write_slice(dst, l.out + j, vals);
            } else {
                for (k, &v) in vals.iter().enumerate() {
                    O::write(dst, l.out + (j + k) * l.out_step, v);
                }
            }
            j += m;
        }
    }
}

/// Makes `v` exactly `n` long, keeping its allocation; new elements are 0.
fn fit(v: &mut Vec<f32>, n: usize) {
    if v.len() < n {
        v.resize(n, 0.0);
    } else {
        v.truncate(n);
    }
}

/// torchvision's `CenterCrop` offset: half the difference, rounded half to even when the
/// crop fits, the padding's left half (rounded down) when it does not.
fn center_begin(size: usize, crop: usize) -> isize {
    let to_isize = |v: usize| isize::try_from(v).unwrap_or(isize::MAX);
    if crop > size {
        -to_isize((crop - size) / 2)
    } else {
        let d = size - crop;
        let half = d / 2;
        // d odd: x.5 rounds to the even neighbour.
        to_isize(if d % 2 == 1 && half % 2 == 1 { half + 1 } else { half })
    }
}

/// torchvision's `Resize(int)`: the shorter side to `side`, the other truncated.
fn shorter_side(h: usize, w: usize, side: usize) -> (usize, usize) {
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // truncation is the rule
    let scaled = |long: usize, short: usize| ((side as f64 * long as f64) / short.max(1) as f64) as usize;
    if h <= w { (side, scaled(w, h)) } else { (scaled(h, w), side) }
}

/// torchvision's `RandomResizedCrop.get_params`: `(top, left, height, width)`.
fn rrc_params(
    rng: &mut OpRng,
    h: usize,
    w: usize,
    scale: (f64, f64),
    ratio: (f64, f64),
) -> (isize, isize, usize, usize) {
    let to_isize = |v: u64| isize::try_from(v).unwrap_or(0);
    let area = h as f64 * w as f64;
    let (lr0, lr1) = (libm::log(ratio.0), libm::log(ratio.1));
    for _ in 0..10 {
        let target = area * rng.uniform(scale.0, scale.1);
        let aspect = libm::exp(rng.uniform(lr0, lr1));
        let cw = (target * aspect).sqrt().round_ties_even();
        let ch = (target / aspect).sqrt().round_ties_even();
        if cw > 0.0 && ch > 0.0 && cw <= w as f64 && ch <= h as f64 {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // within 1..=w, 1..=h
            let (cw, ch) = (cw as usize, ch as usize);
            let top = rng.below_incl((h - ch) as u64);
            let left = rng.below_incl((w - cw) as u64);
            return (to_isize(top), to_isize(left), ch, cw);
        }
    }
    // Fallback: the whole image, cut to the nearest allowed ratio, centred.
    let in_ratio = w as f64 / h.max(1) as f64;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // within the image
    let (cw, ch) = if in_ratio < ratio.0 {
        (w, ((w as f64 / ratio.0).round_ties_even() as usize).min(h))
    } else if in_ratio > ratio.1 {
        (((h as f64 * ratio.1).round_ties_even() as usize).min(w), h)
    } else {
        (w, h)
    };
    (to_isize(((h - ch) / 2) as u64), to_isize(((w - cw) / 2) as u64), ch, cw)
}

#[cfg(test)]
mod tests;
