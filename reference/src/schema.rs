//! Schema: columns, shapes, kinds and per-column compression (SPEC.md §"Data model").

use serde::{Deserialize, Serialize};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::limits::hard;

/// One dimension of a column's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dim {
    /// The same size for every row (zero allowed).
    Fixed(u64),
    /// A size stored per row in the data file's shape block.
    Ragged,
}

/// Per-column compression of value pages `[CMP-02]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Compression {
    /// Stored as is (pages can be handed out without copying).
    None,
    /// LZ4 block format: fast to decode, modest ratio.
    Lz4,
    /// Zstandard frame at the given level (1..=22).
    Zstd {
        /// Compression level, 1..=22.
        level: i32,
    },
    /// Each image kept as its JPEG, PNG or WebP file, one image page per row `[CMP-05]`; other
    /// rows (nulls, images that cannot be kept) in zstd pages.
    Encoded,
}

impl Compression {
    /// The codec a block written with this compression carries.
    #[must_use]
    pub fn codec(self) -> Codec {
        match self {
            Self::None => Codec::None,
            Self::Lz4 => Codec::Lz4,
            // An encoded column's pages that are not image pages are zstd pages.
            Self::Zstd { .. } | Self::Encoded => Codec::Zstd,
        }
    }
}

/// The codec of one stored block (no level: decoding does not need it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Codec {
    /// Raw bytes.
    None,
    /// LZ4 block format.
    Lz4,
    /// One Zstandard frame.
    Zstd,
    /// One JPEG file, one row `[CMP-06]`.
    Jpeg,
    /// One PNG file, one row `[CMP-06]`.
    Png,
    /// One WebP file, one row `[CMP-06]`.
    WebP,
}

impl Codec {
    /// The name used in SPEC.md and dumps.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Lz4 => "lz4",
            Self::Zstd => "zstd",
            Self::Jpeg => "jpeg",
            Self::Png => "png",
            Self::WebP => "webp",
        }
    }

    /// Whether this is an image codec, whose blocks hold one encoded image `[CMP-06]`.
    #[must_use]
    pub fn is_image(self) -> bool {
        matches!(self, Self::Jpeg | Self::Png | Self::WebP)
    }
}

/// Memory layout of an image column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ImageLayout {
    /// `[height, width, channels]`.
    Hwc,
    /// `[channels, height, width]`.
    Chw,
    /// `[height, width]`, one channel.
    Hw,
}

/// The similarity an embedding column is meant for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Metric {
    /// Not stated.
    Unspecified,
    /// Cosine similarity.
    Cosine,
    /// Inner product.
    Dot,
    /// Euclidean distance.
    L2,
}

/// Coordinate convention of a bounding-box column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BBoxFormat {
    /// `x_min, y_min, x_max, y_max`.
    Xyxy,
    /// `x_min, y_min, width, height`.
    Xywh,
    /// `x_center, y_center, width, height`.
    Cxcywh,
}

/// What a column means; each kind constrains dtype and shape `[KND-01]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Kind {
    /// Any dtype and shape.
    Generic,
    /// An image of the given layout.
    Image {
        /// The axis order.
        layout: ImageLayout,
    },
    /// Frames `[T, H, W, C]`.
    Video {
        /// Frames per second × 1000 (0 = unknown).
        fps_milli: u32,
    },
    /// Samples `[S]` or `[S, C]`.
    Audio {
        /// Samples per second, > 0.
        sample_rate: u32,
    },
    /// One UTF-8 string per row.
    Text,
    /// A token id sequence `[L]`.
    Tokens {
        /// Every id is below this, when given.
        vocab_size: Option<u64>,
    },
    /// A fixed-length float vector `[D]`.
    Embedding {
        /// The intended similarity.
        metric: Metric,
    },
    /// An integer class id (rank 0) or several (rank 1), indexing `names`.
    ClassLabel {
        /// The class names; ids are indices into this list.
        names: Vec<String>,
    },
    /// Boxes `[N, 4]` or one box `[4]`.
    BBox {
        /// The coordinate convention.
        format: BBoxFormat,
        /// Coordinates are fractions of the image size.
        normalized: bool,
    },
    /// A segmentation mask `[H, W]` or `[H, W, C]`.
    Mask,
    /// One JSON document per row, as UTF-8 text.
    Json,
}

impl Kind {
    /// The kind's name in SPEC.md and dumps.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Generic => "generic",
            Self::Image { .. } => "image",
            Self::Video { .. } => "video",
            Self::Audio { .. } => "audio",
            Self::Text => "text",
            Self::Tokens { .. } => "tokens",
            Self::Embedding { .. } => "embedding",
            Self::ClassLabel { .. } => "class_label",
            Self::BBox { .. } => "bbox",
            Self::Mask => "mask",
            Self::Json => "json",
        }
    }
}

