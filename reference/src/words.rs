//! The words of the schema, spelled once: every dtype, kind, image layout, metric, bounding-box
//! format and compression prints with `Display` and parses with `FromStr`, so the CLI, the
//! Python package and the conformance suite say the same thing (SPEC.md §3; the dump's JSON
//! form of a column, DUMP-02, builds on the single words).
//!
//! | word | printed | also parsed |
//! |---|---|---|
//! | [`DType`] | `u8`, `bf16`, `utf8`, … | |
//! | a shape ([`ShapeDisplay`]) | `[224, 224, 3]`, `[?, ?, 3]` (`?`: a ragged dim) | |
//! | [`ImageLayout`] | `hwc`, `chw`, `hw` | |
//! | [`Metric`] | `unspecified`, `cosine`, `dot`, `l2` | |
//! | [`BBoxFormat`] | `xyxy`, `xywh`, `cxcywh` | |
//! | [`Compression`] | `none`, `lz4`, `zstd:3`, `encoded` | `zstd` (level 3) |
//! | [`Kind`] | `generic`, `image(hwc)`, `audio(16000 Hz)`, `video(29.970 fps)`, `tokens`, `tokens(vocab 32000)`, `embedding`, `embedding(cosine)`, `bbox(xywh)`, `bbox(xyxy, normalized)`, `class_label(2: cat, dog)`, `text`, `json`, `mask` | `NAME:ARG` for `NAME(ARG)`; the unit words optional; `image`, `bbox` and `video` alone (hwc, xyxy, 0 fps) |
//!
//! A class name that is empty, has outer spaces, or holds `,`, `(`, `)`, `"` or a control
//! character prints as a JSON string, so every valid kind parses back to itself. A precision
//! caps the class names listed, for display: `format!("{kind:.2}")` gives
//! `class_label(3: cat, dog, …)`.

use std::fmt;
use std::str::FromStr;

use crate::dtype::DType;
use crate::schema::{BBoxFormat, Compression, Dim, ImageLayout, Kind, Metric};

/// The zstd level of a bare `zstd` (and of the CLI's default for text and JSON columns).
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;

/// A word that is not one of the schema's: what was being parsed, the input, and the accepted
/// forms.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {input:?} (expected {expected})")]
pub struct ParseWordError {
    /// What was being parsed (`image layout`, `kind`, …).
    pub what: &'static str,
    /// The text given.
    pub input: String,
    /// The accepted forms, as a reader would type them.
    pub expected: &'static str,
}

impl ParseWordError {
    fn new(what: &'static str, input: &str, expected: &'static str) -> Self {
        Self { what, input: input.to_owned(), expected }
    }
}

impl From<ParseWordError> for crate::Error {
    fn from(e: ParseWordError) -> Self {
        Self::usage(e.to_string())
    }
}

/// A column's shape as messages print it: `[224, 224, 3]`, `[?, 4]` (`?` is a ragged dim),
/// `[]` for a scalar.
#[derive(Clone, Copy, Debug)]
pub struct ShapeDisplay<'a>(pub &'a [Dim]);

impl fmt::Display for ShapeDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match d {
                Dim::Fixed(n) => write!(f, "{n}")?,
                Dim::Ragged => f.write_str("?")?,
            }
        }
        f.write_str("]")
    }
}

/// `Display` by `name()`, `FromStr` by `from_name()`, for the one-word enums.
macro_rules! word {
    ($t:ty, $what:literal, $expected:literal) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $t {
            type Err = ParseWordError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::from_name(s).ok_or_else(|| ParseWordError::new($what, s, $expected))
            }
        }
    };
}

word!(ImageLayout, "image layout", "hwc, chw or hw");
word!(Metric, "metric", "unspecified, cosine, dot or l2");
word!(BBoxFormat, "bbox format", "xyxy, xywh or cxcywh");

impl FromStr for DType {
    type Err = ParseWordError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s).ok_or_else(|| {
            ParseWordError::new(
                "dtype",
                s,
                "bool, u8, u16, u32, u64, i8, i16, i32, i64, f16, bf16, f32, f64, utf8 or bytes",
            )
        })
    }
}

