//! `tessera export`: write a version as `.npy` files or WebDataset tar shards, plus a
//! `tessera.schema.json` sidecar so that `tessera ingest` of the output restores the schema.
//!
//! `--format npy` (one directory):
//! - a column with a fixed shape → `COL.npy`, shape `[rows, ...]`;
//! - a column with ragged dims, or utf8/bytes → `COL.lengths.npy` (u64 `[rows, rank]`, every
//!   row's full shape; utf8/bytes: `[rows, 1]` byte lengths) and `COL.values.npy` (1-d, all
//!   rows' elements back to back; utf8/bytes as u8);
//! - a nullable column also → `COL.valid.npy` (bool `[rows]`; null rows are zeros / empty);
//! - bf16, which NumPy lacks, is written as its `<u2` bit patterns.
//!
//! `--format wds`: shards `shard-000000.tar`, … with keys `000000000`, …: image columns
//! (u8/u16, 1, 3 or 4 channels) as PNG, rank-0 class labels as `.cls`, text as `.txt`, JSON
//! as `.json`, bytes as `.bin`, other tensors as `.npy`. A column whose name is the
//! extension's default column name (`image` for png, `label` for cls, `text` for txt) is
//! written as `KEY.EXT`, any other as `KEY.COL.EXT`. Null values are left out of the sample
//! (a sample whose values are all null is kept as a lone `KEY.__key__` file).
//!
//! `--format parquet`: `data.parquet` in the Hugging Face datasets layout (see [`parquet`]).

mod parquet;

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use image::ImageEncoder;
use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use serde_json::json;
use tessera::{Column, ColumnData, DType, Dataset, Dim, ImageLayout, Kind};

use super::{AtArgs, Ctx, DatasetArg, emit, emit_json, fmt_bytes, open, parse_size};
use crate::error::{CliError, CliResult, Exit};
use crate::progress::{Progress, Total, visible};
use tessera_ingest::export::{npy_descr, npy_header, wds_column_name, write_sidecar};

/// Arguments of `tessera export`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    ds: DatasetArg,
    #[command(flatten)]
    at: AtArgs,
    /// Output folder (created; must be empty unless --force).
    #[arg(short, long, value_name = "DIR")]
    out: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "npy")]
    format: ExportFormat,
    /// Only these columns (comma-separated).
    #[arg(short, long, value_delimiter = ',', value_name = "COL")]
    columns: Vec<String>,
    /// WebDataset: rows per shard.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    shard_rows: u64,
    /// WebDataset: bytes per shard before starting the next (e.g. 1G).
    #[arg(long, default_value = "1G", value_name = "SIZE")]
    shard_size: String,
    /// Write into a non-empty output folder (files of the same names are replaced).
    #[arg(long)]
    force: bool,
}

/// Export formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ExportFormat {
    /// NumPy .npy files.
    Npy,
    /// WebDataset tar shards.
    Wds,
    /// One Parquet file (Hugging Face datasets layout: images as PNG, class names kept).
    Parquet,
}

/// Column names become file names: refuse the ones that cannot.
fn check_name(name: &str) -> CliResult<()> {
    if name.is_empty() || name.starts_with('.') || name.contains(['/', '\\', '\0']) {
        return Err(CliError::usage(format!(
            "column {name:?} cannot be used in a file name; exclude it with --columns"
        )));
    }
    Ok(())
}

/// Runs `tessera export`.
///
/// # Errors
/// Not found, usage (bad columns), conflict (non-empty output), I/O and validation errors.
pub(crate) fn run(ctx: Ctx, args: &Args) -> CliResult<Exit> {
    let ds = open(&args.ds, &args.at)?;
    let names: Vec<&str> = args.columns.iter().map(String::as_str).collect();
    let cols: Vec<Column> = ds.project((!names.is_empty()).then_some(names.as_slice()))?.into_iter().cloned().collect();
    for c in &cols {
        check_name(&c.name)?;
    }
    if args.out.exists() {
        let nonempty = std::fs::read_dir(&args.out).map_err(|e| CliError::io(&args.out, &e))?.next().is_some();
        if nonempty && !args.force {
            return Err(CliError::new(
                Exit::Conflict,
                format!("{} is not empty (use --force to write into it)", args.out.display()),
            ));
        }
    }
    std::fs::create_dir_all(&args.out).map_err(|e| CliError::io(&args.out, &e))?;
    let mut progress = Progress::new("export", Total::Count(ds.row_count(), "rows"), visible(ctx.quiet));
    let files = match args.format {
        ExportFormat::Npy => export_npy(&ds, &cols, &args.out, &mut progress)?,
        ExportFormat::Wds => {
            let shard_bytes = parse_size(&args.shard_size).map_err(CliError::usage)?;
            export_wds(&ds, &cols, &args.out, args.shard_rows.max(1), shard_bytes, &mut progress)?
        }
        ExportFormat::Parquet => parquet::export_parquet(&ds, &cols, &args.out, &mut progress)?,
    };
    write_sidecar(&args.out, &cols)?;
    progress.finish();
    let seconds = progress.seconds();
    let bytes: u64 = files.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).sum();
    let names: Vec<String> =
        files.iter().filter_map(|f| f.file_name().and_then(|n| n.to_str()).map(str::to_string)).collect();
    if ctx.json {
        emit_json(&json!({
            "branch": ds.branch(), "version": ds.version(), "out": args.out.display().to_string(),
            "format": match args.format {
                ExportFormat::Npy => "npy",
                ExportFormat::Wds => "wds",
                ExportFormat::Parquet => "parquet",
            },
            "rows": ds.row_count(), "files": names, "bytes": bytes, "seconds": seconds,
        }));
    } else {
        emit(&format!(
            "exported {} rows of {}@{} to {} ({} files, {}) in {seconds:.2} s",
            ds.row_count(),
            ds.branch(),
            ds.version(),
            args.out.display(),
            names.len(),
            fmt_bytes(bytes)
        ));
    }
    Ok(Exit::Ok)
}

