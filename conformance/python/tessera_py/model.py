"""The structs of SPEC.md §3, §7.4, §8, §8.3, §9, §10, §11 and §12, decoded with the §6 rules."""

from dataclasses import dataclass, field

from .bincode import Decoder

# §3.2: code -> (name, item size, category)
DTYPES = [
    ("bool", 1, "bool"),
    ("u8", 1, "int"), ("u16", 2, "int"), ("u32", 4, "int"), ("u64", 8, "int"),
    ("i8", 1, "int"), ("i16", 2, "int"), ("i32", 4, "int"), ("i64", 8, "int"),
    ("f16", 2, "float"), ("bf16", 2, "float"), ("f32", 4, "float"), ("f64", 8, "float"),
    ("utf8", 1, "var"), ("bytes", 1, "var"),
]
DT_BOOL, DT_UTF8, DT_BYTES = 0, 13, 14
SIGNED = {5, 6, 7, 8}

KIND_NAMES = ["generic", "image", "video", "audio", "text", "tokens", "embedding",
              "class_label", "bbox", "mask", "json"]
IMAGE_LAYOUTS = ["hwc", "chw", "hw"]
METRICS = ["unspecified", "cosine", "dot", "l2"]
BBOX_FORMATS = ["xyxy", "xywh", "cxcywh"]
CODECS = ["none", "lz4", "zstd", "jpeg", "png", "webp"]  # 3 to 5: image codecs (CMP-06)
CODEC_NONE, CODEC_LZ4, CODEC_ZSTD = 0, 1, 2
COMPRESSION_ENCODED = 3  # Compression::Encoded (CMP-05); not a block codec
READER_FLAG_ENCODED_IMAGES = 1  # FLG-08
READER_FLAG_FRAGMENT_TREE = 2  # FLG-09

RAGGED = None  # a Dim is an int (Fixed(n)) or None (Ragged)


def dtype_name(code):
    return DTYPES[code][0]


def item_size(code):
    return DTYPES[code][1]


def is_var(code):
    return DTYPES[code][2] == "var"


def is_int(code):
    return DTYPES[code][2] == "int"


def is_float(code):
    return DTYPES[code][2] == "float"


def is_numeric(code):
    return DTYPES[code][2] in ("int", "float")


@dataclass
class Kind:
    type: int
    params: dict = field(default_factory=dict)


@dataclass
class Column:
    id: int
    name: str
    dtype: int
    shape: list           # of int (Fixed) or None (Ragged)
    kind: Kind
    compression: tuple    # (codec index, zstd level or None)
    nullable: bool
    metadata: list        # of (key, value)

    @property
    def ragged_dims(self) -> int:  # SHP-03
        if is_var(self.dtype):
            return 1
        return sum(1 for d in self.shape if d is RAGGED)


@dataclass
class Schema:
    columns: list
    metadata: list


@dataclass
class VersionRef:
    branch: str
    version: int


@dataclass
class SegmentRef:
    path: str
    size: int
    crc32: int
    fragment_count: int
    row_count: int


@dataclass
class Manifest:
    reader_flags: int
    writer_flags: int
    branch: str
    version: int
    parent: VersionRef | None
    base: VersionRef | None
    merged: VersionRef | None
    timestamp_ms: int
    message: str
    writer_id: bytes
    schema: Schema
    next_column_id: int
    next_fragment_id: int
    row_count: int
    segments: list
    stats: list
    metadata: list
    envelope_crc: int = 0


@dataclass
class DataFileRef:
    path: str
    size: int
    footer_crc32: int
    column_ids: list


@dataclass
class DeletionRef:
    path: str
    size: int
    crc32: int
    deleted_count: int


@dataclass
class Fragment:
    id: int
    row_count: int
    files: list
    deletion: DeletionRef | None
    stats: list


@dataclass
class Segment:
    fragments: list
    removed: list


@dataclass
class NodeRef:
    path: str
    size: int
    crc32: int
    first_id: int
    last_id: int
    fragment_count: int
    row_count: int
    live_row_count: int
    stats: list


@dataclass
class IndexNode:
    level: int
    fragments: list   # of Fragment: a leaf's
    children: list    # of NodeRef: an inner node's