/// A column: a typed tensor per row.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Column {
    /// Stable id, unique within the dataset's history; never reused.
    pub id: u32,
    /// Unique name, 1..=256 bytes of UTF-8 without control characters.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Per-row shape; `utf8`/`bytes` columns have rank 0.
    pub shape: Vec<Dim>,
    /// Meaning and its constraints.
    pub kind: Kind,
    /// Compression of value pages.
    pub compression: Compression,
    /// Whether rows may be null.
    pub nullable: bool,
    /// Free-form key/value pairs, sorted by key, keys unique.
    pub metadata: Vec<(String, String)>,
}

impl Column {
    /// A generic, uncompressed, non-nullable column. The id is assigned when the column
    /// becomes part of a [`Schema`] through [`Schema::new`].
    #[must_use]
    pub fn new(name: impl Into<String>, dtype: DType, shape: &[Dim]) -> Self {
        Self {
            id: 0,
            name: name.into(),
            dtype,
            shape: shape.to_vec(),
            kind: Kind::Generic,
            compression: Compression::None,
            nullable: false,
            metadata: Vec::new(),
        }
    }

    /// Sets the kind.
    #[must_use]
    pub fn with_kind(mut self, kind: Kind) -> Self {
        self.kind = kind;
        self
    }

    /// Sets the compression.
    #[must_use]
    pub fn with_compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Makes the column nullable.
    #[must_use]
    pub fn nullable(mut self) -> Self {
        self.nullable = true;
        self
    }

