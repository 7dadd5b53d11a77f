//! Property tests: a query's answer equals a brute-force evaluation over the reference
//! reader's rows, for random schemas (dtypes, nullability), data (NaN, -0.0, nulls, ties),
//! fragments, deletions and predicates, with pruning and late materialization on and off;
//! `ORDER BY distance LIMIT k` equals a full sort of the same distances, ties by `_rowid`.

use std::cmp::Ordering;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, UInt64Type};
use proptest::prelude::*;
use tessera::{Batch, Column, ColumnData, DType, Dataset, Dim, WriteOptions};
use tessera_query::{QueryEngine, ScanOptions};
use tessera_testkit::XorShift;

const INTS: [DType; 5] = [DType::I8, DType::I32, DType::I64, DType::U16, DType::U64];
const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::Bf16];
/// Float values, all exact in f16 and bf16, with the awkward ones.
const FLOAT_VALUES: [f64; 7] = [-1.5, -0.0, 0.0, 0.5, 2.0, 3.0, f64::NAN];
const STRINGS: [&str; 3] = ["a", "b", "c"];

/// The random dataset's shape.
#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    int: DType,
    float: DType,
    nullable: [bool; 3],
    fragments: usize,
    delete: bool,
}

/// A row as the brute force sees it (numbers widened to f64).
#[derive(Clone, Debug)]
struct Row {
    id: u64,
    x: Option<f64>,
    y: Option<f64>,
    s: Option<String>,
    v: [f64; 3],
}

fn schema(case: &Case) -> tessera::Schema {
    let col = |c: Column, n: bool| if n { c.nullable() } else { c };
    tessera::Schema::new([
        col(Column::new("x", case.int, &[]), case.nullable[0]),
        col(Column::new("y", case.float, &[]), case.nullable[1]),
        col(Column::new("s", DType::Utf8, &[]), case.nullable[2]),
        Column::new("v", DType::F32, &[Dim::Fixed(3)]),
    ])
    .unwrap()
}

/// Bytes of one element of `dtype` holding `v`.
fn le(dtype: DType, v: f64) -> Vec<u8> {
    match dtype {
        DType::I8 => (v as i8).to_le_bytes().to_vec(),
        DType::I32 => (v as i32).to_le_bytes().to_vec(),
        DType::I64 => (v as i64).to_le_bytes().to_vec(),
        DType::U16 => (v as u16).to_le_bytes().to_vec(),
        DType::U64 => (v as u64).to_le_bytes().to_vec(),
        DType::F16 => half::f16::from_f64(v).to_le_bytes().to_vec(),
        DType::Bf16 => half::bf16::from_f64(v).to_le_bytes().to_vec(),
        DType::F32 => (v as f32).to_le_bytes().to_vec(),
        DType::F64 => v.to_le_bytes().to_vec(),
        other => panic!("no test values for {other}"),
    }
}

/// One element of `dtype` back as f64.
fn value(dtype: DType, b: &[u8]) -> f64 {
    match dtype {
        DType::I8 => f64::from(b[0].cast_signed()),
        DType::I32 => f64::from(i32::from_le_bytes(b.try_into().unwrap())),
        DType::I64 => i64::from_le_bytes(b.try_into().unwrap()) as f64,
        DType::U16 => f64::from(u16::from_le_bytes(b.try_into().unwrap())),
        DType::U64 => u64::from_le_bytes(b.try_into().unwrap()) as f64,
        DType::F16 => half::f16::from_le_bytes(b.try_into().unwrap()).to_f64(),
        DType::Bf16 => half::bf16::from_le_bytes(b.try_into().unwrap()).to_f64(),
        DType::F32 => f64::from(f32::from_le_bytes(b.try_into().unwrap())),
        DType::F64 => f64::from_le_bytes(b.try_into().unwrap()),
        other => panic!("no test values for {other}"),
    }
}