impl ImageLayout {
    /// Every layout.
    pub const ALL: [Self; 3] = [Self::Hwc, Self::Chw, Self::Hw];

    /// The name in SPEC.md and dumps.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Hwc => "hwc",
            Self::Chw => "chw",
            Self::Hw => "hw",
        }
    }

    /// The layout of a name (the inverse of [`ImageLayout::name`]).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.name() == name)
    }
}

impl Metric {
    /// Every metric.
    pub const ALL: [Self; 4] = [Self::Unspecified, Self::Cosine, Self::Dot, Self::L2];

    /// The name in SPEC.md and dumps.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Unspecified => "unspecified",
            Self::Cosine => "cosine",
            Self::Dot => "dot",
            Self::L2 => "l2",
        }
    }

    /// The metric of a name (the inverse of [`Metric::name`]).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.name() == name)
    }
}

impl BBoxFormat {
    /// Every format.
    pub const ALL: [Self; 3] = [Self::Xyxy, Self::Xywh, Self::Cxcywh];

    /// The name in SPEC.md and dumps.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Xyxy => "xyxy",
            Self::Xywh => "xywh",
            Self::Cxcywh => "cxcywh",
        }
    }

    /// The format of a name (the inverse of [`BBoxFormat::name`]).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.name() == name)
    }
}

const COMPRESSIONS: &str = "none, lz4, zstd, zstd:1..22 or encoded";

impl Compression {
    /// The codec's name in dumps (DUMP-02): `none`, `lz4`, `zstd` or `encoded`; the level is
    /// [`Compression::level`].
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Lz4 => "lz4",
            Self::Zstd { .. } => "zstd",
            Self::Encoded => "encoded",
        }
    }

    /// The zstd level, for zstd.
    #[must_use]
    pub fn level(self) -> Option<i32> {
        match self {
            Self::Zstd { level } => Some(level),
            _ => None,
        }
    }

    /// The compression of a codec name (the inverse of [`Compression::name`]); `zstd` at
    /// [`DEFAULT_ZSTD_LEVEL`].
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "none" => Self::None,
            "lz4" => Self::Lz4,
            "zstd" => Self::Zstd { level: DEFAULT_ZSTD_LEVEL },
            "encoded" => Self::Encoded,
            _ => return None,
        })
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        match self.level() {
            Some(level) => write!(f, ":{level}"),
            None => Ok(()),
        }
    }
}

impl FromStr for Compression {
    type Err = ParseWordError;
    /// `none`, `lz4`, `zstd`, `zstd:LEVEL` (1..=22, CMP-01) or `encoded`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ParseWordError::new("compression", s, COMPRESSIONS);
        match s.split_once(':') {
            None => Self::from_name(s).ok_or_else(bad),
            Some(("zstd", level)) => match level.parse::<i32>() {
                Ok(level) if (1..=22).contains(&level) => Ok(Self::Zstd { level }),
                _ => Err(bad()),
            },
            Some(_) => Err(bad()),
        }
    }
}

const KINDS: &str = "generic, text, json, mask, image[:hwc|chw|hw], embedding[:cosine|dot|l2], tokens[:VOCAB], \
                     bbox[:xyxy|xywh|cxcywh[ normalized]], audio:RATE, video[:FPS] or class_label:N: NAME, …; \
                     NAME(ARG) as printed";

