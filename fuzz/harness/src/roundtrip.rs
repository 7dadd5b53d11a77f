//! The structured round-trip target: an arbitrary small schema and rows are written with the
//! reference writer (small pages and files, column groups, several commits), then deleted from
//! and compacted, and every version must read back exactly what was written.

use arbitrary::Arbitrary;
use tessera::{At, Batch, Column, ColumnData, Compression, DType, Dataset, Dim, Kind, Schema, WriteOptions};

use crate::limits;

/// Most columns, rows, batches and deletes one input uses.
const MAX_COLUMNS: usize = 4;
const MAX_ROWS: usize = 48;
const MAX_BATCHES: usize = 4;
const MAX_DELETES: usize = 8;
/// Fixed dims and ragged sizes are below this.
const DIM: u8 = 5;

/// A small dataset: schema, rows and the writer settings, all bounded when used.
#[derive(Arbitrary, Clone, Debug)]
pub struct ArbitraryDataset {
    /// Columns (the first `MAX_COLUMNS` are used; at least one).
    pub columns: Vec<ArbColumn>,
    /// Cell values, used row-major and cyclically.
    pub cells: Vec<ArbCell>,
    /// Rows (modulo 49).
    pub rows: u8,
    /// Commits the rows are split into (1..=4); odd values use one writer for all batches.
    pub batches: u8,
    /// Raw bytes per page (1..=256).
    pub page_bytes: u8,
    /// Raw bytes per data file (1..=4096).
    pub target_file_bytes: u16,
    /// Store the first column in its own data files.
    pub split_groups: bool,
    /// Rows to delete afterwards (modulo the row count).
    pub deletes: Vec<u8>,
    /// Compact afterwards to fragments of this many rows (modulo 64, plus 1).
    pub compact: Option<u8>,
}

/// One column's definition.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub struct ArbColumn {
    /// Index into `DType::ALL` (modulo 15).
    pub dtype: u8,
    /// The shape (ignored for `utf8`/`bytes`, which have rank 0).
    pub shape: ArbShape,
    /// Page compression.
    pub compression: ArbCompression,
    /// Whether rows may be null.
    pub nullable: bool,
    /// `Kind::Text` for `utf8` columns.
    pub text: bool,
}

/// Shapes up to rank 3, fixed dims below 5.
#[derive(Arbitrary, Clone, Copy, Debug)]
#[allow(missing_docs)]
pub enum ArbShape {
    Scalar,
    Fixed(u8),
    Fixed2(u8, u8),
    Ragged,
    RaggedFixed(u8),
    FixedRagged(u8),
    Ragged2,
    Fixed3(u8, u8, u8),
}

/// Page compression.
#[derive(Arbitrary, Clone, Copy, Debug)]
#[allow(missing_docs)]
pub enum ArbCompression {
    None,
    Lz4,
    /// Level from {1, 3, 9, 19}.
    Zstd(u8),
}

/// One cell: null flag, ragged sizes (modulo 5), value bytes (cycled to the row's size).
#[derive(Arbitrary, Clone, Debug, Default)]
pub struct ArbCell {
    /// Null (for nullable columns).
    pub null: bool,
    /// Ragged sizes; for `utf8`/`bytes` the first is the length (modulo 17).
    pub sizes: [u8; 2],
    /// Element bytes.
    pub bytes: Vec<u8>,
}

#[allow(clippy::many_single_char_names)]
fn column(i: usize, c: &ArbColumn) -> Column {
    let dtype = DType::ALL[usize::from(c.dtype) % DType::ALL.len()];
    let f = |x: u8| Dim::Fixed(u64::from(x % DIM));
    let shape: Vec<Dim> = if dtype.is_variable() {
        Vec::new()
    } else {
        match c.shape {
            ArbShape::Scalar => vec![],
            ArbShape::Fixed(a) => vec![f(a)],
            ArbShape::Fixed2(a, b) => vec![f(a), f(b)],
            ArbShape::Ragged => vec![Dim::Ragged],
            ArbShape::RaggedFixed(a) => vec![Dim::Ragged, f(a)],
            ArbShape::FixedRagged(a) => vec![f(a), Dim::Ragged],
            ArbShape::Ragged2 => vec![Dim::Ragged, Dim::Ragged],
            ArbShape::Fixed3(a, b, d) => vec![f(a), f(b), f(d)],
        }
    };
    let compression = match c.compression {
        ArbCompression::None => Compression::None,
        ArbCompression::Lz4 => Compression::Lz4,
        ArbCompression::Zstd(l) => Compression::Zstd { level: [1, 3, 9, 19][usize::from(l % 4)] },
    };
    let mut col = Column::new(format!("c{i}"), dtype, &shape).with_compression(compression);
    if dtype == DType::Utf8 && c.text {
        col = col.with_kind(Kind::Text);
    }
    if c.nullable { col.nullable() } else { col }
}