/// Writes the case's dataset: fragment `f` holds x near `3 f` and y from a window of
/// `FLOAT_VALUES` starting at `f` (so that ranges prune), strings and small-integer vectors (many ties); then deletes rows.
fn build(case: &Case, dir: &std::path::Path) -> Dataset {
    let mut rng = XorShift::new(case.seed);
    let signed = matches!(case.int, DType::I8 | DType::I32 | DType::I64);
    let mut ds = Dataset::create(dir.to_str().unwrap(), schema(case), &WriteOptions::default()).unwrap();
    for f in 0..case.fragments {
        let rows = 1 + rng.below(12) as usize;
        let mut x = ColumnData::empty(case.int, &[], case.nullable[0]);
        let mut y = ColumnData::empty(case.float, &[], case.nullable[1]);
        let mut s = ColumnData::empty(DType::Utf8, &[], case.nullable[2]);
        let mut v = Vec::new();
        for _ in 0..rows {
            let xv = (3 * f) as f64 + rng.below(4) as f64 - if signed { 6.0 } else { 0.0 };
            if case.nullable[0] && rng.chance(0.15) {
                x.push_null().unwrap();
            } else {
                x.push_row(&[], &le(case.int, xv)).unwrap();
            }
            if case.nullable[1] && rng.chance(0.15) {
                y.push_null().unwrap();
            } else {
                let yv = FLOAT_VALUES[(f + rng.below(3) as usize) % FLOAT_VALUES.len()];
                y.push_row(&[], &le(case.float, yv)).unwrap();
            }
            if case.nullable[2] && rng.chance(0.15) {
                s.push_null().unwrap();
            } else {
                let sv = STRINGS[rng.below(3) as usize];
                s.push_row(&[sv.len() as u64], sv.as_bytes()).unwrap();
            }
            v.extend((0..3).map(|_| rng.below(3) as f32));
        }
        let batch = Batch::new()
            .with("x", x)
            .unwrap()
            .with("y", y)
            .unwrap()
            .with("s", s)
            .unwrap()
            .with("v", ColumnData::from_fixed(&[3], &v).unwrap())
            .unwrap();
        ds = ds.append(&batch, "rows", WriteOptions::default()).unwrap();
    }
    if case.delete {
        let doomed: Vec<u64> = (0..ds.row_count()).filter(|_| rng.chance(0.25)).collect();
        if !doomed.is_empty() && doomed.len() as u64 != ds.row_count() {
            ds = ds.delete_rows(&doomed, "delete", &WriteOptions::default()).unwrap();
        }
    }
    ds
}

/// Every live row through the reference reader.
fn brute_rows(ds: &Dataset) -> Vec<Row> {
    let all = ds.read_rows(0..ds.row_count(), None).unwrap();
    let col = |name: &str| all.get(name).unwrap();
    let (x, y, s, v) = (col("x"), col("y"), col("s"), col("v"));
    (0..all.num_rows())
        .map(|i| Row {
            id: i as u64,
            x: x.is_valid(i).then(|| value(x.dtype(), x.row(i))),
            y: y.is_valid(i).then(|| value(y.dtype(), y.row(i))),
            s: s.is_valid(i).then(|| s.str_row(i).unwrap().to_owned()),
            v: std::array::from_fn(|k| f64::from(f32::from_le_bytes(v.row(i)[4 * k..4 * k + 4].try_into().unwrap()))),
        })
        .collect()
}

