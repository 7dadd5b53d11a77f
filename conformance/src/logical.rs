//! The logical dataset description `tessera-logical/1`: what a writer under test is asked to
//! write, and what every version it creates must read back as.
//!
//! ```json
//! {"logical": "tessera-logical/1",
//!  "schema": {"columns": [{"name": "label", "dtype": "i64", "shape": [], "kind": {"type": "generic"},
//!                          "compression": {"codec": "none"}, "nullable": true, "metadata": {}}],
//!             "metadata": {}},
//!  "commits": [{"message": "first rows", "rows": {"label": [{"shape": [], "values": ["7"]}, null]}}],
//!  "tags": [{"name": "v1", "version": 2}]}
//! ```
//!
//! The normative definition is in `conformance/README.md` ("Logical JSON"). In short: the
//! schema is the canonical dump's schema without column ids (a writer gives the columns ids
//! 0, 1, 2, … in order); version 1 is the dataset just created (no rows); commit `k` (from 1)
//! appends its rows as version `k + 1` of `main`; a tag names a version of `main`. Rows use the
//! dump's notation (DUMP-08, DUMP-09).
//!
//! This module parses and prints the description, writes it with the reference writer, and
//! computes the canonical dump of every version *directly from the description*, with its own
//! implementation of SPEC.md §19 (it does not call the reference's `dump` module), so the
//! generator cross-checks the reference reader against an independent dump.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use tessera::{ColumnData, Compression, DType, Dataset, Dim, Kind, Schema, WriteOptions};

/// The value of the `logical` member.
pub const LOGICAL_FORMAT: &str = "tessera-logical/1";
/// The value of the `expected` member of a writer case's `expected.json`.
pub const EXPECTED_FORMAT: &str = "tessera-writer-expected/1";
/// Columns with more elements than this give only their digest in a dump (DUMP-07).
const MAX_LISTED_ELEMENTS: u64 = 4096;

/// One non-null row: its shape (`[byte length]` for `utf8` and `bytes`) and its raw bytes
/// (elements little-endian, C order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The row shape (SHP-02), or `[byte length]` for variable dtypes.
    pub shape: Vec<u64>,
    /// The row's bytes (SHP-05).
    pub bytes: Vec<u8>,
}

/// One commit: an append of rows to `main`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commit {
    /// The commit message (writers record it; it is not compared).
    pub message: String,
    /// The rows per schema column, in schema order (`None` = null); every column has the
    /// same number of rows.
    pub columns: Vec<Vec<Option<Row>>>,
}

impl Commit {
    /// Rows appended by this commit.
    #[must_use]
    pub fn num_rows(&self) -> usize {
        self.columns.first().map_or(0, Vec::len)
    }
}

/// A tag to create on a version of `main`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagSpec {
    /// The tag name (LAY-07).
    pub name: String,
    /// The version of `main` it names (1 = the created dataset).
    pub version: u64,
    /// The tag message (not compared).
    pub message: String,
}

/// A parsed logical description.
#[derive(Clone, Debug, PartialEq)]
pub struct Logical {
    /// The schema; column ids are 0, 1, 2, … in order.
    pub schema: Schema,
    /// The commits after creation.
    pub commits: Vec<Commit>,
    /// The tags.
    pub tags: Vec<TagSpec>,
}

/// A description of what is wrong with a logical document.
pub type ParseResult<T> = Result<T, String>;

fn obj<'a>(v: &'a Value, what: &str, keys: &[&str], optional: &[&str]) -> ParseResult<&'a Map<String, Value>> {
    let m = v.as_object().ok_or_else(|| format!("{what}: expected an object"))?;
    for k in m.keys() {
        if !keys.contains(&k.as_str()) && !optional.contains(&k.as_str()) {
            return Err(format!("{what}: unknown member {k:?}"));
        }
    }
    for k in keys {
        if !m.contains_key(*k) {
            return Err(format!("{what}: missing member {k:?}"));
        }
    }
    Ok(m)
}

fn string<'a>(v: &'a Value, what: &str) -> ParseResult<&'a str> {
    v.as_str().ok_or_else(|| format!("{what}: expected a string"))
}

fn uint(v: &Value, what: &str) -> ParseResult<u64> {
    v.as_u64().ok_or_else(|| format!("{what}: expected a non-negative integer"))
}

