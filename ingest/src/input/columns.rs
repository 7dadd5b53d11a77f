//! How the ingest flags shape columns: `--ragged` (which dims of a tensor vary), `--rename`
//! and `--kind`, and the widening of columns inferred from several samples (a dim that
//! differs between the samples looked at becomes ragged; a field some of them lack or leave
//! null becomes nullable).
//!
//! Errors here are schema questions (the CLI exits 2 for them), never data faults.

use std::collections::HashMap;

use tessera::{Column, DType, Dim, ImageLayout, Kind};

/// `--ragged` entries: per column, either every dim ragged (`tokens`) or one spec per dim
/// (`img=?,?,3`: `?` varies, a number is fixed and checked).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RaggedSpec(HashMap<String, Option<Vec<Option<u64>>>>);

impl RaggedSpec {
    /// Parses the flag's values. Each value is one or more comma-separated entries; a bare
    /// `?` or number continues the dims of the entry before it, so `img=?,?,3,boxes=?,4`
    /// and `--ragged img=?,?,3 --ragged boxes=?,4` mean the same.
    ///
    /// # Errors
    /// An entry without a column name, a dim that is neither `?` nor a number, or a column
    /// named twice.
    pub fn parse(values: &[String]) -> Result<Self, String> {
        let mut out: Vec<(String, Option<Vec<Option<u64>>>)> = Vec::new();
        for value in values {
            let mut continues = false;
            for token in value.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                if let Some((name, dim)) = token.split_once('=') {
                    let name = name.trim();
                    if name.is_empty() {
                        return Err(format!("--ragged {value:?}: an entry has no column name (use COL=?,4)"));
                    }
                    out.push((name.to_string(), Some(vec![parse_dim(dim.trim(), value)?])));
                    continues = true;
                } else if continues && is_dim(token) {
                    if let Some((_, Some(dims))) = out.last_mut() {
                        dims.push(parse_dim(token, value)?);
                    }
                } else {
                    out.push((token.to_string(), None));
                    continues = false;
                }
            }
        }
        let mut map = HashMap::new();
        for (name, dims) in out {
            if map.insert(name.clone(), dims).is_some() {
                return Err(format!("--ragged names column {name:?} twice"));
            }
        }
        Ok(Self(map))
    }

    /// Whether the flag names `column`.
    pub(crate) fn names(&self, column: &str) -> bool {
        self.0.contains_key(column)
    }

    /// The names the flag gives, sorted.
    #[cfg(test)]
    fn columns(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.0.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }

    /// The stored dims of `column` for a value of shape `shape`: all fixed when the flag does
    /// not name it, all ragged for a bare name, else per the spec.
    ///
    /// # Errors
    /// A spec of another rank, or a fixed dim the value does not have.
    pub(crate) fn dims(&self, column: &str, shape: &[u64]) -> Result<Vec<Dim>, String> {
        match self.0.get(column) {
            None => Ok(shape.iter().map(|&d| Dim::Fixed(d)).collect()),
            Some(None) => Ok(vec![Dim::Ragged; shape.len()]),
            Some(Some(spec)) => {
                let shown = fmt_spec(spec);
                if spec.len() != shape.len() {
                    return Err(format!(
                        "--ragged {column}={shown} gives {} dims, but its values have {} ({shape:?})",
                        spec.len(),
                        shape.len()
                    ));
                }
                spec.iter()
                    .zip(shape)
                    .map(|(s, &d)| match s {
                        None => Ok(Dim::Ragged),
                        Some(n) if *n == d => Ok(Dim::Fixed(d)),
                        Some(n) => Err(format!(
                            "--ragged {column}={shown} fixes a dim at {n}, but a value has shape {shape:?}"
                        )),
                    })
                    .collect()
            }
        }
    }
}

fn is_dim(token: &str) -> bool {
    token == "?" || token.parse::<u64>().is_ok()
}