fn create(path: &Path) -> CliResult<BufWriter<File>> {
    Ok(BufWriter::with_capacity(1 << 20, File::create(path).map_err(|e| CliError::io(path, &e))?))
}

/// Writers of one column's `.npy` files.
struct NpyColumn {
    fixed: Option<BufWriter<File>>,
    lengths: Option<BufWriter<File>>,
    values: Option<(BufWriter<File>, PathBuf, u64)>,
    valid: Option<BufWriter<File>>,
}

/// Reserved header size of `COL.values.npy`, whose length is known only at the end.
const VALUES_HEADER: usize = 128;

fn export_npy(ds: &Dataset, cols: &[Column], out: &Path, progress: &mut Progress) -> CliResult<Vec<PathBuf>> {
    let n = ds.row_count();
    let mut paths = Vec::new();
    let mut writers = Vec::new();
    for c in cols {
        let fixed = !c.dtype.is_variable() && c.shape.iter().all(|d| matches!(d, Dim::Fixed(_)));
        let mut w = NpyColumn { fixed: None, lengths: None, values: None, valid: None };
        if fixed {
            let p = out.join(format!("{}.npy", c.name));
            let mut f = create(&p)?;
            let mut shape = vec![n];
            shape.extend(c.shape.iter().map(|d| if let Dim::Fixed(x) = d { *x } else { 0 }));
            f.write_all(&npy_header(npy_descr(c.dtype), &shape, 0)).map_err(|e| CliError::io(&p, &e))?;
            w.fixed = Some(f);
            paths.push(p);
        } else {
            let rank = if c.dtype.is_variable() { 1 } else { c.shape.len() as u64 };
            let p = out.join(format!("{}.lengths.npy", c.name));
            let mut f = create(&p)?;
            f.write_all(&npy_header("<u8", &[n, rank], 0)).map_err(|e| CliError::io(&p, &e))?;
            w.lengths = Some(f);
            paths.push(p);
            let p = out.join(format!("{}.values.npy", c.name));
            let mut f = create(&p)?;
            f.write_all(&[0u8; VALUES_HEADER]).map_err(|e| CliError::io(&p, &e))?;
            w.values = Some((f, p.clone(), 0));
            paths.push(p);
        }
        if c.nullable {
            let p = out.join(format!("{}.valid.npy", c.name));
            let mut f = create(&p)?;
            f.write_all(&npy_header("|b1", &[n], 0)).map_err(|e| CliError::io(&p, &e))?;
            w.valid = Some(f);
            paths.push(p);
        }
        writers.push(w);
    }
    let names: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
    for info in ds.fragments() {
        let rows = info.rows();
        if rows.is_empty() {
            continue;
        }
        let batch = ds.read_rows(rows.clone(), Some(&names))?;
        let mut bytes = 0;
        for (c, w) in cols.iter().zip(&mut writers) {
            let data = batch.get(&c.name).ok_or_else(|| CliError::other("column missing from a read"))?;
            bytes += data.values().len() as u64;
            let err = |e: std::io::Error| CliError::other(format!("writing {}: {e}", c.name));
            if let Some(f) = &mut w.fixed {
                f.write_all(data.values()).map_err(err)?;
            }
            if let Some(f) = &mut w.lengths {
                for i in 0..data.len() {
                    for d in data.row_shape(i) {
                        f.write_all(&d.to_le_bytes()).map_err(err)?;
                    }
                }
            }
            if let Some((f, _, count)) = &mut w.values {
                f.write_all(data.values()).map_err(err)?;
                *count += (data.values().len() / c.dtype.item_size()) as u64;
            }
            if let Some(f) = &mut w.valid {
                let mask: Vec<u8> = (0..data.len()).map(|i| u8::from(data.is_valid(i))).collect();
                f.write_all(&mask).map_err(err)?;
            }
        }
        progress.advance(rows.end - rows.start, rows.end - rows.start, bytes);
    }
    for (c, w) in cols.iter().zip(writers) {
        for f in [w.fixed, w.lengths, w.valid].into_iter().flatten() {
            f.into_inner().map_err(|e| CliError::other(format!("writing {}: {e}", c.name)))?.sync_all().ok();
        }
        if let Some((f, p, count)) = w.values {
            let mut f = f.into_inner().map_err(|e| CliError::other(format!("writing {}: {e}", c.name)))?;
            let h = npy_header(npy_descr(c.dtype), &[count], VALUES_HEADER);
            if h.len() != VALUES_HEADER {
                return Err(CliError::other("values header does not fit its reserved space"));
            }
            f.seek(SeekFrom::Start(0)).map_err(|e| CliError::io(&p, &e))?;
            f.write_all(&h).map_err(|e| CliError::io(&p, &e))?;
            f.sync_all().ok();
        }
    }
    Ok(paths)
}