/// A predicate with SQL's three-valued logic.
#[derive(Clone, Debug)]
enum Pred {
    Cmp(&'static str, &'static str, f64),
    Between(f64, f64),
    IsNull(&'static str, bool),
    Str(bool, &'static str),
    RowIdBelow(u64),
    And(Box<Pred>, Box<Pred>),
    Or(Box<Pred>, Box<Pred>),
    Not(Box<Pred>),
}

const OPS: [&str; 6] = ["=", "<>", "<", "<=", ">", ">="];

fn lit(v: f64) -> String {
    if v.fract() == 0.0 { format!("{}", v as i64) } else { format!("{v}") }
}

impl Pred {
    fn sql(&self) -> String {
        match self {
            Self::Cmp(c, op, v) => format!("{c} {op} {}", lit(*v)),
            Self::Between(a, b) => format!("x BETWEEN {} AND {}", lit(*a), lit(*b)),
            Self::IsNull(c, true) => format!("{c} IS NULL"),
            Self::IsNull(c, false) => format!("{c} IS NOT NULL"),
            Self::Str(eq, v) => format!("s {} '{v}'", if *eq { "=" } else { "<>" }),
            Self::RowIdBelow(n) => format!("_rowid < {n}"),
            Self::And(a, b) => format!("({} AND {})", a.sql(), b.sql()),
            Self::Or(a, b) => format!("({} OR {})", a.sql(), b.sql()),
            Self::Not(a) => format!("(NOT {})", a.sql()),
        }
    }

    /// Arrow's comparisons order floats totally: NaN above all, -0.0 below 0.0.
    fn eval(&self, r: &Row) -> Option<bool> {
        let cmp = |a: f64, op: &str, b: f64| {
            let o = a.total_cmp(&b);
            match op {
                "=" => o == Ordering::Equal,
                "<>" => o != Ordering::Equal,
                "<" => o == Ordering::Less,
                "<=" => o != Ordering::Greater,
                ">" => o == Ordering::Greater,
                _ => o != Ordering::Less,
            }
        };
        match self {
            Self::Cmp(c, op, v) => (if *c == "x" { r.x } else { r.y }).map(|a| cmp(a, op, *v)),
            Self::Between(a, b) => r.x.map(|x| cmp(x, ">=", *a) && cmp(x, "<=", *b)),
            Self::IsNull(c, null) => Some(if *c == "x" { r.x.is_none() } else { r.y.is_none() } == *null),
            Self::Str(eq, v) => r.s.as_ref().map(|s| (s == v) == *eq),
            Self::RowIdBelow(n) => Some(r.id < *n),
            Self::And(a, b) => match (a.eval(r), b.eval(r)) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            },
            Self::Or(a, b) => match (a.eval(r), b.eval(r)) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
            Self::Not(a) => a.eval(r).map(|b| !b),
        }
    }
}

fn atom() -> impl Strategy<Value = Pred> {
    let op = prop::sample::select(OPS.to_vec());
    prop_oneof![
        (op.clone(), -7i64..20).prop_map(|(op, v)| Pred::Cmp("x", op, v as f64)),
        (op, prop::sample::select(vec![-2.0, -1.5, 0.0, 0.5, 1.0, 2.0, 3.0])).prop_map(|(op, v)| Pred::Cmp("y", op, v)),
        (-7i64..20, 0i64..6).prop_map(|(a, w)| Pred::Between(a as f64, (a + w) as f64)),
        (prop::sample::select(vec!["x", "y"]), any::<bool>()).prop_map(|(c, n)| Pred::IsNull(c, n)),
        (any::<bool>(), prop::sample::select(STRINGS.to_vec())).prop_map(|(eq, v)| Pred::Str(eq, v)),
        (0u64..60).prop_map(Pred::RowIdBelow),
    ]
}

fn pred() -> impl Strategy<Value = Pred> {
    atom().prop_recursive(2, 4, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Pred::And(Box::new(a), Box::new(b))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Pred::Or(Box::new(a), Box::new(b))),
            inner.prop_map(|a| Pred::Not(Box::new(a))),
        ]
    })
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<u64>(),
        prop::sample::select(INTS.to_vec()),
        prop::sample::select(FLOATS.to_vec()),
        any::<[bool; 3]>(),
        1usize..6,
        any::<bool>(),
    )
        .prop_map(|(seed, int, float, nullable, fragments, delete)| Case {
            seed,
            int,
            float,
            nullable,
            fragments,
            delete,
        })
}

fn f64s(b: &RecordBatch, i: usize) -> Vec<Option<f64>> {
    let a = cast(b.column(i), &DataType::Float64).unwrap();
    a.as_primitive::<Float64Type>().iter().collect()
}

fn same(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.total_cmp(&b) == Ordering::Equal,
        (None, None) => true,
        _ => false,
    }
}

