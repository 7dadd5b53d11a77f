"""Image pages of encoded columns (SPEC.md CMP-05 to CMP-07, DF-30), decoded with Pillow.

The header is read first (Pillow's `Image.open` parses it without decoding pixels) and
checked against the row's shape before anything is decoded, as CMP-07 requires. PNG's bit
depth and colour type are read from IHDR directly: Pillow reports 2- and 4-bit grey as mode
"L", which CMP-07 does not allow."""

import io
import struct

from .errors import NotSupportedHere, invalid, malformed

try:
    from PIL import Image as _Image
    from PIL import UnidentifiedImageError as _Unidentified

    # Pillow's own bomb guard refuses to even open a file whose header declares many pixels,
    # before we could compare that header with the row's shape. CMP-07's guard replaces it:
    # nothing is decoded unless the header equals a row shape that LIM-09 bounds.
    _Image.MAX_IMAGE_PIXELS = None
except ImportError:  # pragma: no cover - scripts/setup.d/30-encoded.sh installs Pillow
    _Image = None

CODEC_JPEG, CODEC_PNG, CODEC_WEBP = 3, 4, 5
_NAMES = {CODEC_JPEG: "jpeg", CODEC_PNG: "png", CODEC_WEBP: "webp"}
_FORMATS = {CODEC_JPEG: "JPEG", CODEC_PNG: "PNG", CODEC_WEBP: "WEBP"}
# (PNG colour type) -> channels; 3 (palette) is not allowed.
_PNG_CHANNELS = {0: 1, 4: 2, 2: 3, 6: 4}


def available() -> bool:
    return _Image is not None


def is_image(codec: int) -> bool:
    return codec in _NAMES


def _channels(codec: int, im, raw: bytes, w: str) -> int:
    name = _NAMES[codec]
    if getattr(im, "is_animated", False):
        raise invalid(f"{w}: animated {name}")
    if codec == CODEC_JPEG:
        if im.mode == "L":
            return 1
        if im.mode == "RGB":
            return 3
        raise invalid(f"{w}: jpeg of mode {im.mode}; 1 or 3 components are allowed")
    if codec == CODEC_PNG:
        depth, ctype = raw[24], raw[25]
        if depth != 8 or ctype not in _PNG_CHANNELS:
            raise invalid(f"{w}: png of bit depth {depth}, colour type {ctype}")
        if "transparency" in im.info:
            raise invalid(f"{w}: png with a tRNS chunk")
        return _PNG_CHANNELS[ctype]
    return 4 if im.mode == "RGBA" else 3


def decode(codec: int, raw, row_shape: tuple, raw_len: int, w: str) -> bytes:
    """CMP-07: header shape == row shape (`invalid`), then the pixels (`malformed` if the file
    does not decode to exactly `raw_len` bytes)."""
    if _Image is None:
        raise NotSupportedHere("image pages need Pillow (scripts/setup.d/30-encoded.sh)")
    raw = bytes(raw)
    name = _NAMES[codec]
    try:
        im = _Image.open(io.BytesIO(raw), formats=[_FORMATS[codec]])
    except (_Unidentified, OSError, SyntaxError, ValueError, struct.error) as e:
        raise malformed(f"{w}: {name} header does not decode: {e}") from None
    with im:
        c = _channels(codec, im, raw, w)
        width, height = im.size
        got = (height, width) if len(row_shape) == 2 else (height, width, c)
        if tuple(row_shape) != got or (len(row_shape) == 2 and c != 1):
            raise invalid(f"{w}: {name} file is {height}x{width}x{c}; the row's shape is "
                          f"{list(row_shape)}")
        try:
            im.load()
            pixels = im.tobytes()
        except (OSError, SyntaxError, ValueError, struct.error) as e:
            raise malformed(f"{w}: {name} file does not decode: {e}") from None
    if len(pixels) != raw_len:
        raise malformed(f"{w}: {name} file decodes to {len(pixels)} bytes, raw_len is {raw_len}")
    return pixels