/// How a column is written into a WebDataset sample.
#[derive(Clone, Debug)]
enum Field {
    Png,
    Cls,
    Txt,
    Json,
    Bin,
    Npy,
}

impl Field {
    fn of(c: &Column) -> Self {
        match (&c.kind, c.dtype) {
            (Kind::Image { layout }, DType::U8 | DType::U16) => {
                let ok = match (layout, c.shape.as_slice()) {
                    (ImageLayout::Hw, [_, _]) => true,
                    (ImageLayout::Hwc, [_, _, Dim::Fixed(ch)]) | (ImageLayout::Chw, [Dim::Fixed(ch), _, _]) => {
                        matches!(ch, 1 | 3 | 4)
                    }
                    _ => false,
                };
                if ok { Self::Png } else { Self::Npy }
            }
            (Kind::ClassLabel { .. }, d) if d.is_integer() && c.shape.is_empty() => Self::Cls,
            (Kind::Json, DType::Utf8) => Self::Json,
            (_, DType::Utf8) => Self::Txt,
            (_, DType::Bytes) => Self::Bin,
            _ => Self::Npy,
        }
    }

    fn ext(&self) -> &'static str {
        match self {
            Self::Png => "png",
            Self::Cls => "cls",
            Self::Txt => "txt",
            Self::Json => "json",
            Self::Bin => "bin",
            Self::Npy => "npy",
        }
    }
}

/// The bytes of row `i` of a column as a WebDataset file.
fn encode_field(field: &Field, c: &Column, data: &ColumnData, i: usize) -> CliResult<Vec<u8>> {
    let row = data.row(i);
    let shape = data.row_shape(i);
    Ok(match field {
        Field::Cls => {
            let n = c.dtype.item_size();
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&row[..n]);
            let signed = matches!(c.dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64);
            let raw = u64::from_le_bytes(b);
            if signed {
                let shift = 64 - 8 * n as u32;
                (((raw << shift) as i64) >> shift).to_string().into_bytes()
            } else {
                raw.to_string().into_bytes()
            }
        }
        Field::Txt | Field::Json | Field::Bin => row.to_vec(),
        Field::Npy => {
            let mut out = npy_header(npy_descr(c.dtype), &shape, 0);
            out.extend_from_slice(row);
            out
        }
        Field::Png => png(c, row, &shape)?,
    })
}

