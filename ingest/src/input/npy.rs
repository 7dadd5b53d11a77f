//! NumPy `.npy` and `.npz` files: a small, strict `.npy` header parser and writer, and the
//! ingest source that maps arrays to columns (first axis = rows).
//!
//! Accepted: format versions 1.0, 2.0 and 3.0; dtypes `b1`, `u1`..`u8`, `i1`..`i8`, `f2`,
//! `f4`, `f8` in either byte order (big-endian data is swapped to little-endian); C order
//! (`fortran_order: True` only for rank <= 1, where the layouts agree). Rejected with a
//! message: structured, string, object, complex and datetime dtypes, Fortran-order arrays of
//! rank >= 2, and files whose size disagrees with the header.
//!
//! Column naming in a directory or `.npz`: `NAME.npy` is column `NAME` (shape `[N, ...]`);
//! `NAME.lengths.npy` (`[N, k]` integers, the row shapes) plus `NAME.values.npy` (1-d, all
//! rows' elements back to back) is a ragged column `NAME`; `NAME.valid.npy` (`[N]` bool) marks
//! null rows of `NAME`. This is exactly what `tessera export` writes.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use tessera::{Column, DType, Dim};

use super::{Bad, Sample, Value, extension};
use crate::error::{IngestError, IngestResult};

/// The `.npy` magic.
pub(crate) const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// A parsed `.npy` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    /// Element type.
    pub(crate) dtype: DType,
    /// Data is big-endian and must be byte-swapped.
    pub(crate) swap: bool,
    /// Array shape.
    pub(crate) shape: Vec<u64>,
    /// Offset of the data from the start of the file.
    pub(crate) data_offset: u64,
}

impl Header {
    /// Elements in the array (checked).
    pub(crate) fn elements(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
    }

    /// Bytes of data the header declares (checked).
    pub(crate) fn data_len(&self) -> Option<u64> {
        self.elements()?.checked_mul(self.dtype.item_size() as u64)
    }
}

/// Parses the header at the start of `bytes` (which must hold at least the whole header).
///
/// # Errors
/// A message naming what is wrong.
pub(crate) fn parse_header(bytes: &[u8]) -> Result<Header, String> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err("not a .npy file (bad magic)".into());
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (len, start): (usize, usize) = match (major, minor) {
        (1, 0) => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        (2 | 3, 0) => {
            let b = bytes.get(8..12).ok_or("truncated .npy header")?;
            (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 12)
        }
        _ => return Err(format!(".npy format version {major}.{minor} is not supported (1.0, 2.0, 3.0 are)")),
    };
    let end = start.checked_add(len).ok_or("header length overflows")?;
    let text = bytes.get(start..end).ok_or("truncated .npy header")?;
    let text = std::str::from_utf8(text).map_err(|_| "header is not ASCII/UTF-8")?;
    let (descr, fortran, shape) = parse_dict(text)?;
    let (dtype, swap) = parse_descr(&descr)?;
    if fortran && shape.len() > 1 {
        return Err("Fortran-order arrays of rank >= 2 are not supported (save with np.ascontiguousarray)".into());
    }
    Ok(Header { dtype, swap, shape, data_offset: end as u64 })
}

/// Parses `descr` like `<f4`, `|u1`, `>i8` into a dtype and whether to byte-swap.
fn parse_descr(descr: &str) -> Result<(DType, bool), String> {
    let mut chars = descr.chars();
    let order = chars.next().ok_or("empty descr")?;
    let code = chars.as_str();
    let dtype = match code {
        "b1" => DType::Bool,
        "u1" => DType::U8,
        "u2" => DType::U16,
        "u4" => DType::U32,
        "u8" => DType::U64,
        "i1" => DType::I8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        _ => return Err(format!("dtype {descr:?} is not supported (bool, integers and f2/f4/f8 are)")),
    };
    let swap = match order {
        '<' | '|' => false,
        '=' => cfg!(target_endian = "big"),
        '>' => dtype.item_size() > 1,
        _ => return Err(format!("bad byte order in descr {descr:?}")),
    };
    Ok((dtype, swap))
}