const OPTIONS: [(bool, bool); 4] = [(true, true), (true, false), (false, true), (false, false)];

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn filters_match_brute_force(case in case(), p in pred()) {
        let dir = tempfile::tempdir().unwrap();
        let ds = build(&case, dir.path());
        let rows = brute_rows(&ds);
        let expected: Vec<&Row> = rows.iter().filter(|r| p.eval(r) == Some(true)).collect();
        let sql = format!("SELECT _rowid, x, y, s FROM ds WHERE {} ORDER BY _rowid", p.sql());
        for (prune, late) in OPTIONS {
            let q = QueryEngine::with_options(ds.clone(), ScanOptions { prune, late_materialize: late, partitions: 2, ..ScanOptions::default() }).unwrap();
            let answer = q.sql(&sql).unwrap();
            let b = datafusion::arrow::compute::concat_batches(&answer.schema, &answer.batches).unwrap();
            let ids: Vec<u64> = b.column(0).as_primitive::<UInt64Type>().values().to_vec();
            let want: Vec<u64> = expected.iter().map(|r| r.id).collect();
            prop_assert_eq!(&ids, &want, "{} prune={} late={}", sql, prune, late);
            let (xs, ys) = (f64s(&b, 1), f64s(&b, 2));
            let ss = b.column(3).as_string_view();
            for (k, r) in expected.iter().enumerate() {
                prop_assert!(same(xs[k], r.x) && same(ys[k], r.y), "row {}: {:?} {:?} vs {:?}", r.id, xs[k], ys[k], r);
                prop_assert_eq!(ss.is_valid(k).then(|| ss.value(k).to_owned()), r.s.clone());
            }
        }
    }

    #[test]
    fn top_k_equals_a_full_sort_with_ties_by_row_id(
        case in case(), p in pred(), q in any::<[u8; 3]>(), k in 1usize..12, metric in 0usize..3,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let ds = build(&case, dir.path());
        let rows = brute_rows(&ds);
        let qv: Vec<f64> = q.iter().map(|&x| f64::from(x % 3)).collect();
        let (f, desc) = [("cosine_distance", false), ("l2_distance", false), ("inner_product", true)][metric];
        let d = format!("{f}(v, [{}, {}, {}])", qv[0], qv[1], qv[2]);
        let engine = QueryEngine::with_options(ds, ScanOptions { partitions: 2, ..ScanOptions::default() }).unwrap();
        let all = engine.sql(&format!("SELECT _rowid, {d} AS d FROM ds WHERE {}", p.sql())).unwrap();
        let mut full: Vec<(u64, f64)> = Vec::new();
        for b in &all.batches {
            let ids = b.column(0).as_primitive::<UInt64Type>();
            let ds = b.column(1).as_primitive::<Float64Type>();
            full.extend(ids.values().iter().copied().zip(ds.values().iter().copied()));
        }
        // The kernel agrees with a plain f64 evaluation.
        for &(id, dist) in &full {
            let v = rows[id as usize].v;
            let dot: f64 = v.iter().zip(&qv).map(|(a, b)| a * b).sum();
            let (na, nb) = (v.iter().map(|a| a * a).sum::<f64>().sqrt(), qv.iter().map(|a| a * a).sum::<f64>().sqrt());
            let want = match metric {
                0 if na > 0.0 && nb > 0.0 => 1.0 - dot / (na * nb),
                0 => continue,
                1 => v.iter().zip(&qv).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt(),
                _ => dot,
            };
            prop_assert!((dist - want).abs() < 1e-2, "{} of row {}: {} vs {}", f, id, dist, want);
        }
        full.sort_by(|a, b| {
            let o = a.1.total_cmp(&b.1);
            (if desc { o.reverse() } else { o }).then(a.0.cmp(&b.0))
        });
        let want: Vec<u64> = full.iter().take(k).map(|r| r.0).collect();
        let order = if desc { "DESC" } else { "ASC" };
        let sql = format!("SELECT _rowid FROM ds WHERE {} ORDER BY {d} {order} LIMIT {k}", p.sql());
        let got: Vec<u64> = engine
            .sql(&sql)
            .unwrap()
            .batches
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<UInt64Type>().values().to_vec())
            .collect();
        prop_assert_eq!(got, want, "{}", sql);
    }
}