fn u32_of(v: &Value, what: &str) -> ParseResult<u32> {
    u32::try_from(uint(v, what)?).map_err(|_| format!("{what}: above u32"))
}

fn metadata(v: &Value, what: &str) -> ParseResult<Vec<(String, String)>> {
    let m = v.as_object().ok_or_else(|| format!("{what}: expected an object of strings"))?;
    let mut out: Vec<(String, String)> = m
        .iter()
        .map(|(k, v)| Ok((k.clone(), string(v, &format!("{what}[{k:?}]"))?.to_string())))
        .collect::<ParseResult<_>>()?;
    out.sort();
    Ok(out)
}

fn metadata_json(m: &[(String, String)]) -> Value {
    Value::Object(m.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect())
}

/// A word member (layout, metric, format), spelled as the reference prints it.
fn word<T: std::str::FromStr<Err = tessera::ParseWordError>>(v: &Value, what: &str, name: &str) -> ParseResult<T> {
    string(&v[name], &format!("{what}.{name}"))?.parse().map_err(|e| format!("{what}.{name}: {e}"))
}

fn parse_kind(v: &Value, what: &str) -> ParseResult<Kind> {
    let t = v.get("type").ok_or_else(|| format!("{what}: missing member \"type\""))?;
    let t = string(t, &format!("{what}.type"))?;
    Ok(match t {
        "generic" | "text" | "mask" | "json" => {
            obj(v, what, &["type"], &[])?;
            match t {
                "generic" => Kind::Generic,
                "text" => Kind::Text,
                "mask" => Kind::Mask,
                _ => Kind::Json,
            }
        }
        "image" => {
            obj(v, what, &["type", "layout"], &[])?;
            Kind::Image { layout: word(v, what, "layout")? }
        }
        "video" => {
            obj(v, what, &["type", "fps_milli"], &[])?;
            Kind::Video { fps_milli: u32_of(&v["fps_milli"], &format!("{what}.fps_milli"))? }
        }
        "audio" => {
            obj(v, what, &["type", "sample_rate"], &[])?;
            Kind::Audio { sample_rate: u32_of(&v["sample_rate"], &format!("{what}.sample_rate"))? }
        }
        "tokens" => {
            obj(v, what, &["type", "vocab_size"], &[])?;
            let vocab_size = match &v["vocab_size"] {
                Value::Null => None,
                n => Some(uint(n, &format!("{what}.vocab_size"))?),
            };
            Kind::Tokens { vocab_size }
        }
        "embedding" => {
            obj(v, what, &["type", "metric"], &[])?;
            Kind::Embedding { metric: word(v, what, "metric")? }
        }
        "class_label" => {
            obj(v, what, &["type", "names"], &[])?;
            let names = v["names"].as_array().ok_or_else(|| format!("{what}.names: expected an array"))?;
            let names = names
                .iter()
                .map(|n| string(n, &format!("{what}.names[]")).map(str::to_string))
                .collect::<ParseResult<_>>()?;
            Kind::ClassLabel { names }
        }
        "bbox" => {
            obj(v, what, &["type", "format", "normalized"], &[])?;
            let format = word(v, what, "format")?;
            let normalized =
                v["normalized"].as_bool().ok_or_else(|| format!("{what}.normalized: expected a boolean"))?;
            Kind::BBox { format, normalized }
        }
        other => return Err(format!("{what}: unknown kind type {other:?}")),
    })
}

/// The dump notation of a kind (DUMP-03).
#[must_use]
pub fn kind_json(k: &Kind) -> Value {
    match k {
        Kind::Generic => json!({"type": "generic"}),
        Kind::Text => json!({"type": "text"}),
        Kind::Mask => json!({"type": "mask"}),
        Kind::Json => json!({"type": "json"}),
        Kind::Image { layout } => json!({"type": "image", "layout": layout.name()}),
        Kind::Video { fps_milli } => json!({"type": "video", "fps_milli": fps_milli}),
        Kind::Audio { sample_rate } => json!({"type": "audio", "sample_rate": sample_rate}),
        Kind::Tokens { vocab_size } => json!({"type": "tokens", "vocab_size": vocab_size}),
        Kind::Embedding { metric } => json!({"type": "embedding", "metric": metric.name()}),
        Kind::ClassLabel { names } => json!({"type": "class_label", "names": names}),
        Kind::BBox { format, normalized } => {
            json!({"type": "bbox", "format": format.name(), "normalized": normalized})
        }
    }
}

