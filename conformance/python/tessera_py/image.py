"""Image pages of encoded columns (SPEC.md CMP-05 to CMP-07, DF-30), decoded with Pillow.

The header is read first (Pillow's `Image.open` parses it without decoding pixels) and
checked against the row's shape before anything is decoded, as CMP-07 requires. PNG's bit
depth and colour type are read from IHDR directly: Pillow reports 2- and 4-bit grey as mode
"L", which CMP-07 does not allow."""

import io
import struct
import zlib

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


def _jpeg_frame(raw: bytes, w: str) -> dict:
    """CMP-07 step 1 for JPEG: the markers from SOI to the first SOS (`malformed`)."""
    def bad(why):
        return malformed(f"{w}: jpeg header: {why}")
    if raw[:2] != b"\xff\xd8":
        raise bad("no SOI marker")
    f = {"sof": None, "precision": None, "ids": [], "jfif": False, "adobe": None}
    at = 2
    while True:
        if at >= len(raw) or raw[at] != 0xFF:
            raise bad("a marker was expected")
        while at < len(raw) and raw[at] == 0xFF:
            at += 1
        if at >= len(raw):
            raise bad("truncated marker")
        code = raw[at]
        at += 1
        if code == 0x01 or 0xD0 <= code <= 0xD7:
            continue
        if code in (0xD8, 0xD9):
            raise bad("SOI or EOI before the first scan")
        if at + 2 > len(raw):
            raise bad("truncated segment length")
        n = int.from_bytes(raw[at:at + 2], "big")
        if n < 2 or at + n > len(raw):
            raise bad("a segment runs past the end of the file")
        body = raw[at + 2:at + n]
        at += n
        if code == 0xE0 and body.startswith(b"JFIF\0"):
            f["jfif"] = True
        elif code == 0xEE and body.startswith(b"Adobe"):
            if len(body) < 12:
                raise bad("short Adobe APP14 segment")
            f["adobe"] = body[11]
        elif 0xC0 <= code <= 0xCF and code not in (0xC4, 0xC8, 0xCC):
            if f["sof"] is not None:
                raise bad("a second frame header")
            if len(body) < 6 or len(body) != 6 + 3 * body[5]:
                raise bad("frame header length does not match its components")
            f["sof"], f["precision"] = code, body[0]
            f["ids"] = [body[6 + 3 * i] for i in range(body[5])]
        elif code == 0xDA:
            if f["sof"] is None:
                raise bad("a scan before the frame header")
            return f


def _jpeg_profile(f: dict, w: str):
    """CMP-07 step 2 for JPEG (`invalid`)."""
    if f["sof"] not in (0xC0, 0xC2):
        raise invalid(f"{w}: jpeg frame type SOF{f['sof'] - 0xC0}; only SOF0 and SOF2 are allowed")
    if f["precision"] != 8:
        raise invalid(f"{w}: jpeg of {f['precision']}-bit samples; 8 are required")
    if len(f["ids"]) == 3:
        if f["adobe"] is not None and f["adobe"] != 1:
            raise invalid(f"{w}: 3-component jpeg with an Adobe transform other than YCbCr")
        if not f["jfif"] and f["adobe"] is None and f["ids"] == [82, 71, 66]:
            raise invalid(f"{w}: 3-component jpeg with ids R, G, B and no JFIF or Adobe marker")


def _jpeg_ends_at_eoi(raw: bytes, w: str):
    """CMP-07 step 4 for JPEG: the file ends with the EOI that ends its last scan."""
    def bad(why):
        return malformed(f"{w}: jpeg: {why}")
    at, in_scan, n = 2, False, len(raw)
    while at < n:
        if in_scan:
            while True:
                p = raw.find(b"\xff", at)
                if p < 0 or p + 1 >= n:
                    raise bad("the last scan has no EOI")
                nxt = raw[p + 1]
                if nxt == 0x00 or 0xD0 <= nxt <= 0xD7 or nxt == 0xFF:
                    at = p + 1
                    continue
                at = p
                break
            in_scan = False
        while at + 1 < n and raw[at] == 0xFF and raw[at + 1] == 0xFF:
            at += 1
        if raw[at] != 0xFF or at + 1 >= n:
            raise bad("a marker was expected")
        code = raw[at + 1]
        at += 2
        if code == 0xD9:
            if at == n:
                return
            raise bad("bytes follow the EOI marker")
        if code == 0x01 or 0xD0 <= code <= 0xD7:
            continue
        if at + 2 > n or int.from_bytes(raw[at:at + 2], "big") < 2:
            raise bad("truncated segment")
        at += int.from_bytes(raw[at:at + 2], "big")
        in_scan = code == 0xDA
    raise bad("the file does not end with EOI")


def _png_chunks(raw: bytes, whole: bool, w: str) -> bool:
    """CMP-07: every chunk CRC up to the first IDAT (step 1) or, with `whole`, to an IEND that
    ends the file (step 4); returns whether a tRNS chunk came before the first IDAT."""
    if raw[:8] != b"\x89PNG\r\n\x1a\n":
        raise malformed(f"{w}: png: no PNG signature")
    at, trns = 8, False
    while True:
        if at + 8 > len(raw):
            raise malformed(f"{w}: png: truncated chunk header")
        n = int.from_bytes(raw[at:at + 4], "big")
        kind = raw[at + 4:at + 8]
        end = at + 12 + n
        if end > len(raw):
            raise malformed(f"{w}: png: chunk {kind!r} runs past the end of the file")
        if kind == b"IDAT" and not whole:
            return trns  # image data: step 4 checks it
        if zlib.crc32(raw[at + 4:end - 4]) != int.from_bytes(raw[end - 4:end], "big"):
            raise malformed(f"{w}: png: chunk {kind!r} has a wrong CRC")
        at = end
        if kind == b"IEND":
            if at != len(raw):
                raise malformed(f"{w}: png: bytes follow the IEND chunk")
            return trns
        if kind == b"tRNS":
            trns = True


def decode(codec: int, raw, row_shape: tuple, raw_len: int, w: str) -> bytes:
    """CMP-07: header (`malformed`), profile (`invalid`), header shape == row shape
    (`invalid`), then the pixels and the file's end (`malformed` if the file does not decode to
    exactly `raw_len` bytes or has bytes after the image)."""
    if _Image is None:
        raise NotSupportedHere("image pages need Pillow (scripts/setup.d/30-encoded.sh)")
    raw = bytes(raw)
    name = _NAMES[codec]
    if codec == CODEC_JPEG:
        _jpeg_profile(_jpeg_frame(raw, w), w)
    elif codec == CODEC_PNG and _png_chunks(raw, False, w):
        raise invalid(f"{w}: png with a tRNS chunk")
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
    if codec == CODEC_JPEG:
        _jpeg_ends_at_eoi(raw, w)
    elif codec == CODEC_PNG:
        _png_chunks(raw, True, w)
    elif int.from_bytes(raw[4:8], "little") + 8 != len(raw):
        raise malformed(f"{w}: webp: the RIFF size is not the file size - 8")
    return pixels