fn parse_dim(token: &str, value: &str) -> Result<Option<u64>, String> {
    if token == "?" {
        return Ok(None);
    }
    token.parse::<u64>().map(Some).map_err(|_| format!("--ragged {value:?}: dim {token:?} is neither ? nor a number"))
}

fn fmt_spec(spec: &[Option<u64>]) -> String {
    spec.iter().map(|d| d.map_or_else(|| "?".to_string(), |n| n.to_string())).collect::<Vec<_>>().join(",")
}

/// The `--ragged` entry that makes a column's shape accept `shape` too: its ragged dims,
/// plus the fixed dims `shape` differs in (`tokens=?`, `img=?,?,3`). `None` when the ranks
/// differ (no dims spec can help).
pub(crate) fn ragged_hint(column: &Column, shape: &[u64]) -> Option<String> {
    if column.shape.len() != shape.len() || column.dtype.is_variable() {
        return None;
    }
    let dims: Vec<String> = column
        .shape
        .iter()
        .zip(shape)
        .map(|(d, &s)| match d {
            Dim::Fixed(f) if *f == s => f.to_string(),
            _ => "?".to_string(),
        })
        .collect();
    Some(format!("--ragged {}={}", column.name, dims.join(",")))
}

/// Merges the column a later sample implies into the one inferred so far: dims that differ
/// become ragged unless `--ragged` gave them (`keep_dims`). Other differences (dtype, rank,
/// kind) are left for the sample's own check to report.
pub(crate) fn widen(into: &mut Column, seen: &Column, keep_dims: bool) {
    if keep_dims || into.dtype != seen.dtype || into.shape.len() != seen.shape.len() {
        return;
    }
    for (a, b) in into.shape.iter_mut().zip(&seen.shape) {
        if *a != *b {
            *a = Dim::Ragged;
        }
    }
}

/// `--rename` and `--kind`: new names for input fields, and kinds for columns (by their
/// new names).
#[derive(Clone, Debug, Default)]
pub struct ColumnEdits {
    renames: Vec<(String, String)>,
    kinds: Vec<(String, String)>,
}

impl ColumnEdits {
    /// Parses `OLD=NEW` and `COL=KIND` entries (kinds are checked when applied).
    ///
    /// # Errors
    /// An entry without `=`, or a name renamed twice.
    pub fn parse(renames: &[String], kinds: &[String]) -> Result<Self, String> {
        let pairs = |flag: &str, v: &[String]| -> Result<Vec<(String, String)>, String> {
            v.iter()
                .filter(|e| !e.trim().is_empty())
                .map(|e| {
                    let (a, b) = e.split_once('=').ok_or_else(|| format!("bad --{flag} {e:?} (use A=B)"))?;
                    let (a, b) = (a.trim(), b.trim());
                    if a.is_empty() || b.is_empty() {
                        return Err(format!("bad --{flag} {e:?} (use A=B)"));
                    }
                    Ok((a.to_string(), b.to_string()))
                })
                .collect()
        };
        Self::new(pairs("rename", renames)?, pairs("kind", kinds)?)
    }

    /// Renames `(old field, new name)` and kinds `(column by its new name, kind)`, the kinds
    /// in the reference's grammar (`image`, `audio:16000`, `embedding(cosine)`, …).
    ///
    /// # Errors
    /// A field renamed twice, or a kind that does not parse.
    pub fn new(renames: Vec<(String, String)>, kinds: Vec<(String, String)>) -> Result<Self, String> {
        for (i, (old, _)) in renames.iter().enumerate() {
            if renames[..i].iter().any(|(o, _)| o == old) {
                return Err(format!("rename names {old:?} twice"));
            }
        }
        for (_, k) in &kinds {
            parse_kind(k, &Column::new("x", DType::U8, &[]))?;
        }
        Ok(Self { renames, kinds })
    }

    /// The name an input field is stored under.
    pub(crate) fn name<'a>(&'a self, field: &'a str) -> &'a str {
        self.renames.iter().find(|(old, _)| old == field).map_or(field, |(_, new)| new.as_str())
    }