fn parse_compression(v: &Value, what: &str) -> ParseResult<Compression> {
    let codec = string(v.get("codec").unwrap_or(&Value::Null), &format!("{what}.codec"))?;
    match Compression::from_name(codec) {
        Some(Compression::Zstd { .. }) => {
            obj(v, what, &["codec", "level"], &[])?;
            let level = v["level"].as_i64().ok_or_else(|| format!("{what}.level: expected an integer"))?;
            Ok(Compression::Zstd { level: i32::try_from(level).map_err(|_| format!("{what}.level: out of range"))? })
        }
        Some(c) => {
            obj(v, what, &["codec"], &[])?;
            Ok(c)
        }
        None => Err(format!("{what}: unknown codec {codec:?}")),
    }
}

fn compression_json(c: Compression) -> Value {
    match c.level() {
        Some(level) => json!({"codec": c.name(), "level": level}),
        None => json!({"codec": c.name()}),
    }
}

fn shape_json(shape: &[Dim]) -> Value {
    Value::Array(
        shape
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => json!(n),
                Dim::Ragged => Value::Null,
            })
            .collect(),
    )
}

/// The schema entry of a column in dump notation (DUMP-02), with or without its id.
#[must_use]
pub fn column_json(c: &tessera::Column, with_id: bool) -> Value {
    let mut m = Map::new();
    if with_id {
        m.insert("id".into(), json!(c.id));
    }
    m.insert("name".into(), json!(c.name));
    m.insert("dtype".into(), json!(c.dtype.name()));
    m.insert("shape".into(), shape_json(&c.shape));
    m.insert("kind".into(), kind_json(&c.kind));
    m.insert("compression".into(), compression_json(c.compression));
    m.insert("nullable".into(), json!(c.nullable));
    m.insert("metadata".into(), metadata_json(&c.metadata));
    Value::Object(m)
}

/// The schema in dump notation (DUMP-01), with or without column ids.
#[must_use]
pub fn schema_json(s: &Schema, with_ids: bool) -> Value {
    json!({
        "columns": s.columns.iter().map(|c| column_json(c, with_ids)).collect::<Vec<_>>(),
        "metadata": metadata_json(&s.metadata),
    })
}

fn parse_column(v: &Value, id: u32, what: &str) -> ParseResult<tessera::Column> {
    obj(v, what, &["name", "dtype", "shape", "kind", "compression", "nullable", "metadata"], &[])?;
    let name = string(&v["name"], &format!("{what}.name"))?.to_string();
    let dtype_name = string(&v["dtype"], &format!("{what}.dtype"))?;
    let dtype = DType::from_name(dtype_name).ok_or_else(|| format!("{what}.dtype: unknown dtype {dtype_name:?}"))?;
    let shape = v["shape"]
        .as_array()
        .ok_or_else(|| format!("{what}.shape: expected an array"))?
        .iter()
        .map(|d| match d {
            Value::Null => Ok(Dim::Ragged),
            n => uint(n, &format!("{what}.shape[]")).map(Dim::Fixed),
        })
        .collect::<ParseResult<Vec<_>>>()?;
    Ok(tessera::Column {
        id,
        name,
        dtype,
        shape,
        kind: parse_kind(&v["kind"], &format!("{what}.kind"))?,
        compression: parse_compression(&v["compression"], &format!("{what}.compression"))?,
        nullable: v["nullable"].as_bool().ok_or_else(|| format!("{what}.nullable: expected a boolean"))?,
        metadata: metadata(&v["metadata"], &format!("{what}.metadata"))?,
    })
}