/// Encodes an image row as PNG (transposing CHW to HWC).
fn png(c: &Column, row: &[u8], shape: &[u64]) -> CliResult<Vec<u8>> {
    let layout = match c.kind {
        Kind::Image { layout } => layout,
        _ => ImageLayout::Hwc,
    };
    let item = c.dtype.item_size();
    let (h, w, ch) = match (layout, shape) {
        (ImageLayout::Hw, [h, w]) => (*h, *w, 1),
        (ImageLayout::Hwc, [h, w, ch]) => (*h, *w, *ch),
        (ImageLayout::Chw, [ch, h, w]) => (*ch, *h, *w),
        _ => return Err(CliError::other(format!("column {:?}: unexpected image shape {shape:?}", c.name))),
    };
    let (h, w, ch) = if layout == ImageLayout::Chw { (w, ch, h) } else { (h, w, ch) };
    let hwc: Vec<u8> = if layout == ImageLayout::Chw {
        let (hh, ww, cc) = (h as usize, w as usize, ch as usize);
        let mut out = vec![0u8; row.len()];
        for y in 0..hh {
            for x in 0..ww {
                for k in 0..cc {
                    let src = ((k * hh + y) * ww + x) * item;
                    let dst = ((y * ww + x) * cc + k) * item;
                    out[dst..dst + item].copy_from_slice(&row[src..src + item]);
                }
            }
        }
        out
    } else {
        row.to_vec()
    };
    let color = match (ch, item) {
        (1, 1) => image::ExtendedColorType::L8,
        (3, 1) => image::ExtendedColorType::Rgb8,
        (4, 1) => image::ExtendedColorType::Rgba8,
        (1, 2) => image::ExtendedColorType::L16,
        (3, 2) => image::ExtendedColorType::Rgb16,
        (4, 2) => image::ExtendedColorType::Rgba16,
        _ => return Err(CliError::other(format!("column {:?}: {ch} channels cannot be a PNG", c.name))),
    };
    let (w32, h32) = (u32::try_from(w), u32::try_from(h));
    let (Ok(w32), Ok(h32)) = (w32, h32) else {
        return Err(CliError::other(format!("column {:?}: image too large for PNG", c.name)));
    };
    let mut out = Vec::new();
    PngEncoder::new_with_quality(&mut out, CompressionType::Fast, FilterType::Adaptive)
        .write_image(&hwc, w32, h32, color)
        .map_err(|e| CliError::other(format!("column {:?}: PNG encoding failed: {e}", c.name)))?;
    Ok(out)
}

/// An open shard.
struct Shard {
    builder: tar::Builder<BufWriter<File>>,
    path: PathBuf,
    rows: u64,
    bytes: u64,
}

/// Appends one regular file to a shard (mode 0644, mtime 0, so exports are reproducible).
fn append_file(s: &mut Shard, name: &str, content: &[u8]) -> CliResult<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(content.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_entry_type(tar::EntryType::Regular);
    s.builder.append_data(&mut header, name, content).map_err(|e| CliError::io(&s.path, &e))
}

fn finish_shard(s: Shard) -> CliResult<PathBuf> {
    let w = s.builder.into_inner().map_err(|e| CliError::io(&s.path, &e))?;
    let f = w.into_inner().map_err(|e| CliError::other(format!("{}: {e}", s.path.display())))?;
    f.sync_all().map_err(|e| CliError::io(&s.path, &e))?;
    Ok(s.path)
}

fn export_wds(
    ds: &Dataset,
    cols: &[Column],
    out: &Path,
    shard_rows: u64,
    shard_bytes: u64,
    progress: &mut Progress,
) -> CliResult<Vec<PathBuf>> {
    let fields: Vec<(Field, String)> = cols
        .iter()
        .map(|c| {
            let f = Field::of(c);
            let ext = f.ext();
            let name = if wds_column_name(ext) == c.name { ext.to_string() } else { format!("{}.{ext}", c.name) };
            (f, name)
        })
        .collect();
    let width = ds.row_count().to_string().len().max(9);
    let names: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
    let mut done = Vec::new();
    let mut shard: Option<Shard> = None;
    let mut row = 0u64;
    for info in ds.fragments() {
        let rows = info.rows();
        if rows.is_empty() {
            continue;
        }
        let batch = ds.read_rows(rows.clone(), Some(&names))?;
        let mut bytes = 0;
        for i in 0..(rows.end - rows.start) as usize {
            if shard.as_ref().is_some_and(|s| s.rows >= shard_rows || s.bytes >= shard_bytes)
                && let Some(s) = shard.take()
            {
                done.push(finish_shard(s)?);
            }
            if shard.is_none() {
                let path = out.join(format!("shard-{:06}.tar", done.len()));
                let builder = tar::Builder::new(create(&path)?);
                shard = Some(Shard { builder, path, rows: 0, bytes: 0 });
            }
            let Some(s) = shard.as_mut() else { return Err(CliError::other("no open shard")) };
            let key = format!("{row:0width$}");
            let mut wrote = false;
            for (c, (field, fname)) in cols.iter().zip(&fields) {
                let data = batch.get(&c.name).ok_or_else(|| CliError::other("column missing from a read"))?;
                if !data.is_valid(i) {
                    continue;
                }
                let content = encode_field(field, c, data, i)?;
                append_file(s, &format!("{key}.{fname}"), &content)?;
                s.bytes += content.len() as u64 + 512;
                bytes += data.row(i).len() as u64;
                wrote = true;
            }
            if !wrote {
                // Every value is null: keep the sample with a `__key__` file (ingest skips it).
                append_file(s, &format!("{key}.__key__"), key.as_bytes())?;
            }
            s.rows += 1;
            row += 1;
        }
        progress.advance(rows.end - rows.start, rows.end - rows.start, bytes);
    }
    if let Some(s) = shard.take() {
        done.push(finish_shard(s)?);
    }
    Ok(done)
}