    /// The input field stored under `column`.
    pub(crate) fn source_name<'a>(&'a self, column: &'a str) -> &'a str {
        self.renames.iter().find(|(_, new)| new == column).map_or(column, |(old, _)| old.as_str())
    }

    /// The `--ragged` entries keyed by input field names (the flag uses the new names).
    pub(crate) fn source_spec(&self, spec: &RaggedSpec) -> RaggedSpec {
        RaggedSpec(
            spec.0
                .iter()
                .map(|(name, dims)| {
                    let old = self.renames.iter().find(|(_, new)| new == name).map_or(name, |(old, _)| old);
                    (old.clone(), dims.clone())
                })
                .collect(),
        )
    }

    /// Checks that every `--rename` source is one of the input's fields.
    ///
    /// # Errors
    /// The names that match nothing, with the fields there are.
    pub(crate) fn check_renames(&self, fields: &[&str]) -> Result<(), String> {
        for (old, _) in &self.renames {
            if !fields.contains(&old.as_str()) {
                return Err(format!("--rename names unknown field {old:?} (the inputs have {fields:?})"));
            }
        }
        Ok(())
    }

    /// Checks that every `--kind` target is a column (by its new name).
    ///
    /// # Errors
    /// The names that match nothing, with the columns there are.
    pub(crate) fn check_kinds(&self, columns: &[&str]) -> Result<(), String> {
        for (col, _) in &self.kinds {
            if !columns.contains(&col.as_str()) {
                return Err(format!(
                    "--kind names unknown column {col:?} (columns: {columns:?}; kinds use the new names)"
                ));
            }
        }
        Ok(())
    }

    /// Sets the `--kind` kinds on renamed columns, with the kind's default compression (a
    /// text or JSON kind makes a bytes column utf8; an image kind picks its layout from the
    /// rank). `--compress` is applied after this.
    ///
    /// # Errors
    /// An unknown kind name.
    pub(crate) fn apply_kinds(&self, cols: &mut [Column]) -> Result<(), String> {
        for (name, kind) in &self.kinds {
            if let Some(c) = cols.iter_mut().find(|c| c.name == *name) {
                c.kind = parse_kind(kind, c)?;
                if matches!(c.kind, Kind::Text | Kind::Json) && c.dtype == DType::Bytes {
                    c.dtype = DType::Utf8;
                }
                c.compression = super::default_compression(c);
            }
        }
        Ok(())
    }
}