/// Parses one element of a fixed-size dtype in dump notation (DUMP-09), strictly: integers
/// as canonical decimal strings in range, floats as `0x` and exactly 2 × item size lowercase
/// hex digits, bools as JSON booleans.
///
/// # Errors
/// What is wrong with the element.
pub fn parse_element(dtype: DType, v: &Value, out: &mut Vec<u8>) -> ParseResult<()> {
    let n = dtype.item_size();
    if dtype == DType::Bool {
        let b = v.as_bool().ok_or_else(|| format!("expected true or false, got {v}"))?;
        out.push(u8::from(b));
        return Ok(());
    }
    let s = v.as_str().ok_or_else(|| format!("expected a string element, got {v}"))?;
    if dtype.is_float() {
        let hex = s.strip_prefix("0x").ok_or_else(|| format!("float element {s:?} does not start with 0x"))?;
        if hex.len() != 2 * n || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(format!("float element {s:?} is not 0x and {} lowercase hex digits", 2 * n));
        }
        let bits = u64::from_str_radix(hex, 16).map_err(|e| e.to_string())?;
        out.extend_from_slice(&bits.to_le_bytes()[..n]);
        return Ok(());
    }
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && s != "-0";
    if !canonical {
        return Err(format!("integer element {s:?} is not a canonical decimal"));
    }
    let x: i128 = s.parse().map_err(|_| format!("integer element {s:?} out of range"))?;
    let signed = matches!(dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64);
    let bits = 8 * n as u32;
    let (lo, hi) = if signed { (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1) } else { (0, (1i128 << bits) - 1) };
    if x < lo || x > hi {
        return Err(format!("integer element {s:?} out of range for {}", dtype.name()));
    }
    out.extend_from_slice(&x.to_le_bytes()[..n]);
    Ok(())
}

/// One element of a fixed-size dtype in dump notation (DUMP-09).
#[must_use]
pub fn element_json(dtype: DType, e: &[u8]) -> Value {
    let n = dtype.item_size();
    let mut word = [0u8; 8];
    word[..n].copy_from_slice(&e[..n]);
    let u = u64::from_le_bytes(word);
    match dtype {
        DType::Bool => Value::Bool(e[0] != 0),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => Value::String(u.to_string()),
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => {
            // Sign-extend from the element's width.
            let shift = 64 - 8 * n as u32;
            Value::String((((u << shift).cast_signed()) >> shift).to_string())
        }
        _ => Value::String(format!("0x{u:0width$x}", width = 2 * n)),
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn unhex(s: &str) -> ParseResult<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(format!("bytes value {s:?} is not lowercase hex"));
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|e| e.to_string())).collect()
}

/// A non-null row in dump notation (DUMP-08).
#[must_use]
pub fn row_json(dtype: DType, row: &Row) -> Value {
    let values = match dtype {
        DType::Utf8 => Value::String(String::from_utf8_lossy(&row.bytes).into_owned()),
        DType::Bytes => Value::String(hex(&row.bytes)),
        _ => Value::Array(row.bytes.chunks_exact(dtype.item_size()).map(|e| element_json(dtype, e)).collect()),
    };
    json!({"shape": row.shape, "values": values})
}

/// The element count of a row shape (SHP-04): exact, 0 as soon as a dim is 0.
fn element_count(shape: &[u64]) -> Option<u64> {
    if shape.contains(&0) {
        return Some(0);
    }
    shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
}

/// Parses one row of `column` (null or `{"shape", "values"}`).
///
/// # Errors
/// What is wrong with the row.
pub fn parse_row(column: &tessera::Column, v: &Value) -> ParseResult<Option<Row>> {
    if v.is_null() {
        return if column.nullable { Ok(None) } else { Err("null row in a non-nullable column".into()) };
    }
    obj(v, "row", &["shape", "values"], &[])?;
    let shape = v["shape"]
        .as_array()
        .ok_or("row.shape: expected an array")?
        .iter()
        .map(|d| uint(d, "row.shape[]"))
        .collect::<ParseResult<Vec<u64>>>()?;
    if column.dtype.is_variable() {
        let s = string(&v["values"], "row.values")?;
        let bytes = if column.dtype == DType::Utf8 { s.as_bytes().to_vec() } else { unhex(s)? };
        if shape != [bytes.len() as u64] {
            return Err(format!("row.shape {shape:?} is not [byte length] = [{}]", bytes.len()));
        }
        return Ok(Some(Row { shape, bytes }));
    }
    if shape.len() != column.shape.len() {
        return Err(format!("row.shape {shape:?} has rank {}, the column has {}", shape.len(), column.shape.len()));
    }
    for (d, s) in column.shape.iter().zip(&shape) {
        if let Dim::Fixed(f) = d
            && f != s
        {
            return Err(format!("row.shape {shape:?} does not match the fixed dim {f}"));
        }
    }
    let values = v["values"].as_array().ok_or("row.values: expected an array")?;
    if element_count(&shape) != Some(values.len() as u64) {
        return Err(format!("row.shape {shape:?} needs another number of values than {}", values.len()));
    }
    let mut bytes = Vec::with_capacity(values.len() * column.dtype.item_size());
    for e in values {
        parse_element(column.dtype, e, &mut bytes)?;
    }
    Ok(Some(Row { shape, bytes }))
}