impl Kind {
    /// Every kind's name, in SPEC.md's order.
    pub const NAMES: [&'static str; 11] =
        ["generic", "image", "video", "audio", "text", "tokens", "embedding", "class_label", "bbox", "mask", "json"];
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        match self {
            Self::Image { layout } => write!(f, "({layout})"),
            Self::Video { fps_milli } => write!(f, "({}.{:03} fps)", fps_milli / 1000, fps_milli % 1000),
            Self::Audio { sample_rate } => write!(f, "({sample_rate} Hz)"),
            Self::Generic
            | Self::Text
            | Self::Mask
            | Self::Json
            | Self::Tokens { vocab_size: None }
            | Self::Embedding { metric: Metric::Unspecified } => Ok(()),
            Self::Tokens { vocab_size: Some(v) } => write!(f, "(vocab {v})"),
            Self::Embedding { metric } => write!(f, "({metric})"),
            Self::BBox { format, normalized } => {
                write!(f, "({format}{})", if *normalized { ", normalized" } else { "" })
            }
            Self::ClassLabel { names } => {
                write!(f, "({}:", names.len())?;
                let shown = f.precision().unwrap_or(usize::MAX);
                for (i, n) in names.iter().take(shown).enumerate() {
                    f.write_str(if i == 0 { " " } else { ", " })?;
                    write_class_name(f, n)?;
                }
                f.write_str(if names.len() > shown { ", …)" } else { ")" })
            }
        }
    }
}

/// A class name as [`Kind`]'s `Display` prints it: bare when that parses back, else quoted.
fn write_class_name(f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
    let plain = !name.is_empty()
        && name.trim() == name
        && !name.chars().any(|c| matches!(c, ',' | '(' | ')' | '"') || c.is_control());
    if plain {
        f.write_str(name)
    } else {
        // A JSON string literal of a `&str` cannot fail to serialize.
        f.write_str(&serde_json::to_string(name).map_err(|_| fmt::Error)?)
    }
}

impl FromStr for Kind {
    type Err = ParseWordError;
    /// The printed form `NAME` or `NAME(ARG)`, or the CLI's `NAME:ARG`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ParseWordError::new("kind", s, KINDS);
        let t = s.trim();
        // The name ends at the first `(` or `:` (class names may hold either later on).
        let (name, arg) = match t.find(['(', ':']) {
            Some(at) if t[at..].starts_with('(') => (&t[..at], Some(t[at + 1..].strip_suffix(')').ok_or_else(bad)?)),
            Some(at) => (&t[..at], Some(&t[at + 1..])),
            None => (t, None),
        };
        let arg = arg.map(str::trim);
        kind_of(name.trim(), arg).ok_or_else(bad)
    }
}

/// The kind of a name and its argument, `None` when either is wrong.
fn kind_of(name: &str, arg: Option<&str>) -> Option<Kind> {
    Some(match (name, arg) {
        ("generic", None) => Kind::Generic,
        ("text", None) => Kind::Text,
        ("json", None) => Kind::Json,
        ("mask", None) => Kind::Mask,
        ("image", None) => Kind::Image { layout: ImageLayout::Hwc },
        ("image", Some(a)) => Kind::Image { layout: a.parse().ok()? },
        ("embedding", None) => Kind::Embedding { metric: Metric::Unspecified },
        ("embedding", Some(a)) => Kind::Embedding { metric: a.parse().ok()? },
        ("tokens", None) => Kind::Tokens { vocab_size: None },
        ("tokens", Some(a)) => Kind::Tokens { vocab_size: Some(number(a, "vocab").parse().ok()?) },
        ("audio", Some(a)) => Kind::Audio { sample_rate: number(a, "Hz").parse().ok().filter(|&r| r > 0)? },
        ("video", None) => Kind::Video { fps_milli: 0 },
        ("video", Some(a)) => {
            let milli = (number(a, "fps").parse::<f64>().ok()? * 1000.0).round();
            // NaN fails the range check too; in range and integral, the cast is exact.
            (0.0..=f64::from(u32::MAX)).contains(&milli).then_some(Kind::Video { fps_milli: milli as u32 })?
        }
        ("bbox", None) => Kind::BBox { format: BBoxFormat::Xyxy, normalized: false },
        ("bbox", Some(a)) => {
            let mut words = a.split([',', ' ']).filter(|w| !w.is_empty());
            let format = words.next()?.parse().ok()?;
            let normalized = match (words.next(), words.next()) {
                (None, _) => false,
                (Some("normalized"), None) => true,
                _ => return None,
            };
            Kind::BBox { format, normalized }
        }
        ("class_label", Some(a)) => Kind::ClassLabel { names: class_names(a)? },
        _ => return None,
    })
}