    /// Adds a metadata entry (kept sorted by key).
    #[must_use]
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let key = key.into();
        self.metadata.retain(|(k, _)| *k != key);
        self.metadata.push((key, value.into()));
        self.metadata.sort();
        self
    }

    /// Number of per-row sizes the shape block stores: one per ragged dim, plus one for the
    /// byte length of a `utf8`/`bytes` row `[SHP-03]`.
    #[must_use]
    pub fn ragged_dims(&self) -> usize {
        self.shape.iter().filter(|d| matches!(d, Dim::Ragged)).count() + usize::from(self.dtype.is_variable())
    }

    /// Bytes of one row when every dim is fixed and the dtype has a fixed size.
    #[must_use]
    pub fn fixed_row_bytes(&self) -> Option<u64> {
        if self.ragged_dims() > 0 {
            return None;
        }
        // A zero dim makes the product zero whatever the others are [SHP-04].
        if self.shape.contains(&Dim::Fixed(0)) {
            return Some(0);
        }
        let mut n = self.dtype.item_size() as u64;
        for d in &self.shape {
            if let Dim::Fixed(x) = d {
                n = n.checked_mul(*x)?;
            }
        }
        Some(n)
    }

    /// Checks the column on its own: name, rank, kind constraints, compression level.
    ///
    /// # Errors
    /// `invalid` for a broken rule, `limit` for a hard maximum exceeded.
    pub fn validate(&self) -> Result<()> {
        let what = || format!("column {:?}", self.name);
        validate_name(&self.name, &what())?;
        Error::check_limit(|| format!("{}: rank", what()), hard::MAX_RANK, self.shape.len() as u64)?;
        if self.dtype.is_variable() && !self.shape.is_empty() {
            return Err(Error::invalid(what(), "utf8 and bytes columns must have rank 0 [DT-04]"));
        }
        if let Compression::Zstd { level } = self.compression
            && !(1..=22).contains(&level)
        {
            return Err(Error::invalid(what(), format!("zstd level {level} outside 1..=22 [CMP-01]")));
        }
        if self.compression == Compression::Encoded && !self.encodable() {
            return Err(Error::invalid(
                what(),
                "encoded columns must be u8 images, layout hw or hwc with a fixed last dim of 1 to 4 [CMP-05]",
            ));
        }
        validate_metadata(&self.metadata, &what())?;
        if let Some(bytes) = self.fixed_row_bytes() {
            Error::check_limit(|| format!("{}: row bytes", what()), hard::MAX_ROW_BYTES, bytes)?;
        } else if self.ragged_dims() == 0 {
            return Err(Error::limit(format!("{}: row bytes", what()), hard::MAX_ROW_BYTES, u64::MAX));
        }
        if let Kind::ClassLabel { names } = &self.kind {
            Error::check_limit(|| format!("{}: class names", what()), hard::MAX_CLASS_NAMES, names.len() as u64)?;
        }
        self.validate_kind().map_err(|reason| Error::invalid(what(), reason))
    }

    /// Whether the column may have `Compression::Encoded` `[CMP-05]`: dtype `u8`, kind image,
    /// layout `Hw`, or `Hwc` with a last dim of `Fixed(1..=4)`.
    #[must_use]
    pub fn encodable(&self) -> bool {
        self.dtype == DType::U8
            && match (&self.kind, self.shape.as_slice()) {
                (Kind::Image { layout: ImageLayout::Hw }, [_, _]) => true,
                (Kind::Image { layout: ImageLayout::Hwc }, [_, _, Dim::Fixed(c)]) => (1..=4).contains(c),
                _ => false,
            }
    }

    fn validate_kind(&self) -> Result<(), String> {
        let rank = self.shape.len();
        let d = self.dtype;
        let fail = |rule: &str| Err(format!("{} column: {rule}", self.kind.name()));
        match &self.kind {
            Kind::Generic => Ok(()),
            Kind::Image { layout } => {
                if !matches!(d, DType::U8 | DType::U16 | DType::F16 | DType::Bf16 | DType::F32) {
                    return fail("dtype must be u8, u16, f16, bf16 or f32 [KND-02]");
                }
                let want = if *layout == ImageLayout::Hw { 2 } else { 3 };
                if rank == want { Ok(()) } else { fail("rank must be 3 for hwc/chw and 2 for hw [KND-02]") }
            }
            Kind::Video { .. } => {
                if !d.is_numeric() || d == DType::Bool || rank != 4 {
                    fail("numeric dtype with rank 4 [T,H,W,C] required [KND-03]")
                } else {
                    Ok(())
                }
            }
            Kind::Audio { sample_rate } => {
                if !d.is_numeric() || d == DType::Bool || !(rank == 1 || rank == 2) {
                    fail("numeric dtype with rank 1 or 2 required [KND-04]")
                } else if *sample_rate == 0 {
                    fail("sample_rate must be > 0 [KND-04]")
                } else {
                    Ok(())
                }
            }
            Kind::Text | Kind::Json => {
                if d == DType::Utf8 {
                    Ok(())
                } else {
                    fail("dtype must be utf8 [KND-05]")
                }
            }
            Kind::Tokens { .. } => {
                if d.is_integer() && rank == 1 {
                    Ok(())
                } else {
                    fail("integer dtype with rank 1 required [KND-06]")
                }
            }
            Kind::Embedding { .. } => {
                if d.is_float() && matches!(self.shape.as_slice(), [Dim::Fixed(_)]) {
                    Ok(())
                } else {
                    fail("float dtype with one fixed dim required [KND-07]")
                }
            }
            Kind::ClassLabel { names } => {
                if !d.is_integer() || rank > 1 {
                    return fail("integer dtype with rank 0 or 1 required [KND-08]");
                }
                // (The count itself is checked as a limit in `validate`.)
                let mut sorted: Vec<&String> = names.iter().collect();
                sorted.sort();
                if sorted.windows(2).any(|w| w[0] == w[1]) {
                    fail("class names must be unique [KND-08]")
                } else {
                    Ok(())
                }
            }
            Kind::BBox { .. } => {
                let ok = d.is_numeric()
                    && d != DType::Bool
                    && matches!(self.shape.as_slice(), [Dim::Fixed(4)] | [_, Dim::Fixed(4)]);
                if ok { Ok(()) } else { fail("numeric dtype with shape [4] or [N, 4] required [KND-09]") }
            }
            Kind::Mask => {
                if (d == DType::Bool || d.is_integer()) && (rank == 2 || rank == 3) {
                    Ok(())
                } else {
                    fail("bool or integer dtype with rank 2 or 3 required [KND-10]")
                }
            }
        }
    }
}

/// The columns of a dataset version.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Schema {
    /// The columns in schema order.
    pub columns: Vec<Column>,
    /// Dataset-level key/value pairs, sorted by key.
    pub metadata: Vec<(String, String)>,
}

impl Schema {
    /// Builds a schema, assigning column ids 0, 1, 2, … in order.
    ///
    /// # Errors
    /// The first column or schema rule broken (see [`Schema::validate`]).
    pub fn new(columns: impl IntoIterator<Item = Column>) -> Result<Self> {
        let columns: Vec<Column> = columns
            .into_iter()
            .enumerate()
            .map(|(i, mut c)| {
                c.id = u32::try_from(i).unwrap_or(u32::MAX);
                c
            })
            .collect();
        let schema = Self { columns, metadata: Vec::new() };
        schema.validate()?;
        Ok(schema)
    }