/// The canonical dump of one column's rows (DUMP-05 to DUMP-09): `sha256` and, for at most
/// 4096 elements, `rows`.
#[must_use]
pub fn dump_column(dtype: DType, rows: &[&Option<Row>]) -> Value {
    let mut h = Sha256::new();
    let mut total = 0u64;
    for r in rows {
        match r {
            None => h.update([0u8]),
            Some(r) => {
                h.update([1u8]);
                for d in &r.shape {
                    h.update(d.to_le_bytes());
                }
                h.update(&r.bytes);
                total = total.saturating_add(if dtype.is_variable() {
                    r.bytes.len() as u64
                } else {
                    element_count(&r.shape).unwrap_or(u64::MAX)
                });
            }
        }
    }
    let mut out = Map::new();
    out.insert("sha256".into(), Value::String(hex(&h.finalize())));
    if total <= MAX_LISTED_ELEMENTS {
        let list = rows.iter().map(|r| r.as_ref().map_or(Value::Null, |r| row_json(dtype, r))).collect();
        out.insert("rows".into(), Value::Array(list));
    }
    Value::Object(out)
}

/// The canonical dump (SPEC.md §19) of a version of `branch` whose schema is `schema` and whose
/// live rows are `columns` (one list per schema column, in schema order), computed here.
///
/// # Panics
/// If `columns` does not have one list per schema column.
#[must_use]
pub fn dump_of(branch: &str, version: u64, schema: &Schema, columns: &[Vec<Option<Row>>]) -> Value {
    assert_eq!(columns.len(), schema.columns.len(), "one row list per column");
    let row_count = columns.first().map_or(0, Vec::len);
    let mut out = Map::new();
    for (col, rows) in schema.columns.iter().zip(columns) {
        let rows: Vec<&Option<Row>> = rows.iter().collect();
        out.insert(col.name.clone(), dump_column(col.dtype, &rows));
    }
    json!({
        "dump": "tessera-dump/1",
        "branch": branch,
        "version": version,
        "row_count": row_count,
        "schema": schema_json(schema, true),
        "columns": out,
    })
}

/// Settings of the reference writer when it writes a logical description.
#[derive(Clone, Debug)]
pub struct RefWrite {
    /// Fixed commit times and writer ids, so the bytes are reproducible (otherwise the clock
    /// and random ids).
    pub deterministic: bool,
    /// Raw bytes per page.
    pub page_bytes: u64,
    /// Raw bytes per data file.
    pub target_file_bytes: u64,
}

impl Default for RefWrite {
    fn default() -> Self {
        let d = WriteOptions::default();
        Self { deterministic: false, page_bytes: d.page_bytes, target_file_bytes: d.target_file_bytes }
    }
}

impl RefWrite {
    /// Deterministic and split into small pages and files, so one logical description gives a
    /// dataset with several pages, fragments and segments: what the runner writes for an
    /// implementation to read back.
    #[must_use]
    pub fn small_deterministic() -> Self {
        Self { deterministic: true, page_bytes: 96, target_file_bytes: 512 }
    }

    fn options(&self, n: u8) -> WriteOptions {
        let mut id = *b"tessera-logical\0";
        id[15] = n;
        WriteOptions {
            page_bytes: self.page_bytes,
            target_file_bytes: self.target_file_bytes,
            timestamp_ms: self.deterministic.then_some(1_735_689_600_000 + u64::from(n) * 60_000),
            writer_id: self.deterministic.then_some(id),
            ..WriteOptions::default()
        }
    }
}