@dataclass
class DeletionVector:
    fragment_id: int
    rows: list


@dataclass
class Tag:
    name: str
    target: VersionRef
    manifest_crc32: int
    timestamp_ms: int
    message: str


@dataclass
class Block:
    offset: int
    stored_len: int
    raw_len: int
    codec: int
    crc32: int


@dataclass
class Page:
    row_count: int
    block: Block


@dataclass
class ColumnChunk:
    column_id: int
    dtype: int
    ragged_dims: int
    validity: Block | None
    shapes: Block | None
    pages: list


@dataclass
class Footer:
    row_count: int
    columns: list


# --- decoders -----------------------------------------------------------------------------

def _metadata(d: Decoder) -> list:
    return d.vec(lambda d: (d.string("metadata key"), d.string("metadata value")), "metadata")


def _version_ref(d: Decoder) -> VersionRef:
    return VersionRef(d.string("VersionRef.branch"), d.u64("VersionRef.version"))


def _dim(d: Decoder):
    v = d.variant(2, "Dim")
    return d.u64("Dim::Fixed") if v == 0 else RAGGED


def _kind(d: Decoder) -> Kind:
    t = d.variant(len(KIND_NAMES), "Kind")
    p = {}
    if t == 1:
        p["layout"] = d.variant(len(IMAGE_LAYOUTS), "ImageLayout")
    elif t == 2:
        p["fps_milli"] = d.u32("Video.fps_milli")
    elif t == 3:
        p["sample_rate"] = d.u32("Audio.sample_rate")
    elif t == 5:
        p["vocab_size"] = d.option(lambda d: d.u64("vocab_size"), "Tokens.vocab_size")
    elif t == 6:
        p["metric"] = d.variant(len(METRICS), "Metric")
    elif t == 7:
        p["names"] = d.vec(lambda d: d.string("ClassLabel name"), "ClassLabel.names")
    elif t == 8:
        p["format"] = d.variant(len(BBOX_FORMATS), "BBoxFormat")
        p["normalized"] = d.boolean("BBox.normalized")
    return Kind(t, p)


def _compression(d: Decoder) -> tuple:
    v = d.variant(4, "Compression")  # 3: Encoded (CMP-05)
    return (v, d.i32("Zstd.level") if v == 2 else None)


def _column(d: Decoder) -> Column:
    return Column(
        id=d.u32("Column.id"),
        name=d.string("Column.name"),
        dtype=d.variant(len(DTYPES), "DType"),
        shape=d.vec(_dim, "Column.shape"),
        kind=_kind(d),
        compression=_compression(d),
        nullable=d.boolean("Column.nullable"),
        metadata=_metadata(d),
    )


def _schema(d: Decoder) -> Schema:
    return Schema(d.vec(_column, "Schema.columns"), _metadata(d))


def _scalar(d: Decoder):
    v = d.variant(4, "Scalar")
    if v == 0:
        return ("bool", d.boolean("Scalar::Bool"))
    if v == 1:
        return ("int", d.i64("Scalar::Int"))
    if v == 2:
        return ("uint", d.u64("Scalar::UInt"))
    return ("float", d.f64_bits("Scalar::Float"))


def _column_stats(d: Decoder) -> tuple:
    return (d.u32("ColumnStats.column_id"), d.u64("ColumnStats.null_count"),
            d.option(_scalar, "ColumnStats.min"), d.option(_scalar, "ColumnStats.max"))


def _segment_ref(d: Decoder) -> SegmentRef:
    return SegmentRef(d.string("SegmentRef.path"), d.u64("SegmentRef.size"),
                      d.u32("SegmentRef.crc32"), d.u64("SegmentRef.fragment_count"),
                      d.u64("SegmentRef.row_count"))