/// A strict parser of the header dict: `{'descr': '<f4', 'fortran_order': False,
/// 'shape': (3, 4), }` — exactly these three keys, Python literal syntax.
fn parse_dict(text: &str) -> Result<(String, bool, Vec<u64>), String> {
    let mut p = Parser { s: text.as_bytes(), i: 0 };
    p.ws();
    p.expect(b'{')?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        p.ws();
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        p.ws();
        p.expect(b':')?;
        p.ws();
        let dup = match key.as_str() {
            "descr" => {
                descr.replace(p.string().map_err(|e| format!("descr: {e} (structured dtypes are not supported)"))?)
            }
            "fortran_order" => fortran.replace(p.boolean()?).map(|_| String::new()),
            "shape" => shape.replace(p.tuple()?).map(|_| String::new()),
            other => return Err(format!("unexpected header key {other:?}")),
        };
        if dup.is_some() {
            return Err(format!("header key {key:?} appears twice"));
        }
        p.ws();
        if p.eat(b',') {
            continue;
        }
        p.ws();
        p.expect(b'}')?;
        break;
    }
    p.ws();
    if p.i != p.s.len() {
        return Err("trailing bytes after the header dict".into());
    }
    match (descr, fortran, shape) {
        (Some(d), Some(f), Some(s)) => Ok((d, f, s)),
        _ => Err("header lacks one of 'descr', 'fortran_order', 'shape'".into()),
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.eat(c) { Ok(()) } else { Err(format!("expected {:?} at byte {} of the header", c as char, self.i)) }
    }

    fn string(&mut self) -> Result<String, String> {
        let q = *self.s.get(self.i).ok_or("unexpected end of header")?;
        if q != b'\'' && q != b'"' {
            return Err(format!("expected a quoted string at byte {}", self.i));
        }
        let start = self.i + 1;
        let len = self.s[start..].iter().position(|&c| c == q).ok_or("unterminated string")?;
        let body = &self.s[start..start + len];
        if body.contains(&b'\\') {
            return Err("escapes in header strings are not supported".into());
        }
        self.i = start + len + 1;
        String::from_utf8(body.to_vec()).map_err(|_| "string is not UTF-8".into())
    }

    fn boolean(&mut self) -> Result<bool, String> {
        if self.s[self.i..].starts_with(b"True") {
            self.i += 4;
            Ok(true)
        } else if self.s[self.i..].starts_with(b"False") {
            self.i += 5;
            Ok(false)
        } else {
            Err("fortran_order must be True or False".into())
        }
    }

    fn tuple(&mut self) -> Result<Vec<u64>, String> {
        self.expect(b'(')?;
        let mut out = Vec::new();
        loop {
            self.ws();
            if self.eat(b')') {
                return Ok(out);
            }
            let start = self.i;
            while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
                self.i += 1;
            }
            let digits = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| "bad shape")?;
            let n: u64 = digits.parse().map_err(|_| format!("bad dimension at byte {start} of the header"))?;
            self.eat(b'L');
            out.push(n);
            self.ws();
            if !self.eat(b',') {
                self.ws();
                self.expect(b')')?;
                if out.len() == 1 && !self.s[..self.i].ends_with(b",)") {
                    // `(3)` is an int in Python, not a tuple; NumPy never writes it.
                    return Err("shape (n) must be written (n,)".into());
                }
                return Ok(out);
            }
        }
    }
}

/// Swaps big-endian elements in place to little-endian.
fn to_le(bytes: &mut [u8], item: usize, swap: bool) {
    if swap && item > 1 {
        for e in bytes.chunks_exact_mut(item) {
            e.reverse();
        }
    }
}