/// Appends one generated row of `col` to `data`.
fn push_cell(data: &mut ColumnData, col: &Column, cell: &ArbCell) {
    if col.nullable && cell.null {
        data.push_null().expect("nullable column takes nulls");
        return;
    }
    let mut sizes = cell.sizes.iter().map(|s| u64::from(s % DIM));
    let (shape, bytes) = if col.dtype.is_variable() {
        let len = usize::from(cell.sizes[0] % 17).min(cell.bytes.len());
        let raw = &cell.bytes[..len];
        let bytes = if col.dtype == DType::Utf8 {
            String::from_utf8_lossy(raw).into_owned().into_bytes()
        } else {
            raw.to_vec()
        };
        (vec![bytes.len() as u64], bytes)
    } else {
        let shape: Vec<u64> = col
            .shape
            .iter()
            .map(|d| match d {
                Dim::Fixed(x) => *x,
                Dim::Ragged => sizes.next().unwrap_or(0),
            })
            .collect();
        let n = shape.iter().product::<u64>() as usize * col.dtype.item_size();
        let mut bytes: Vec<u8> =
            if cell.bytes.is_empty() { vec![0; n] } else { cell.bytes.iter().copied().cycle().take(n).collect() };
        if col.dtype == DType::Bool {
            for b in &mut bytes {
                *b &= 1;
            }
        }
        (shape, bytes)
    };
    data.push_row(&shape, &bytes).expect("generated row fits its column");
}

/// What one row must read back as.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Row {
    valid: bool,
    shape: Vec<u64>,
    bytes: Vec<u8>,
}

fn rows_of(data: &ColumnData) -> Vec<Row> {
    (0..data.len())
        .map(|i| Row { valid: data.is_valid(i), shape: data.row_shape(i), bytes: data.row(i).to_vec() })
        .collect()
}

/// Reads `range` of every column (or of the last one) and compares with the model.
fn check_read(
    ds: &Dataset,
    schema: &Schema,
    model: &[Vec<Row>],
    range: std::ops::Range<u64>,
    last_only: bool,
    ctx: &str,
) {
    let names: Vec<&str> = schema.columns.iter().map(|c| c.name.as_str()).collect();
    let proj: Option<&[&str]> = if last_only { Some(&names[names.len() - 1..]) } else { None };
    let batch = ds.read_rows(range.clone(), proj).unwrap_or_else(|e| panic!("{ctx}: read_rows {range:?}: {e}"));
    let first = if last_only { names.len() - 1 } else { 0 };
    for (i, col) in schema.columns.iter().enumerate().skip(first) {
        let got = batch.get(&col.name).unwrap_or_else(|| panic!("{ctx}: column {} missing", col.name));
        assert_eq!(got.len() as u64, range.end - range.start, "{ctx}: column {} row count", col.name);
        let got = rows_of(got);
        let want = &model[i][range.start as usize..range.end as usize];
        for (r, (g, w)) in got.iter().zip(want).enumerate() {
            assert_eq!(
                g,
                w,
                "{ctx}: column {} ({:?} {:?}) row {}",
                col.name,
                col.dtype,
                col.shape,
                range.start as usize + r
            );
        }
    }
}