impl Logical {
    /// Parses a logical document.
    ///
    /// # Errors
    /// The first problem, naming where it is.
    pub fn parse(text: &str) -> ParseResult<Self> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        Self::from_value(&v)
    }

    /// Reads and parses a logical document from a file.
    ///
    /// # Errors
    /// An I/O or parse problem.
    pub fn read(path: &Path) -> ParseResult<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses a logical document from JSON.
    ///
    /// # Errors
    /// The first problem, naming where it is.
    pub fn from_value(v: &Value) -> ParseResult<Self> {
        let top = obj(v, "$", &["logical", "schema", "commits"], &["tags"])?;
        if top["logical"] != LOGICAL_FORMAT {
            return Err(format!("$.logical: expected {LOGICAL_FORMAT:?}"));
        }
        let sv = &top["schema"];
        obj(sv, "$.schema", &["columns", "metadata"], &[])?;
        let cols = sv["columns"].as_array().ok_or("$.schema.columns: expected an array")?;
        let columns = cols
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let id = u32::try_from(i).map_err(|_| "too many columns".to_string())?;
                parse_column(c, id, &format!("$.schema.columns[{i}]"))
            })
            .collect::<ParseResult<Vec<_>>>()?;
        let schema = Schema { columns, metadata: metadata(&sv["metadata"], "$.schema.metadata")? };
        schema.validate().map_err(|e| format!("$.schema: {e}"))?;
        let mut commits = Vec::new();
        for (k, c) in top["commits"].as_array().ok_or("$.commits: expected an array")?.iter().enumerate() {
            let what = format!("$.commits[{k}]");
            obj(c, &what, &["message", "rows"], &[])?;
            let message = string(&c["message"], &format!("{what}.message"))?.to_string();
            let rows = c["rows"].as_object().ok_or(format!("{what}.rows: expected an object"))?;
            for name in rows.keys() {
                if schema.column(name).is_none() {
                    return Err(format!("{what}.rows: no column named {name:?}"));
                }
            }
            let mut columns = Vec::new();
            for col in &schema.columns {
                let list = rows
                    .get(&col.name)
                    .ok_or_else(|| format!("{what}.rows: missing column {:?}", col.name))?
                    .as_array()
                    .ok_or_else(|| format!("{what}.rows[{:?}]: expected an array", col.name))?;
                let parsed = list
                    .iter()
                    .enumerate()
                    .map(|(i, r)| parse_row(col, r).map_err(|e| format!("{what}.rows[{:?}][{i}]: {e}", col.name)))
                    .collect::<ParseResult<Vec<_>>>()?;
                columns.push(parsed);
            }
            if columns.windows(2).any(|w| w[0].len() != w[1].len()) {
                return Err(format!("{what}.rows: the columns have different numbers of rows"));
            }
            let commit = Commit { message, columns };
            commit.check(&schema).map_err(|e| format!("{what}: {e}"))?;
            commits.push(commit);
        }
        let mut tags = Vec::new();
        if let Some(t) = top.get("tags") {
            for (i, t) in t.as_array().ok_or("$.tags: expected an array")?.iter().enumerate() {
                let what = format!("$.tags[{i}]");
                obj(t, &what, &["name", "version"], &["message"])?;
                let name = string(&t["name"], &format!("{what}.name"))?.to_string();
                tessera::paths::validate_ref_name(&name).map_err(|e| format!("{what}.name: {e}"))?;
                let version = uint(&t["version"], &format!("{what}.version"))?;
                if version == 0 || version > commits.len() as u64 + 1 {
                    return Err(format!("{what}.version: {version} is not a version of the description"));
                }
                let message = match t.get("message") {
                    Some(m) => string(m, &format!("{what}.message"))?.to_string(),
                    None => String::new(),
                };
                if tags.iter().any(|x: &TagSpec| x.name == name) {
                    return Err(format!("{what}.name: tag {name:?} appears twice"));
                }
                tags.push(TagSpec { name, version, message });
            }
        }
        Ok(Self { schema, commits, tags })
    }

    /// The document in its canonical JSON form (members as [`Logical::from_value`] reads them).
    #[must_use]
    pub fn to_value(&self) -> Value {
        let commits: Vec<Value> = self
            .commits
            .iter()
            .map(|c| {
                let rows: Map<String, Value> = self
                    .schema
                    .columns
                    .iter()
                    .zip(&c.columns)
                    .map(|(col, rows)| {
                        let list = rows.iter().map(|r| r.as_ref().map_or(Value::Null, |r| row_json(col.dtype, r)));
                        (col.name.clone(), Value::Array(list.collect()))
                    })
                    .collect();
                json!({"message": c.message, "rows": rows})
            })
            .collect();
        let tags: Vec<Value> =
            self.tags.iter().map(|t| json!({"name": t.name, "version": t.version, "message": t.message})).collect();
        json!({
            "logical": LOGICAL_FORMAT,
            "schema": schema_json(&self.schema, false),
            "commits": commits,
            "tags": tags,
        })
    }

    /// The number of versions the description creates (creation plus one per commit).
    #[must_use]
    pub fn versions(&self) -> u64 {
        self.commits.len() as u64 + 1
    }

    /// The canonical dump of version `version` of `main` (1 = the created dataset), computed
    /// from the description alone.
    ///
    /// # Panics
    /// If `version` is 0 or above [`Logical::versions`].
    #[must_use]
    pub fn expected_dump(&self, version: u64) -> Value {
        assert!(version >= 1 && version <= self.versions(), "no version {version}");
        let upto = &self.commits[..(version - 1) as usize];
        let columns: Vec<Vec<Option<Row>>> = (0..self.schema.columns.len())
            .map(|i| upto.iter().flat_map(|c| c.columns[i].iter().cloned()).collect())
            .collect();
        dump_of("main", version, &self.schema, &columns)
    }

    /// A writer case's `expected.json`: the dump of every version, and the version each tag
    /// names.
    #[must_use]
    pub fn expected_document(&self) -> Value {
        let versions: Vec<Value> =
            (1..=self.versions()).map(|v| json!({"version": v, "dump": self.expected_dump(v)})).collect();
        let tags: Vec<Value> = self.tags.iter().map(|t| json!({"name": t.name, "version": t.version})).collect();
        json!({"expected": EXPECTED_FORMAT, "versions": versions, "tags": tags})
    }

    /// The rows of a commit as the reference's column buffers, in schema order.
    ///
    /// # Errors
    /// A row the reference refuses (which the parser should have caught).
    pub fn commit_columns(&self, commit: &Commit) -> tessera::Result<Vec<ColumnData>> {
        let mut out = Vec::with_capacity(self.schema.columns.len());
        for (col, rows) in self.schema.columns.iter().zip(&commit.columns) {
            let mut d = ColumnData::for_column(col);
            for r in rows {
                match r {
                    Some(r) => d.push_row(&r.shape, &r.bytes)?,
                    None => d.push_null()?,
                }
            }
            out.push(d);
        }
        Ok(out)
    }

    /// Writes the description with the reference writer at `root` (a local directory).
    ///
    /// # Errors
    /// Whatever the reference reports.
    ///
    /// # Panics
    /// If a tag names a version the description does not have (`Logical::from_value` refuses
    /// such descriptions).
    pub fn write_with_reference(&self, root: &Path, settings: &RefWrite) -> tessera::Result<()> {
        let location = root.to_str().ok_or_else(|| tessera::Error::Usage("the path is not UTF-8".into()))?;
        let mut n = 0u8;
        let mut next = || {
            let o = settings.options(n);
            n = n.wrapping_add(1);
            o
        };
        let mut versions = vec![Dataset::create(location, self.schema.clone(), &next())?];
        for c in &self.commits {
            let mut batch = tessera::Batch::new();
            for (col, data) in self.schema.columns.iter().zip(self.commit_columns(c)?) {
                batch.push(col.name.clone(), data)?;
            }
            let last = versions.last().expect("version 1 exists");
            let ds = last.append(&batch, &c.message, next())?;
            versions.push(ds);
        }
        for t in &self.tags {
            versions[(t.version - 1) as usize].create_tag(&t.name, &t.message, &next())?;
        }
        Ok(())
    }
}