/// Parses a whole in-memory `.npy` (WebDataset fields, `.npz` members): its dtype, shape and
/// little-endian data.
///
/// # Errors
/// Header errors, or data whose length disagrees with the header.
pub(crate) fn parse_array(bytes: &[u8]) -> Result<(DType, Vec<u64>, Vec<u8>), String> {
    let h = parse_header(bytes)?;
    let want = h.data_len().ok_or("array size overflows")?;
    let have = bytes.len() as u64 - h.data_offset;
    if have != want {
        return Err(format!("array data is {have} bytes, the header's shape {:?} needs {want}", h.shape));
    }
    let mut data = bytes[h.data_offset as usize..].to_vec();
    to_le(&mut data, h.dtype.item_size(), h.swap);
    Ok((h.dtype, h.shape, data))
}

/// The `descr` of a dtype for writing (bf16, which NumPy lacks, is written as `<u2` bits).
#[must_use]
pub fn descr(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "|b1",
        DType::U8 | DType::Utf8 | DType::Bytes => "|u1",
        DType::U16 | DType::Bf16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
    }
}

/// A version 1.0 header (2.0 if it must be longer) padded with spaces so that the data starts
/// at a multiple of 64 bytes, or exactly at `min_total` bytes when that is larger (lets a
/// writer reserve room and fill in the shape later).
pub fn header(descr: &str, shape: &[u64], min_total: usize) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let shape_text = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    let (version, prefix) = if dict.len() + 11 > usize::from(u16::MAX) { (2u8, 12) } else { (1u8, 10) };
    let unpadded = prefix + dict.len() + 1;
    let total = unpadded.next_multiple_of(64).max(min_total);
    let hlen = total - prefix;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(hlen as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(hlen as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    out
}

/// Where an array's data lives.
#[derive(Debug)]
enum Data {
    /// In a `.npy` file at an offset (read on demand, so big files stream).
    File(File),
    /// In memory (`.npz` members are inflated whole).
    Memory(Vec<u8>),
}

/// One array of the inputs.
#[derive(Debug)]
struct Array {
    name: String,
    origin: String,
    header: Header,
    data: Data,
}

impl Array {
    /// Reads `len` bytes of data from byte `start` of the data, little-endian.
    fn read(&mut self, start: u64, len: u64) -> Result<Vec<u8>, String> {
        let mut out = match &mut self.data {
            Data::Memory(v) => {
                v.get(start as usize..(start + len) as usize).ok_or("read past the end of the array")?.to_vec()
            }
            Data::File(f) => {
                let mut buf = vec![0u8; len as usize];
                f.seek(SeekFrom::Start(self.header.data_offset + start)).map_err(|e| e.to_string())?;
                f.read_exact(&mut buf).map_err(|e| e.to_string())?;
                buf
            }
        };
        to_le(&mut out, self.header.dtype.item_size(), self.header.swap);
        Ok(out)
    }

    fn rows(&self) -> Result<u64, String> {
        self.header.shape.first().copied().ok_or_else(|| format!("{}: a 0-d array has no rows", self.origin))
    }
}

/// How a column's rows are stored in the arrays.
#[derive(Debug)]
enum Layout {
    /// `NAME.npy`: rows of a fixed shape.
    Fixed { array: Array, row_shape: Vec<u64>, row_bytes: u64 },
    /// `NAME.lengths.npy` + `NAME.values.npy`.
    Ragged { values: Array, shapes: Vec<Vec<u64>>, offsets: Vec<u64> },
}

/// One column of a NumPy source.
#[derive(Debug)]
struct NpyColumn {
    name: String,
    layout: Layout,
    valid: Option<Vec<bool>>,
}

/// A set of `.npy`/`.npz` inputs, opened and checked, read in row chunks.
#[derive(Debug)]
pub(crate) struct NpySource {
    columns: Vec<NpyColumn>,
    /// Rows (the common first axis).
    pub(crate) rows: u64,
    /// The directory a schema sidecar would be in.
    pub(crate) dir: PathBuf,
}

/// Expands the inputs (directories list their `.npy`/`.npz` files) and opens every array.
///
/// # Errors
/// Missing files (exit 3), malformed arrays (exit 1), inconsistent row counts (exit 1).
pub(crate) fn open(inputs: &[PathBuf]) -> IngestResult<NpySource> {
    let files = super::expand_inputs(inputs, &["npy", "npz"])?;
    let mut arrays = Vec::new();
    for f in &files {
        match extension(f).as_str() {
            "npy" => arrays.push(open_npy(f)?),
            "npz" => arrays.extend(open_npz(f)?),
            _ => return Err(IngestError::usage(format!("{}: not a .npy or .npz file", f.display()))),
        }
    }
    if arrays.is_empty() {
        return Err(IngestError::not_found("no .npy or .npz files in the inputs"));
    }
    let dir = inputs
        .first()
        .map(|p| if p.is_dir() { p.clone() } else { p.parent().map(Path::to_path_buf).unwrap_or_default() })
        .unwrap_or_default();
    let mut src = group(arrays)?;
    src.dir = dir;
    Ok(src)
}

fn open_npy(path: &Path) -> IngestResult<Array> {
    let origin = path.display().to_string();
    let mut f = File::open(path).map_err(|e| IngestError::io(path, &e))?;
    let size = f.metadata().map_err(|e| IngestError::io(path, &e))?.len();
    let mut head = vec![0u8; size.min(1 << 16) as usize];
    f.read_exact(&mut head).map_err(|e| IngestError::io(path, &e))?;
    let header = parse_header(&head).map_err(|e| IngestError::data(format!("{origin}: {e}")))?;
    let want = header.data_len().ok_or_else(|| IngestError::data(format!("{origin}: array size overflows")))?;
    if size != header.data_offset + want {
        return Err(IngestError::data(format!(
            "{origin}: file is {size} bytes, header says {} + {want} (shape {:?})",
            header.data_offset, header.shape
        )));
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let name = name.strip_suffix(".npy").or_else(|| name.strip_suffix(".NPY")).unwrap_or(name).to_string();
    Ok(Array { name, origin, header, data: Data::File(f) })
}

fn open_npz(path: &Path) -> IngestResult<Vec<Array>> {
    let origin = path.display().to_string();
    let f = File::open(path).map_err(|e| IngestError::io(path, &e))?;
    let mut zip =
        zip::ZipArchive::new(std::io::BufReader::new(f)).map_err(|e| IngestError::data(format!("{origin}: {e}")))?;
    let mut out = Vec::new();
    for i in 0..zip.len() {
        let mut member = zip.by_index(i).map_err(|e| IngestError::data(format!("{origin}: {e}")))?;
        if member.is_dir() {
            continue;
        }
        let mname = member.name().map_err(|e| IngestError::data(format!("{origin}: {e}")))?.to_string();
        let Some(name) = mname.strip_suffix(".npy") else {
            return Err(IngestError::data(format!("{origin}: member {mname:?} is not a .npy array")));
        };
        let morigin = format!("{origin}:{mname}");
        // Members are inflated whole; the size a zip header claims is not trusted for the
        // allocation (zip bombs), only the bytes actually inflated, up to a limit.
        let limit = 1u64 << 34;
        let mut bytes = Vec::with_capacity(member.size().min(64 << 20) as usize);
        (&mut member)
            .take(limit + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| IngestError::data(format!("{morigin}: {e}")))?;
        if bytes.len() as u64 > limit {
            return Err(IngestError::data(format!("{morigin}: member larger than {limit} bytes")));
        }
        let header = parse_header(&bytes).map_err(|e| IngestError::data(format!("{morigin}: {e}")))?;
        let want = header.data_len().ok_or_else(|| IngestError::data(format!("{morigin}: array size overflows")))?;
        if bytes.len() as u64 != header.data_offset + want {
            return Err(IngestError::data(format!("{morigin}: data length disagrees with the header")));
        }
        let data = bytes.split_off(header.data_offset as usize);
        out.push(Array { name: name.to_string(), origin: morigin, header, data: Data::Memory(data) });
    }
    Ok(out)
}

/// Reads a whole small array as u64 (lengths) or bool (validity).
fn read_all(a: &mut Array) -> Result<Vec<u8>, String> {
    let len = a.header.data_len().ok_or("array size overflows")?;
    a.read(0, len)
}

fn as_u64s(a: &mut Array) -> Result<Vec<u64>, String> {
    let d = a.header.dtype;
    if !d.is_integer() {
        return Err(format!("{}: lengths must be integers, not {d}", a.origin));
    }
    let n = d.item_size();
    let signed = matches!(d, DType::I8 | DType::I16 | DType::I32 | DType::I64);
    let raw = read_all(a)?;
    raw.chunks_exact(n)
        .map(|e| {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(e);
            if signed && e[n - 1] & 0x80 != 0 {
                return Err(format!("{}: negative length", a.origin));
            }
            Ok(u64::from_le_bytes(b))
        })
        .collect()
}

/// Pairs `.lengths`/`.values`/`.valid` arrays into columns and checks the row counts.
fn group(arrays: Vec<Array>) -> IngestResult<NpySource> {
    let names: Vec<String> = arrays.iter().map(|a| a.name.clone()).collect();
    let mut map: std::collections::BTreeMap<String, Array> = std::collections::BTreeMap::new();
    let mut order = Vec::new();
    for a in arrays {
        if map.contains_key(&a.name) {
            return Err(IngestError::usage(format!("two arrays named {:?} (second: {})", a.name, a.origin)));
        }
        order.push(a.name.clone());
        map.insert(a.name.clone(), a);
    }
    let data = |e: String| IngestError::data(e);
    let mut columns = Vec::new();
    for name in &order {
        if let Some(base) = name.strip_suffix(".valid")
            && names.iter().any(|n| n == base || *n == format!("{base}.values"))
        {
            continue; // attached to its column below
        }
        if let Some(b) = name.strip_suffix(".lengths")
            && names.iter().any(|n| *n == format!("{b}.values"))
        {
            continue;
        }
        let (cname, layout) = if let Some(b) = name.strip_suffix(".values")
            && names.iter().any(|n| *n == format!("{b}.lengths"))
        {
            let mut lengths =
                map.remove(&format!("{b}.lengths")).ok_or_else(|| data(format!("{b}.lengths missing")))?;
            let values = map.remove(name).ok_or_else(|| data(format!("{name} missing")))?;
            if values.header.shape.len() != 1 {
                return Err(data(format!("{}: ragged values must be a 1-d array", values.origin)));
            }
            let rows = lengths.rows().map_err(data)?;
            let k = match lengths.header.shape.as_slice() {
                [_] => 1,
                [_, k] => *k as usize,
                _ => return Err(data(format!("{}: lengths must have shape [N] or [N, k]", lengths.origin))),
            };
            let flat = as_u64s(&mut lengths).map_err(data)?;
            let mut shapes = Vec::with_capacity(rows as usize);
            let mut offsets = vec![0u64];
            for r in 0..rows as usize {
                let s = flat[r * k..(r + 1) * k].to_vec();
                let n = s.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
                let last = *offsets.last().unwrap_or(&0);
                let next = n.and_then(|n| last.checked_add(n)).ok_or_else(|| data(format!("{b}: sizes overflow")))?;
                offsets.push(next);
                shapes.push(s);
            }
            let total = offsets.last().copied().unwrap_or(0);
            if total != values.header.shape[0] {
                return Err(data(format!(
                    "{}: the lengths need {total} elements, values holds {}",
                    values.origin, values.header.shape[0]
                )));
            }
            (b.to_string(), Layout::Ragged { values, shapes, offsets })
        } else {
            let array = map.remove(name).ok_or_else(|| data(format!("{name} missing")))?;
            array.rows().map_err(data)?;
            let row_shape = array.header.shape[1..].to_vec();
            let row_bytes = row_shape
                .iter()
                .try_fold(array.header.dtype.item_size() as u64, |a, &d| a.checked_mul(d))
                .ok_or_else(|| data(format!("{}: row size overflows", array.origin)))?;
            (name.clone(), Layout::Fixed { array, row_shape, row_bytes })
        };
        columns.push(NpyColumn { name: cname, layout, valid: None });
    }
    // Validity masks.
    for (name, mut a) in map {
        let Some(base) = name.strip_suffix(".valid") else {
            return Err(data(format!("{}: array {name:?} does not belong to a column", a.origin)));
        };
        let col = columns
            .iter_mut()
            .find(|c| c.name == base)
            .ok_or_else(|| data(format!("{}: no column {base:?} for this mask", a.origin)))?;
        if a.header.shape.len() != 1 || !matches!(a.header.dtype, DType::Bool | DType::U8) {
            return Err(data(format!("{}: a validity mask must be a 1-d bool array", a.origin)));
        }
        col.valid = Some(read_all(&mut a).map_err(data)?.iter().map(|&b| b != 0).collect());
    }
    let mut rows = None;
    for c in &columns {
        let (n, origin) = match &c.layout {
            Layout::Fixed { array, .. } => (array.rows().map_err(data)?, &array.origin),
            Layout::Ragged { shapes, values, .. } => (shapes.len() as u64, &values.origin),
        };
        if c.valid.as_ref().is_some_and(|v| v.len() as u64 != n) {
            return Err(data(format!("{}: validity mask length differs from the rows", c.name)));
        }
        match rows {
            None => rows = Some(n),
            Some(r) if r != n => {
                return Err(data(format!("{origin} has {n} rows, other arrays have {r} (first axis = rows)")));
            }
            Some(_) => {}
        }
    }
    Ok(NpySource { columns, rows: rows.unwrap_or(0), dir: PathBuf::new() })
}

impl NpySource {
    /// The columns the arrays imply (`--ragged` gives the dims that vary).
    ///
    /// # Errors
    /// A `--ragged` entry that does not fit an array's row shape (a schema question).
    pub(crate) fn columns(&self, ragged: &super::columns::RaggedSpec) -> Result<Vec<Column>, String> {
        self.columns
            .iter()
            .map(|c| {
                let (dtype, dims): (DType, Vec<Dim>) = match &c.layout {
                    Layout::Fixed { array, row_shape, .. } => (array.header.dtype, ragged.dims(&c.name, row_shape)?),
                    Layout::Ragged { values, shapes, .. } => {
                        let k = shapes.first().map_or(1, Vec::len);
                        (values.header.dtype, vec![Dim::Ragged; k])
                    }
                };
                let col = Column::new(&c.name, dtype, &dims);
                Ok(if c.valid.is_some() { col.nullable() } else { col })
            })
            .collect()
    }

    /// Rows per read so that a chunk holds about `target_bytes` (1..=4096 rows).
    pub(crate) fn rows_per_chunk(&self, target_bytes: u64) -> u64 {
        let per_row: u64 = self
            .columns
            .iter()
            .map(|c| match &c.layout {
                Layout::Fixed { row_bytes, .. } => *row_bytes,
                Layout::Ragged { values, offsets, .. } => {
                    let total = offsets.last().copied().unwrap_or(0) * values.header.dtype.item_size() as u64;
                    total / (offsets.len() as u64 - 1).max(1)
                }
            })
            .sum();
        (target_bytes / per_row.max(1)).clamp(1, 4096)
    }

    /// Reads rows `start..start + n` as samples.
    ///
    /// # Errors
    /// A read failure, attributed to the array's file.
    pub(crate) fn read_chunk(&mut self, start: u64, count: u64) -> Result<Vec<Sample>, Bad> {
        let end = (start + count).min(self.rows);
        let n_rows = (end - start) as usize;
        let mut rows: Vec<Vec<(String, Value)>> = (0..n_rows).map(|_| Vec::with_capacity(self.columns.len())).collect();
        let mut bytes_per_row = vec![0u64; n_rows];
        for c in &mut self.columns {
            match &mut c.layout {
                Layout::Fixed { array, row_shape, row_bytes } => {
                    let data = array
                        .read(start * *row_bytes, (end - start) * *row_bytes)
                        .map_err(|e| Bad::new(&array.origin, e))?;
                    for (i, row) in rows.iter_mut().enumerate() {
                        let b = data[i * *row_bytes as usize..(i + 1) * *row_bytes as usize].to_vec();
                        bytes_per_row[i] += *row_bytes;
                        let valid = c.valid.as_ref().is_none_or(|v| v[start as usize + i]);
                        let v = if valid {
                            Value::Tensor { dtype: array.header.dtype, shape: row_shape.clone(), bytes: b }
                        } else {
                            Value::Null
                        };
                        row.push((c.name.clone(), v));
                    }
                }
                Layout::Ragged { values, shapes, offsets } => {
                    let item = values.header.dtype.item_size() as u64;
                    let (first, last) = (offsets[start as usize], offsets[end as usize]);
                    let data =
                        values.read(first * item, (last - first) * item).map_err(|e| Bad::new(&values.origin, e))?;
                    for (i, row) in rows.iter_mut().enumerate() {
                        let r = start as usize + i;
                        let (x, y) = ((offsets[r] - first) * item, (offsets[r + 1] - first) * item);
                        bytes_per_row[i] += y - x;
                        let valid = c.valid.as_ref().is_none_or(|v| v[r]);
                        let v = if valid {
                            Value::Tensor {
                                dtype: values.header.dtype,
                                shape: shapes[r].clone(),
                                bytes: data[x as usize..y as usize].to_vec(),
                            }
                        } else {
                            Value::Null
                        };
                        row.push((c.name.clone(), v));
                    }
                }
            }
        }
        Ok(rows
            .into_iter()
            .zip(bytes_per_row)
            .enumerate()
            .map(|(i, (fields, input_bytes))| Sample {
                origin: format!("row {}", start + i as u64),
                fields,
                input_bytes,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        for shape in [vec![], vec![5], vec![2, 3, 4]] {
            let h = header("<f4", &shape, 0);
            assert_eq!(h.len() % 64, 0);
            let p = parse_header(&h).unwrap();
            assert_eq!((p.dtype, p.swap, p.shape, p.data_offset), (DType::F32, false, shape, h.len() as u64));
        }
        let h = header("<i8", &[7], 256);
        assert_eq!(h.len(), 256);
        assert_eq!(parse_header(&h).unwrap().shape, vec![7]);
    }

    #[test]
    fn strict_parsing() {
        let mk = |dict: &str| {
            let mut v = MAGIC.to_vec();
            v.extend_from_slice(&[1, 0]);
            v.extend_from_slice(&(dict.len() as u16).to_le_bytes());
            v.extend_from_slice(dict.as_bytes());
            v
        };
        assert!(parse_header(&mk("{'descr': '>i4', 'fortran_order': False, 'shape': (2,)}\n")).unwrap().swap);
        assert!(parse_header(&mk("{\"descr\": \"<f8\", \"fortran_order\": True, \"shape\": (3,), }")).is_ok());
        assert!(parse_header(&mk("{'descr': '<U8', 'fortran_order': False, 'shape': (2,)}")).is_err());
        assert!(parse_header(&mk("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2)}")).is_err());
        assert!(parse_header(&mk("{'descr': '<f4', 'shape': (2,)}")).is_err());
        assert!(parse_header(&mk("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}")).is_err());
        assert!(parse_header(&mk("{'descr': '<f4', 'fortran_order': False, 'shape': (2)}")).is_err());
        assert!(parse_header(&mk("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}")).is_err());
        assert!(parse_header(&mk("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x")).is_err());
        assert!(parse_header(b"\x93NUMPY\x01\x00\xff\x00{").is_err());
        let mut arr = mk("{'descr': '>u2', 'fortran_order': False, 'shape': (2,)}");
        arr.extend_from_slice(&[0, 1, 0, 2]);
        assert_eq!(parse_array(&arr).unwrap(), (DType::U16, vec![2], vec![1, 0, 2, 0]));
        arr.push(0);
        assert!(parse_array(&arr).is_err());
    }
}