    /// Adds a dataset-level metadata entry (kept sorted by key).
    #[must_use]
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let key = key.into();
        self.metadata.retain(|(k, _)| *k != key);
        self.metadata.push((key, value.into()));
        self.metadata.sort();
        self
    }

    /// The column of a name.
    #[must_use]
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// The column of an id.
    #[must_use]
    pub fn column_by_id(&self, id: u32) -> Option<&Column> {
        self.columns.iter().find(|c| c.id == id)
    }

    /// Checks every column and the schema-wide rules: count, unique names and ids `[MAN-04]`.
    ///
    /// # Errors
    /// `invalid` or `limit` naming the first rule broken.
    pub fn validate(&self) -> Result<()> {
        Error::check_limit(|| "schema: columns".into(), hard::MAX_COLUMNS, self.columns.len() as u64)?;
        validate_metadata(&self.metadata, "schema")?;
        for c in &self.columns {
            c.validate()?;
        }
        let mut names: Vec<&str> = self.columns.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        if let Some([a, _]) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::invalid("schema", format!("duplicate column name {a:?} [MOD-03]")));
        }
        let mut ids: Vec<u32> = self.columns.iter().map(|c| c.id).collect();
        ids.sort_unstable();
        if let Some([a, _]) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::invalid("schema", format!("duplicate column id {a} [MOD-02]")));
        }
        Ok(())
    }
}

/// Checks a column name: 1..=256 bytes, no control characters `[MOD-03]`.
pub(crate) fn validate_name(name: &str, what: &str) -> Result<()> {
    Error::check_limit(|| format!("{what}: name bytes"), hard::MAX_NAME_BYTES, name.len() as u64)?;
    if name.is_empty() || name.chars().any(char::is_control) {
        return Err(Error::invalid(what, "names must be non-empty without control characters [MOD-03]"));
    }
    Ok(())
}

/// Checks a metadata list: bounded, keys unique and sorted `[MOD-04]`.
pub(crate) fn validate_metadata(m: &[(String, String)], what: &str) -> Result<()> {
    Error::check_limit(|| format!("{what}: metadata entries"), hard::MAX_METADATA_ENTRIES, m.len() as u64)?;
    for (k, v) in m {
        let longest = k.len().max(v.len()) as u64;
        Error::check_limit(|| format!("{what}: metadata entry"), hard::MAX_METADATA_VALUE_BYTES, longest)?;
    }
    if m.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Err(Error::invalid(what, "metadata keys must be unique and sorted [MOD-04]"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    #[test]
    fn kind_constraints_are_enforced() {
        let img = Column::new("img", DType::U8, &[Dim::Fixed(4), Dim::Fixed(4), Dim::Fixed(3)])
            .with_kind(Kind::Image { layout: ImageLayout::Hwc });
        assert!(img.validate().is_ok());
        let bad = img.clone().with_kind(Kind::Image { layout: ImageLayout::Hw });
        assert_eq!(bad.validate().unwrap_err().class(), ErrorClass::Invalid);
        let text = Column::new("t", DType::I32, &[]).with_kind(Kind::Text);
        assert_eq!(text.validate().unwrap_err().class(), ErrorClass::Invalid);
        let emb = Column::new("e", DType::F32, &[Dim::Ragged]).with_kind(Kind::Embedding { metric: Metric::Cosine });
        assert!(emb.validate().is_err());
        let labels =
            Column::new("l", DType::I64, &[]).with_kind(Kind::ClassLabel { names: vec!["a".into(), "a".into()] });
        assert!(labels.validate().is_err());
        let bbox = Column::new("b", DType::F32, &[Dim::Ragged, Dim::Fixed(4)])
            .with_kind(Kind::BBox { format: BBoxFormat::Xyxy, normalized: true });
        assert!(bbox.validate().is_ok());
    }

    #[test]
    fn schema_rejects_duplicates_and_bad_names() {
        let a = Column::new("a", DType::U8, &[]);
        assert!(Schema::new([a.clone(), a.clone()]).is_err());
        assert!(Schema::new([Column::new("", DType::U8, &[])]).is_err());
        assert!(Schema::new([Column::new("x\n", DType::U8, &[])]).is_err());
        let s = Schema::new([a, Column::new("日本語", DType::Utf8, &[])]).unwrap();
        assert_eq!(s.columns[1].id, 1);
        assert_eq!(s.columns[1].ragged_dims(), 1);
    }

    #[test]
    fn oversized_rows_hit_the_limit() {
        let c = Column::new("big", DType::F64, &[Dim::Fixed(1 << 20), Dim::Fixed(1 << 20)]);
        assert_eq!(c.validate().unwrap_err().class(), ErrorClass::Limit);
        let c = Column::new("v", DType::Utf8, &[Dim::Fixed(2)]);
        assert_eq!(c.validate().unwrap_err().class(), ErrorClass::Invalid);
    }
}