/// A number with its optional unit word before or after (`vocab 32000`, `16000 Hz`).
fn number<'a>(a: &'a str, unit: &str) -> &'a str {
    a.strip_prefix(unit).or_else(|| a.strip_suffix(unit)).map_or(a, str::trim)
}

/// `N: NAME, NAME, …` (names bare or JSON strings); `None` unless exactly N names.
fn class_names(arg: &str) -> Option<Vec<String>> {
    let (count, mut rest) = arg.split_once(':')?;
    let count: usize = count.trim().parse().ok()?;
    let mut names = Vec::new();
    rest = rest.trim_start();
    while !rest.is_empty() {
        let (name, after) = if rest.starts_with('"') {
            // The shortest prefix that is a whole JSON string.
            let end = json_string_end(rest)?;
            (serde_json::from_str::<String>(&rest[..end]).ok()?, &rest[end..])
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            (rest[..end].trim_end().to_owned(), &rest[end..])
        };
        names.push(name);
        let after = after.trim_start();
        rest = match after.strip_prefix(',') {
            Some(r) => r.trim_start(),
            None if after.is_empty() => after,
            None => return None,
        };
        if names.len() > count {
            return None;
        }
    }
    (names.len() == count).then_some(names)
}

/// The byte index just past the closing quote of the JSON string `s` starts with.
fn json_string_end(s: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some(i + 1),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_print_ragged_dims_as_question_marks() {
        assert_eq!(ShapeDisplay(&[]).to_string(), "[]");
        assert_eq!(ShapeDisplay(&[Dim::Fixed(224), Dim::Fixed(224), Dim::Fixed(3)]).to_string(), "[224, 224, 3]");
        assert_eq!(ShapeDisplay(&[Dim::Ragged, Dim::Fixed(4)]).to_string(), "[?, 4]");
    }

    fn kinds() -> Vec<Kind> {
        let mut v = vec![
            Kind::Generic,
            Kind::Text,
            Kind::Json,
            Kind::Mask,
            Kind::Video { fps_milli: 0 },
            Kind::Video { fps_milli: 29_970 },
            Kind::Video { fps_milli: u32::MAX },
            Kind::Audio { sample_rate: 16_000 },
            Kind::Tokens { vocab_size: None },
            Kind::Tokens { vocab_size: Some(u64::MAX) },
            Kind::ClassLabel { names: vec![] },
            Kind::ClassLabel { names: vec!["cat".into(), "dog".into()] },
            Kind::ClassLabel {
                names: vec!["a, b".into(), String::new(), " x".into(), "q\"(".into(), "日本".into(), "\n".into()],
            },
        ];
        v.extend(ImageLayout::ALL.map(|layout| Kind::Image { layout }));
        v.extend(Metric::ALL.map(|metric| Kind::Embedding { metric }));
        for format in BBoxFormat::ALL {
            v.extend([false, true].map(|normalized| Kind::BBox { format, normalized }));
        }
        v
    }

    #[test]
    fn every_word_parses_back() {
        for k in kinds() {
            assert_eq!(k.to_string().parse::<Kind>(), Ok(k.clone()), "{k}");
            assert!(Kind::NAMES.contains(&k.name()));
        }
        for c in [Compression::None, Compression::Lz4, Compression::Encoded, Compression::Zstd { level: 22 }] {
            assert_eq!(c.to_string().parse::<Compression>(), Ok(c));
            assert_eq!(Compression::from_name(c.name()).map(Compression::name), Some(c.name()));
        }
        for d in DType::ALL {
            assert_eq!(d.to_string().parse::<DType>(), Ok(d));
        }
    }

    #[test]
    fn printed_forms_are_the_documented_ones() {
        let shown: Vec<String> = [
            Kind::Image { layout: ImageLayout::Hwc },
            Kind::Audio { sample_rate: 16_000 },
            Kind::Video { fps_milli: 29_970 },
            Kind::Tokens { vocab_size: Some(32_000) },
            Kind::Embedding { metric: Metric::Unspecified },
            Kind::Embedding { metric: Metric::Cosine },
            Kind::BBox { format: BBoxFormat::Xyxy, normalized: true },
            Kind::ClassLabel { names: vec!["cat".into(), "a,b".into()] },
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            shown,
            [
                "image(hwc)",
                "audio(16000 Hz)",
                "video(29.970 fps)",
                "tokens(vocab 32000)",
                "embedding",
                "embedding(cosine)",
                "bbox(xyxy, normalized)",
                "class_label(2: cat, \"a,b\")"
            ]
        );
        assert_eq!(Compression::Zstd { level: 3 }.to_string(), "zstd:3");
        let three = Kind::ClassLabel { names: vec!["cat".into(), "dog".into(), "owl".into()] };
        assert_eq!(format!("{three:.2}"), "class_label(3: cat, dog, …)");
        assert_eq!(format!("{three:.3}"), "class_label(3: cat, dog, owl)");
    }

    #[test]
    fn cli_shorthands_parse() {
        let p = |s: &str| s.parse::<Kind>();
        assert_eq!(p("embedding:cosine"), Ok(Kind::Embedding { metric: Metric::Cosine }));
        assert_eq!(p("tokens:32000"), Ok(Kind::Tokens { vocab_size: Some(32_000) }));
        assert_eq!(p("bbox:xywh"), Ok(Kind::BBox { format: BBoxFormat::Xywh, normalized: false }));
        assert_eq!(p("bbox"), Ok(Kind::BBox { format: BBoxFormat::Xyxy, normalized: false }));
        assert_eq!(p("audio:16000"), Ok(Kind::Audio { sample_rate: 16_000 }));
        assert_eq!(p("video:29.97"), Ok(Kind::Video { fps_milli: 29_970 }));
        assert_eq!(p("video"), Ok(Kind::Video { fps_milli: 0 }));
        assert_eq!(p("image:chw"), Ok(Kind::Image { layout: ImageLayout::Chw }));
        assert_eq!(p(" image "), Ok(Kind::Image { layout: ImageLayout::Hwc }));
        assert_eq!("zstd".parse::<Compression>(), Ok(Compression::Zstd { level: DEFAULT_ZSTD_LEVEL }));
        assert_eq!("zstd:7".parse::<Compression>(), Ok(Compression::Zstd { level: 7 }));
    }

    #[test]
    fn wrong_words_name_the_accepted_ones() {
        for bad in [
            "photo",
            "audio",
            "audio:0",
            "audio:-1",
            "video:-1",
            "video:1e12",
            "embedding:cos",
            "tokens:-3",
            "bbox:xyxy,flipped",
            "image(hwc",
            "text:x",
            "class_label:3: a, b",
            "class_label:1: \"a",
            "class_label",
        ] {
            let e = bad.parse::<Kind>().unwrap_err();
            assert_eq!((e.what, e.input.as_str()), ("kind", bad));
            assert!(e.to_string().contains("embedding[:cosine|dot|l2]"), "{e}");
        }
        for bad in ["zstd:0", "zstd:23", "zstd:x", "lz4:1", "gzip", ""] {
            let e = bad.parse::<Compression>().unwrap_err();
            assert!(e.to_string().contains("zstd:1..22"), "{e}");
        }
        let e = "rgb".parse::<ImageLayout>().unwrap_err();
        assert_eq!(e.to_string(), "unknown image layout \"rgb\" (expected hwc, chw or hw)");
        assert_eq!(crate::Error::from(e).class(), crate::ErrorClass::Usage);
        assert!("float32".parse::<DType>().unwrap_err().to_string().contains("bf16"));
        assert!("L2".parse::<Metric>().is_err() && "XYXY".parse::<BBoxFormat>().is_err());
    }
}
