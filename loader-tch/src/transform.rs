//! Per-batch transforms: tensor ops run on the batch's device (CPU or GPU) after it is
//! delivered, each with a random generator seeded from (dataset, seed, epoch, position of the
//! batch's first sample), so augmentations are reproducible and do not depend on the number
//! of workers (nor, for a fixed per-rank batch size, on the number of ranks).
//!
//! Random decisions (which samples flip, where each crop starts) are drawn on the CPU from
//! the crate's frozen xoshiro256\*\* generator, never from libtorch's global generator.

use std::fmt::Debug;

use tch::{Kind, Tensor};

use crate::batch::{Batch, ColumnTensors};
use crate::error::{LoaderError, Result};
use crate::sampler::Xoshiro256StarStar;

/// A transform of whole batches.
pub trait BatchTransform: Send + Sync + Debug {
    /// Transforms `batch` in place; `rng` is seeded for this batch alone.
    ///
    /// # Errors
    /// Any [`LoaderError`]; it reaches the training loop as that batch's error.
    fn apply(&self, batch: &mut Batch, rng: &mut Xoshiro256StarStar) -> Result<()>;
}

fn tensor_err(what: &'static str) -> impl Fn(tch::TchError) -> LoaderError {
    move |e| crate::error::tensor_err(what, e)
}

fn replace_values(batch: &mut Batch, column: &str, values: Tensor) -> Result<()> {
    let old = batch.column(column)?;
    let next = ColumnTensors {
        values,
        lengths: old.lengths.as_ref().map(Tensor::shallow_clone),
        offsets: old.offsets.as_ref().map(Tensor::shallow_clone),
        shapes: old.shapes.as_ref().map(Tensor::shallow_clone),
        valid: old.valid.as_ref().map(Tensor::shallow_clone),
    };
    batch.set(column, next);
    Ok(())
}

/// Converts an image column `u8 [B, H, W, C]` to `f32 [B, C, H, W]` scaled to `[0, 1]`.
#[derive(Clone, Debug)]
pub struct ImageToFloat {
    /// The image column.
    pub column: String,
}

impl BatchTransform for ImageToFloat {
    fn apply(&self, batch: &mut Batch, _rng: &mut Xoshiro256StarStar) -> Result<()> {
        let x = batch.tensor(&self.column)?;
        let ctx = tensor_err("ImageToFloat");
        if x.dim() != 4 {
            return Err(LoaderError::config(format!("ImageToFloat expects [B, H, W, C], got {:?}", x.size())));
        }
        let y = x
            .f_permute([0, 3, 1, 2])
            .and_then(|t| t.f_to_kind(Kind::Float))
            .and_then(|t| t.f_div_scalar(255.0))
            .map_err(ctx)?;
        replace_values(batch, &self.column, y)
    }
}

/// Per-channel normalisation of a float `[B, C, ...]` column: `(x - mean[c]) / std[c]`.
#[derive(Clone, Debug)]
pub struct Normalize {
    /// The column.
    pub column: String,
    /// Per-channel means.
    pub mean: Vec<f64>,
    /// Per-channel standard deviations (non-zero).
    pub std: Vec<f64>,
}

impl BatchTransform for Normalize {
    fn apply(&self, batch: &mut Batch, _rng: &mut Xoshiro256StarStar) -> Result<()> {
        let x = batch.tensor(&self.column)?;
        let ctx = tensor_err("Normalize");
        let size = x.size();
        if size.len() < 2 || size[1] as usize != self.mean.len() || self.mean.len() != self.std.len() {
            return Err(LoaderError::config(format!("Normalize has {} channels, column is {size:?}", self.mean.len())));
        }
        if self.std.contains(&0.0) {
            return Err(LoaderError::config("Normalize std must be non-zero"));
        }
        let mut shape = vec![1i64; size.len()];
        shape[1] = self.mean.len() as i64;
        let mean = Tensor::f_from_slice(&self.mean)
            .and_then(|t| t.f_to_kind(x.kind()))
            .and_then(|t| t.f_to_device(x.device()))
            .and_then(|t| t.f_view(shape.as_slice()))
            .map_err(&ctx)?;
        let std = Tensor::f_from_slice(&self.std)
            .and_then(|t| t.f_to_kind(x.kind()))
            .and_then(|t| t.f_to_device(x.device()))
            .and_then(|t| t.f_view(shape.as_slice()))
            .map_err(&ctx)?;
        let y = x.f_sub(&mean).and_then(|t| t.f_div(&std)).map_err(ctx)?;
        replace_values(batch, &self.column, y)
    }
}

