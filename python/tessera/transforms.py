"""Augmentations the loader runs on its own threads, straight into each batch slot.

Pass them per column to any loader::

    ds.pytorch(transforms={"image": [
        tessera.transforms.RandomResizedCrop(224),
        tessera.transforms.HorizontalFlip(),
        tessera.transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD, dtype="float16", layout="CHW"),
    ]})

Each op's randomness is a function of (seed, epoch, row id, op position) only: the same seed
gives byte-identical batches with any number of workers or ranks, and a resumed epoch
reproduces the augmented batches exactly. The pipeline is checked when the loader opens (an
op that cannot apply raises :class:`tessera.UsageError`) and must end at a fixed shape, so a
ragged image column comes out as one dense ``[B, 3, 224, 224]`` tensor.

Image ops read rows ``[H, W]`` or ``[…, H, W, C]`` (video frames share one draw); temporal
ops act on axis 0. Resizing is antialiased bilinear (torchvision's ``antialias=True``),
computed in float32. ``Normalize`` and ``ToDtype`` come last.

Training on a GPU (``device="cuda"``): every op runs on the host before the batch is
copied, so for the fewest bytes over PCIe keep the loader's output ``uint8`` (crops and
flips only) and normalise on the device, batched: ``x = (batch["image"].permute(0, 3, 1,
2).float() / 255 - mean) / std`` — a quarter of the bytes of ``float32``, half of
``float16``.

For what these lack, ``batch_transform=fn`` on a loader calls ``fn(batch) -> batch`` on the
training loop's thread for each batch: plain Python, holding the GIL, so it costs the loop
its own time (keep it to cheap, vectorised work).
"""

from dataclasses import dataclass
from typing import Any, Dict, Sequence, Tuple, Union

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "RandomResizedCrop",
    "CenterCrop",
    "Resize",
    "HorizontalFlip",
    "VerticalFlip",
    "RandomTimeCrop",
    "CropPad",
    "Normalize",
    "ToDtype",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

Size = Union[int, Tuple[int, int], Sequence[int]]


def _pair(size: Size) -> Tuple[int, int]:
    if isinstance(size, int):
        return (size, size)
    h, w = size
    return (int(h), int(w))


@dataclass(frozen=True)
class RandomResizedCrop:
    """A crop of random area fraction in ``scale`` and aspect ratio in ``ratio``
    (log-uniform), resized to ``size`` (``int`` for square): torchvision's definition."""

    size: Size
    scale: Tuple[float, float] = (0.08, 1.0)
    ratio: Tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0)

    def _spec(self) -> Dict[str, Any]:
        return {
            "op": "random_resized_crop",
            "size": _pair(self.size),
            "scale": tuple(map(float, self.scale)),
            "ratio": tuple(map(float, self.ratio)),
        }


@dataclass(frozen=True)
class CenterCrop:
    """The centre ``size``; zero padded where the image is smaller."""

    size: Size

    def _spec(self) -> Dict[str, Any]:
        return {"op": "center_crop", "size": _pair(self.size)}


@dataclass(frozen=True)
class Resize:
    """``(height, width)`` exactly, or an ``int``: the shorter side to that length, aspect
    kept (then a fixed-size crop must follow)."""

    size: Size

    def _spec(self) -> Dict[str, Any]:
        if isinstance(self.size, int):
            return {"op": "resize", "shorter_side": self.size}
        return {"op": "resize", "shorter_side": None, "size": _pair(self.size)}


@dataclass(frozen=True)
class HorizontalFlip:
    """Mirror left-right with probability ``p``."""

    p: float = 0.5

    def _spec(self) -> Dict[str, Any]:
        return {"op": "horizontal_flip", "p": float(self.p)}


@dataclass(frozen=True)
class VerticalFlip:
    """Mirror top-bottom with probability ``p``."""

    p: float = 0.5

    def _spec(self) -> Dict[str, Any]:
        return {"op": "vertical_flip", "p": float(self.p)}


@dataclass(frozen=True)
class RandomTimeCrop:
    """Audio/video: ``length`` positions of axis 0, every ``stride``-th, from a random
    start; zero padded at the end of a shorter row."""

    length: int
    stride: int = 1

    def _spec(self) -> Dict[str, Any]:
        return {"op": "random_time_crop", "length": int(self.length), "stride": int(self.stride)}


@dataclass(frozen=True)
class CropPad:
    """Any column: the first ``shape[k]`` positions of each axis, zero padded where a row is
    shorter (a ragged column at a fixed shape)."""

    shape: Sequence[int]

    def _spec(self) -> Dict[str, Any]:
        return {"op": "crop_pad", "shape": [int(d) for d in self.shape]}


@dataclass(frozen=True)
class Normalize:
    """``(x / 255 - mean) / std`` for ``uint8`` rows (``(x - mean) / std`` otherwise), in
    ``dtype`` (``float32``, ``float16``, ``bfloat16``, ``float64``), axes ``layout``
    (``"CHW"`` or ``"HWC"``). Last op."""

    mean: Sequence[float] = IMAGENET_MEAN
    std: Sequence[float] = IMAGENET_STD
    dtype: str = "float32"
    layout: str = "CHW"

    def _spec(self) -> Dict[str, Any]:
        return {
            "op": "normalize",
            "mean": [float(m) for m in self.mean],
            "std": [float(s) for s in self.std],
            "dtype": str(self.dtype),
            "layout": str(self.layout),
        }


@dataclass(frozen=True)
class ToDtype:
    """Converts elements (integers round half to even and saturate); ``scale=True`` maps
    ``uint8`` 0..255 to floats 0..1 and back. Last op."""

    dtype: str
    scale: bool = False

    def _spec(self) -> Dict[str, Any]:
        return {"op": "to_dtype", "dtype": str(self.dtype), "scale": bool(self.scale)}


def _specs(transforms: Any) -> Any:
    """``{column: [op, …]}`` as the native loader takes it."""
    if transforms is None:
        return None
    if not isinstance(transforms, dict):
        raise TypeError("transforms must be a dict: column name -> list of tessera.transforms ops")
    out = []
    for column, ops in transforms.items():
        if not isinstance(ops, (list, tuple)):
            ops = [ops]
        specs = []
        for op in ops:
            spec = getattr(op, "_spec", None)
            if spec is None:
                raise TypeError(f"transforms[{column!r}]: {op!r} is not a tessera.transforms op")
            specs.append(spec())
        out.append((str(column), specs))
    return out