/// Every way of reading a version that must agree with the model.
fn check_version(ds: &Dataset, schema: &Schema, model: &[Vec<Row>], ctx: &str) {
    let n = model[0].len() as u64;
    assert_eq!(ds.row_count(), n, "{ctx}: row count");
    check_read(ds, schema, model, 0..n, false, ctx);
    if n > 2 {
        check_read(ds, schema, model, 1..n - 1, false, ctx);
        check_read(ds, schema, model, n / 2..n, true, ctx);
    }
    let report = ds.verify().unwrap_or_else(|e| panic!("{ctx}: verify: {e}"));
    assert_eq!(report.rows, n, "{ctx}: verified rows");
}

/// Target: write an [`ArbitraryDataset`] with the reference writer and read it back.
///
/// # Panics
/// When any version reads back differently from what was written, or when the writer or
/// reader fails on valid input (both are findings).
pub fn roundtrip(input: &ArbitraryDataset) {
    if input.columns.is_empty() {
        return;
    }
    let cols: Vec<Column> = input.columns.iter().take(MAX_COLUMNS).enumerate().map(|(i, c)| column(i, c)).collect();
    let schema = Schema::new(cols).expect("generated schema is valid");
    let rows = usize::from(input.rows) % (MAX_ROWS + 1);
    let default = ArbCell::default();
    let cell = |r: usize, c: usize| {
        if input.cells.is_empty() { &default } else { &input.cells[(r * schema.columns.len() + c) % input.cells.len()] }
    };
    // The rows, cut into batches.
    let n_batches = usize::from(input.batches) % MAX_BATCHES + 1;
    let mut batches = Vec::new();
    let mut model: Vec<Vec<Row>> = vec![Vec::new(); schema.columns.len()];
    for b in 0..n_batches {
        let (lo, hi) = (rows * b / n_batches, rows * (b + 1) / n_batches);
        let mut batch = Batch::new();
        for (c, col) in schema.columns.iter().enumerate() {
            let mut data = ColumnData::for_column(col);
            for r in lo..hi {
                push_cell(&mut data, col, cell(r, c));
            }
            model[c].extend(rows_of(&data));
            batch.push(col.name.clone(), data).expect("batch column");
        }
        batches.push(batch);
    }
    let options = WriteOptions {
        target_file_bytes: u64::from(input.target_file_bytes) % 4096 + 1,
        page_bytes: u64::from(input.page_bytes) + 1,
        column_groups: if input.split_groups && schema.columns.len() > 1 {
            vec![vec!["c0".into()]]
        } else {
            Vec::new()
        },
        timestamp_ms: Some(1_700_000_000_000),
        writer_id: Some([0x5a; 16]),
        limits: limits(),
        index: tessera::IndexLayout::Log,
    };
    let store = crate::known_bugs::memory_store();
    let mut ds = Dataset::create_in(&store, schema.clone(), &options).expect("create");
    if input.batches.is_multiple_of(2) {
        for (i, b) in batches.iter().enumerate() {
            ds = ds.append(b, &format!("batch {i}"), options.clone()).expect("append");
        }
    } else {
        let mut w = ds.writer(options.clone());
        for b in &batches {
            w.append(b).expect("writer append");
        }
        ds = w.commit("all batches").expect("commit");
    }
    let written = ds.version();
    check_version(&ds, &schema, &model, "after append");
    let reopened = Dataset::open_at(&store, &At::Latest, limits()).expect("reopen");
    check_version(&reopened, &schema, &model, "reopened");

    // Deletes, then compaction; the appended version stays readable as it was.
    let mut current = model.clone();
    if rows > 0 && !input.deletes.is_empty() {
        let mut del: Vec<u64> = input.deletes.iter().take(MAX_DELETES).map(|&d| u64::from(d) % rows as u64).collect();
        del.sort_unstable();
        del.dedup();
        ds = ds.delete_rows(&del, "delete", &options).expect("delete_rows");
        for col in &mut current {
            let mut i = 0u64;
            col.retain(|_| {
                let keep = del.binary_search(&i).is_err();
                i += 1;
                keep
            });
        }
        check_version(&ds, &schema, &current, "after delete");
    }
    if let Some(t) = input.compact {
        ds = ds.compact(u64::from(t % 64) + 1, "compact", &options).expect("compact");
        check_version(&ds, &schema, &current, "after compact");
    }
    let old = ds.checkout(&At::Version(written)).expect("time travel");
    check_version(&old, &schema, &model, "time travel");
}