/// Flips each sample horizontally with probability `p` (dimension `width_dim` of the
/// column, counted with the batch dimension: 3 for `[B, C, H, W]`, 2 for `[B, H, W, C]`).
#[derive(Clone, Debug)]
pub struct RandomHorizontalFlip {
    /// The column.
    pub column: String,
    /// Probability of flipping a sample.
    pub p: f64,
    /// The width dimension.
    pub width_dim: i64,
}

impl BatchTransform for RandomHorizontalFlip {
    fn apply(&self, batch: &mut Batch, rng: &mut Xoshiro256StarStar) -> Result<()> {
        let x = batch.tensor(&self.column)?;
        let ctx = tensor_err("RandomHorizontalFlip");
        let n = x.size().first().copied().unwrap_or(0);
        let threshold = (self.p.clamp(0.0, 1.0) * (1u64 << 53) as f64) as u64;
        let flip: Vec<bool> = (0..n).map(|_| rng.next_u64() >> 11 < threshold).collect();
        if !flip.iter().any(|&f| f) {
            return Ok(());
        }
        let mask = Tensor::f_from_slice(&flip).and_then(|m| m.f_to_device(x.device())).map_err(&ctx)?;
        let mut shape = vec![1i64; x.dim()];
        shape[0] = n;
        let mask = mask.f_view(shape.as_slice()).map_err(&ctx)?;
        let y = x.f_flip([self.width_dim]).and_then(|f| f.f_where_self(&mask, x)).map_err(ctx)?;
        replace_values(batch, &self.column, y)
    }
}

/// Crops each sample of a `[B, C, H, W]` column to `height × width` at a random position,
/// after zero-padding every side by `padding`.
#[derive(Clone, Debug)]
pub struct RandomCrop {
    /// The column.
    pub column: String,
    /// Output height.
    pub height: i64,
    /// Output width.
    pub width: i64,
    /// Zero padding added on each side before cropping.
    pub padding: i64,
}

impl BatchTransform for RandomCrop {
    fn apply(&self, batch: &mut Batch, rng: &mut Xoshiro256StarStar) -> Result<()> {
        let x = batch.tensor(&self.column)?;
        let ctx = tensor_err("RandomCrop");
        let size = x.size();
        if size.len() != 4 {
            return Err(LoaderError::config(format!("RandomCrop expects [B, C, H, W], got {size:?}")));
        }
        let pad = self.padding.max(0);
        let padded = if pad > 0 { x.f_constant_pad_nd([pad, pad, pad, pad]).map_err(&ctx)? } else { x.shallow_clone() };
        let (height, width) = (size[2] + 2 * pad, size[3] + 2 * pad);
        if self.height > height || self.width > width || self.height <= 0 || self.width <= 0 {
            return Err(LoaderError::config(format!(
                "RandomCrop {}x{} does not fit {height}x{width}",
                self.height, self.width
            )));
        }
        let mut parts = Vec::with_capacity(size[0] as usize);
        for sample in 0..size[0] {
            let top = rng.below((height - self.height + 1) as u64) as i64;
            let left = rng.below((width - self.width + 1) as u64) as i64;
            let crop = padded
                .f_narrow(0, sample, 1)
                .and_then(|t| t.f_narrow(2, top, self.height))
                .and_then(|t| t.f_narrow(3, left, self.width))
                .map_err(&ctx)?;
            parts.push(crop);
        }
        let y = Tensor::f_cat(&parts, 0).map_err(ctx)?;
        replace_values(batch, &self.column, y)
    }
}