/// Parses a `--kind` value for a column: the reference's kind grammar ([`Kind`]'s
/// `FromStr`: `embedding:cosine`, `audio:16000`, `image(chw)`, …); a bare `image` takes its
/// layout from the rank.
fn parse_kind(s: &str, c: &Column) -> Result<Kind, String> {
    let kind: Kind = s.parse().map_err(|e: tessera::ParseWordError| e.to_string())?;
    Ok(match kind {
        Kind::Image { .. } if s.trim() == "image" => {
            Kind::Image { layout: if c.shape.len() == 2 { ImageLayout::Hw } else { ImageLayout::Hwc } }
        }
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera::{BBoxFormat, Metric};

    fn spec(v: &[&str]) -> RaggedSpec {
        RaggedSpec::parse(&v.iter().map(ToString::to_string).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn ragged_entries() {
        let s = spec(&["img=?,?,3,boxes=?,4", "tokens"]);
        assert_eq!(s.dims("img", &[5, 6, 3]).unwrap(), [Dim::Ragged, Dim::Ragged, Dim::Fixed(3)]);
        assert_eq!(s.dims("boxes", &[2, 4]).unwrap(), [Dim::Ragged, Dim::Fixed(4)]);
        assert_eq!(s.dims("tokens", &[7]).unwrap(), [Dim::Ragged]);
        assert_eq!(s.dims("other", &[7]).unwrap(), [Dim::Fixed(7)]);
        assert!(s.dims("img", &[5, 6, 4]).is_err(), "a fixed dim is checked");
        assert!(s.dims("img", &[5, 6]).is_err(), "and the rank");
        assert_eq!(spec(&["a,b"]).columns(), ["a", "b"]);
        assert_eq!(spec(&["img=?", "img2=?"]).columns(), ["img", "img2"]);
        for bad in ["=?", "img=x", "a,a"] {
            assert!(RaggedSpec::parse(&[bad.to_string()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn hints_and_widening() {
        let c = Column::new("img", DType::U8, &[Dim::Fixed(4), Dim::Ragged, Dim::Fixed(3)]);
        assert_eq!(ragged_hint(&c, &[5, 9, 3]).as_deref(), Some("--ragged img=?,?,3"));
        assert_eq!(ragged_hint(&c, &[5, 3]), None);
        let mut t = Column::new("t", DType::I32, &[Dim::Fixed(130)]);
        widen(&mut t, &Column::new("t", DType::I32, &[Dim::Fixed(165)]), false);
        assert_eq!(t.shape, [Dim::Ragged]);
        let mut t = Column::new("t", DType::I32, &[Dim::Fixed(130)]);
        widen(&mut t, &Column::new("t", DType::I32, &[Dim::Fixed(165)]), true);
        assert_eq!(t.shape, [Dim::Fixed(130)]);
    }

    #[test]
    fn renames_and_kinds() {
        let e = ColumnEdits::parse(&["img=image".into(), "emb=embedding".into()], &["image=image".into()]).unwrap();
        assert_eq!((e.name("img"), e.name("emb"), e.name("x")), ("image", "embedding", "x"));
        let mut cols = [Column::new("image", DType::U8, &[Dim::Ragged, Dim::Ragged, Dim::Fixed(3)])];
        e.apply_kinds(&mut cols).unwrap();
        assert_eq!(cols[0].kind, Kind::Image { layout: ImageLayout::Hwc });
        assert!(e.check_renames(&["img", "emb"]).is_ok() && e.check_kinds(&["image", "embedding"]).is_ok());
        assert!(e.check_renames(&["img"]).is_err(), "emb is not a field");
        assert!(e.check_kinds(&["img"]).is_err(), "kinds use the new names");
        let s = e.source_spec(&spec(&["image=?,?,3", "t"]));
        assert_eq!(s.columns(), ["img", "t"]);
        assert!(ColumnEdits::parse(&[], &["x=picture".into()]).is_err());
        assert!(ColumnEdits::parse(&["a=b".into(), "a=c".into()], &[]).is_err());
        let t = ColumnEdits::parse(&[], &["c=text".into()]).unwrap();
        let mut cols = [Column::new("c", DType::Bytes, &[])];
        t.apply_kinds(&mut cols).unwrap();
        assert_eq!((cols[0].dtype, &cols[0].kind), (DType::Utf8, &Kind::Text));
    }

    #[test]
    fn kinds_use_the_reference_grammar() {
        let gray = Column::new("g", DType::U8, &[Dim::Ragged, Dim::Ragged]);
        assert_eq!(parse_kind("image", &gray), Ok(Kind::Image { layout: ImageLayout::Hw }));
        assert_eq!(parse_kind("image:chw", &gray), Ok(Kind::Image { layout: ImageLayout::Chw }));
        assert_eq!(parse_kind("embedding:dot", &gray), Ok(Kind::Embedding { metric: Metric::Dot }));
        assert_eq!(parse_kind("bbox:cxcywh", &gray), Ok(Kind::BBox { format: BBoxFormat::Cxcywh, normalized: false }));
        assert_eq!(parse_kind("audio:8000", &gray), Ok(Kind::Audio { sample_rate: 8000 }));
        let e = parse_kind("audio", &gray).unwrap_err();
        assert!(e.contains("audio:RATE") && e.contains("\"audio\""), "{e}");
    }
}