impl Commit {
    /// Checks the rows against the schema the way a writer must (kind value rules, KND-11;
    /// UTF-8, DT-05), so a description never asks a writer to store what it must refuse.
    fn check(&self, schema: &Schema) -> ParseResult<()> {
        for (col, rows) in schema.columns.iter().zip(&self.columns) {
            let mut d = ColumnData::for_column(col);
            for r in rows {
                match r {
                    Some(r) => d.push_row(&r.shape, &r.bytes).map_err(|e| format!("column {:?}: {e}", col.name))?,
                    None => d.push_null().map_err(|e| format!("column {:?}: {e}", col.name))?,
                }
            }
            d.check_against(col).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// The versions of a writer case's `expected.json`: (version, dump) pairs.
pub type ExpectedVersions = Vec<(u64, Value)>;

/// The tags of a writer case's `expected.json`: (tag, version) pairs.
pub type ExpectedTags = Vec<(String, u64)>;

/// Parses a writer case's `expected.json` into (version, dump) pairs and (tag, version) pairs.
///
/// # Errors
/// What is wrong with the document.
pub fn parse_expected(v: &Value) -> ParseResult<(ExpectedVersions, ExpectedTags)> {
    let top = obj(v, "$", &["expected", "versions", "tags"], &[])?;
    if top["expected"] != EXPECTED_FORMAT {
        return Err(format!("$.expected: expected {EXPECTED_FORMAT:?}"));
    }
    let mut versions = Vec::new();
    for (i, e) in top["versions"].as_array().ok_or("$.versions: expected an array")?.iter().enumerate() {
        obj(e, &format!("$.versions[{i}]"), &["version", "dump"], &[])?;
        versions.push((uint(&e["version"], &format!("$.versions[{i}].version"))?, e["dump"].clone()));
    }
    let mut tags = Vec::new();
    for (i, t) in top["tags"].as_array().ok_or("$.tags: expected an array")?.iter().enumerate() {
        obj(t, &format!("$.tags[{i}]"), &["name", "version"], &[])?;
        tags.push((string(&t["name"], "$.tags[].name")?.to_string(), uint(&t["version"], "$.tags[].version")?));
    }
    Ok((versions, tags))
}

/// Groups rows by column name for building descriptions in code: `(column, rows)` pairs.
#[must_use]
pub fn commit_from(schema: &Schema, message: &str, mut rows: BTreeMap<String, Vec<Option<Row>>>) -> Commit {
    let columns = schema.columns.iter().map(|c| rows.remove(&c.name).unwrap_or_default()).collect();
    Commit { message: message.to_string(), columns }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_round_trip_and_are_strict() {
        let cases: [(DType, Value); 7] = [
            (DType::I8, json!("-128")),
            (DType::U64, json!("18446744073709551615")),
            (DType::I64, json!("-9223372036854775808")),
            (DType::F16, json!("0x7e01")),
            (DType::F64, json!("0xfff0000000000000")),
            (DType::Bool, json!(true)),
            (DType::I32, json!("0")),
        ];
        for (d, v) in cases {
            let mut b = Vec::new();
            parse_element(d, &v, &mut b).unwrap();
            assert_eq!(element_json(d, &b), v, "{d}");
        }
        for (d, v) in [
            (DType::U8, json!("256")),
            (DType::I8, json!("-0")),
            (DType::U8, json!("01")),
            (DType::U8, json!("+1")),
            (DType::F32, json!("0x3F800000")),
            (DType::F32, json!("0x3f80")),
            (DType::U8, json!(1)),
            (DType::Bool, json!("true")),
        ] {
            assert!(parse_element(d, &v, &mut Vec::new()).is_err(), "{d} {v}");
        }
    }

    #[test]
    fn documents_round_trip() {
        let doc = json!({
            "logical": LOGICAL_FORMAT,
            "schema": {"columns": [
                {"name": "x", "dtype": "f32", "shape": [null, 2], "kind": {"type": "generic"},
                 "compression": {"codec": "zstd", "level": 3}, "nullable": true, "metadata": {"b": "2", "a": "1"}},
                {"name": "t", "dtype": "utf8", "shape": [], "kind": {"type": "text"},
                 "compression": {"codec": "none"}, "nullable": false, "metadata": {}}
            ], "metadata": {"k": "v"}},
            "commits": [{"message": "m", "rows": {
                "x": [{"shape": [1, 2], "values": ["0x3f800000", "0x80000000"]}, null],
                "t": [{"shape": [3], "values": "héé"}, {"shape": [0], "values": ""}]
            }}],
            "tags": [{"name": "t1", "version": 2, "message": ""}]
        });
        let err = Logical::from_value(&doc).unwrap_err();
        assert!(err.contains("byte length"), "{err}");
        let mut doc = doc;
        doc["commits"][0]["rows"]["t"][0]["shape"] = json!([5]);
        let l = Logical::from_value(&doc).unwrap();
        assert_eq!(l.schema.columns[0].metadata[0].0, "a");
        let again = Logical::from_value(&l.to_value()).unwrap();
        assert_eq!(again, l);
        let d = l.expected_dump(2);
        assert_eq!(d["row_count"], 2);
        assert_eq!(d["columns"]["x"]["rows"][1], Value::Null);
        assert_eq!(l.expected_dump(1)["columns"]["t"]["rows"], json!([]));
        let mut bad = l.to_value();
        bad["commits"][0]["rows"]["x"][0]["shape"] = json!([1, 3]);
        assert!(Logical::from_value(&bad).is_err());
        let mut bad = l.to_value();
        bad["tags"][0]["version"] = json!(3);
        assert!(Logical::from_value(&bad).is_err());
    }
}
