//! `tessera.transforms` specs (plain dicts built by `python/tessera/transforms.py`) as the
//! loader's [`Transform`]s. Every check of what an op may do lives in the loader core; this
//! only reads the fields.

use pyo3::conversion::FromPyObjectOwned;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tessera_loader::{ChannelOrder, Elem, ResizeTo, Transform};

use crate::errors::usage;

/// An element type by numpy/torch name.
fn elem(name: &str) -> PyResult<Elem> {
    Ok(match name {
        "bool" => Elem::Bool,
        "uint8" | "u8" => Elem::U8,
        "int8" | "i8" => Elem::I8,
        "int16" | "i16" => Elem::I16,
        "int32" | "i32" => Elem::I32,
        "int64" | "i64" => Elem::I64,
        "float16" | "f16" | "half" => Elem::F16,
        "bfloat16" | "bf16" => Elem::Bf16,
        "float32" | "f32" | "float" => Elem::F32,
        "float64" | "f64" | "double" => Elem::F64,
        other => return Err(usage(format!("unknown dtype {other:?} (uint8, int16, float16, bfloat16, float32, …)"))),
    })
}

fn field<'py, T: FromPyObjectOwned<'py>>(d: &Bound<'py, PyDict>, op: &str, key: &str) -> PyResult<T> {
    let v = d.get_item(key)?.ok_or_else(|| usage(format!("transform {op}: missing {key:?}")))?;
    v.extract().map_err(|_| usage(format!("transform {op}: {key:?} has the wrong type ({v})")))
}

/// One op from its spec dict (`{"op": "random_resized_crop", …}`).
pub(crate) fn op(d: &Bound<'_, PyDict>) -> PyResult<Transform> {
    let name: String = field(d, "?", "op")?;
    let op = name.as_str();
    let pair = |key: &str| -> PyResult<(usize, usize)> { field(d, op, key) };
    Ok(match op {
        "random_resized_crop" => {
            let (height, width) = pair("size")?;
            Transform::RandomResizedCrop { height, width, scale: field(d, op, "scale")?, ratio: field(d, op, "ratio")? }
        }
        "center_crop" => {
            let (height, width) = pair("size")?;
            Transform::CenterCrop { height, width }
        }
        "resize" => {
            if let Some(side) = field::<Option<usize>>(d, op, "shorter_side")? {
                Transform::Resize(ResizeTo::ShorterSide(side))
            } else {
                let (height, width) = pair("size")?;
                Transform::Resize(ResizeTo::Exact { height, width })
            }
        }
        "horizontal_flip" => Transform::HorizontalFlip { p: field(d, op, "p")? },
        "vertical_flip" => Transform::VerticalFlip { p: field(d, op, "p")? },
        "random_time_crop" => {
            Transform::RandomTimeCrop { length: field(d, op, "length")?, stride: field(d, op, "stride")? }
        }
        "crop_pad" => Transform::CropPad { shape: field(d, op, "shape")? },
        "normalize" => Transform::Normalize {
            mean: field(d, op, "mean")?,
            std: field(d, op, "std")?,
            dtype: elem(&field::<String>(d, op, "dtype")?)?,
            layout: match field::<String>(d, op, "layout")?.as_str() {
                "CHW" | "chw" => ChannelOrder::Chw,
                "HWC" | "hwc" => ChannelOrder::Hwc,
                other => {
                    return Err(usage(format!(
                        "transform normalize: layout must be \"CHW\" or \"HWC\", not {other:?}"
                    )));
                }
            },
        },
        "to_dtype" => {
            Transform::ToDtype { dtype: elem(&field::<String>(d, op, "dtype")?)?, scale: field(d, op, "scale")? }
        }
        other => return Err(usage(format!("unknown transform {other:?}"))),
    })
}