def decode_manifest(body) -> Manifest:
    d = Decoder(body, "manifest body")
    m = Manifest(
        reader_flags=d.u64("reader_flags"),
        writer_flags=d.u64("writer_flags"),
        branch=d.string("branch"),
        version=d.u64("version"),
        parent=d.option(_version_ref, "parent"),
        base=d.option(_version_ref, "base"),
        merged=d.option(_version_ref, "merged"),
        timestamp_ms=d.u64("timestamp_ms"),
        message=d.string("message"),
        writer_id=d.fixed_bytes(16, "writer_id"),
        schema=_schema(d),
        next_column_id=d.u32("next_column_id"),
        next_fragment_id=d.u64("next_fragment_id"),
        row_count=d.u64("row_count"),
        segments=d.vec(_segment_ref, "segments"),
        stats=d.vec(_column_stats, "stats"),
        metadata=_metadata(d),
    )
    d.finish()
    return m


def _data_file_ref(d: Decoder) -> DataFileRef:
    return DataFileRef(d.string("DataFileRef.path"), d.u64("DataFileRef.size"),
                       d.u32("DataFileRef.footer_crc32"), d.vec_u32("DataFileRef.column_ids"))


def _deletion_ref(d: Decoder) -> DeletionRef:
    return DeletionRef(d.string("DeletionRef.path"), d.u64("DeletionRef.size"),
                       d.u32("DeletionRef.crc32"), d.u64("DeletionRef.deleted_count"))


def _fragment(d: Decoder) -> Fragment:
    return Fragment(
        id=d.u64("Fragment.id"),
        row_count=d.u64("Fragment.row_count"),
        files=d.vec(_data_file_ref, "Fragment.files"),
        deletion=d.option(_deletion_ref, "Fragment.deletion"),
        stats=d.vec(_column_stats, "Fragment.stats"),
    )


def decode_segment(body) -> Segment:
    d = Decoder(body, "segment body")
    s = Segment(d.vec(_fragment, "Segment.fragments"), d.vec_u64("Segment.removed"))
    d.finish()
    return s


def _node_ref(d: Decoder) -> NodeRef:
    return NodeRef(d.string("NodeRef.path"), d.u64("NodeRef.size"), d.u32("NodeRef.crc32"),
                   d.u64("NodeRef.first_id"), d.u64("NodeRef.last_id"),
                   d.u64("NodeRef.fragment_count"), d.u64("NodeRef.row_count"),
                   d.u64("NodeRef.live_row_count"), d.vec(_column_stats, "NodeRef.stats"))


def decode_index_node(body) -> IndexNode:
    d = Decoder(body, "index node body")
    n = IndexNode(d.u32("IndexNode.level"), d.vec(_fragment, "IndexNode.fragments"),
                  d.vec(_node_ref, "IndexNode.children"))
    d.finish()
    return n


def decode_deletion_vector(body) -> DeletionVector:
    d = Decoder(body, "deletion vector body")
    v = DeletionVector(d.u64("DeletionVector.fragment_id"), d.vec_u64("DeletionVector.rows"))
    d.finish()
    return v


def decode_tag(body) -> Tag:
    d = Decoder(body, "tag body")
    t = Tag(d.string("Tag.name"), _version_ref(d), d.u32("Tag.manifest_crc32"),
            d.u64("Tag.timestamp_ms"), d.string("Tag.message"))
    d.finish()
    return t


def _block(d: Decoder) -> Block:
    return Block(d.u64("Block.offset"), d.u64("Block.stored_len"), d.u64("Block.raw_len"),
                 d.variant(len(CODECS), "Codec"), d.u32("Block.crc32"))


def _page(d: Decoder) -> Page:
    return Page(d.u64("Page.row_count"), _block(d))


def _chunk(d: Decoder) -> ColumnChunk:
    return ColumnChunk(
        column_id=d.u32("ColumnChunk.column_id"),
        dtype=d.variant(len(DTYPES), "ColumnChunk.dtype"),
        ragged_dims=d.u32("ColumnChunk.ragged_dims"),
        validity=d.option(_block, "ColumnChunk.validity"),
        shapes=d.option(_block, "ColumnChunk.shapes"),
        pages=d.vec(_page, "ColumnChunk.pages"),
    )


def decode_footer(buf, start: int, end: int) -> Footer:
    d = Decoder(buf, "data file footer", start, end)
    f = Footer(d.u64("Footer.row_count"), d.vec(_chunk, "Footer.columns"))
    d.finish()
    return f
