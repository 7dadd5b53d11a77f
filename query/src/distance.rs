//! Vector functions: `cosine_distance(a, b)`, `l2_distance(a, b)`, `inner_product(a, b)`.
//!
//! Arguments are vectors: fixed-size or variable lists of `Float32`, `Float16` or `Float64`
//! (an f32/f16/bf16 embedding column; bf16 arrives widened to f32, see [`crate::convert`]);
//! integer vectors (images, token ids) are converted to f32 first,
//! or a literal such as `[0.1, -2, 3.5]`, which [`ArrayLiteralPlanner`] makes a constant.
//! The kernels are the reference's ([`tessera::distance`], SPEC.md §23): the same bits on
//! every CPU, so a ranking, its ties and a view saved from it do not depend on the machine.
//! Each row's distance is an `f64`; f16 and bf16 elements widen to f32 exactly first.
//!
//! - `cosine_distance` = 1 − cos(a, b), in [0, 2]; nearest first is `ORDER BY … ASC`.
//! - `l2_distance` = Euclidean distance ‖a − b‖.
//! - `inner_product` = a · b (a similarity: nearest first is `ORDER BY … DESC`).
//!
//! A null vector gives a null distance; vectors of different lengths are an error.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, FixedSizeListArray, Float64Array, GenericListArray, OffsetSizeTrait,
};
use datafusion::arrow::datatypes::{DataType, Float16Type, Float32Type, Float64Type};
use datafusion::common::{DFSchema, Result as DfResult, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use half::slice::HalfFloatSliceExt as _;
use tessera::distance::{Distance, distance_f32, distance_f64, query_f32};

/// Which distance a [`VectorFunction`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Metric {
    /// 1 − cosine similarity.
    Cosine,
    /// Euclidean distance.
    L2,
    /// Dot product.
    InnerProduct,
}

impl Metric {
    /// The SQL function name.
    #[must_use]
    pub fn function_name(self) -> &'static str {
        match self {
            Self::Cosine => "cosine_distance",
            Self::L2 => "l2_distance",
            Self::InnerProduct => "inner_product",
        }
    }

    /// The reference's name for the function.
    #[must_use]
    pub fn distance(self) -> Distance {
        match self {
            Self::Cosine => Distance::Cosine,
            Self::L2 => Distance::L2,
            Self::InnerProduct => Distance::InnerProduct,
        }
    }

    pub(crate) fn f32(self, a: &[f32], b: &[f32]) -> Option<f64> {
        distance_f32(self.distance(), a, b)
    }

    pub(crate) fn f64(self, a: &[f64], b: &[f64]) -> Option<f64> {
        distance_f64(self.distance(), a, b)
    }
}

/// The three vector functions, ready to register.
#[must_use]
pub fn functions() -> Vec<ScalarUDF> {
    [Metric::Cosine, Metric::L2, Metric::InnerProduct]
        .into_iter()
        .map(|m| ScalarUDF::new_from_impl(VectorFunction::new(m)))
        .collect()
}

/// One distance function as a DataFusion scalar UDF.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct VectorFunction {
    metric: Metric,
    signature: Signature,
}

impl VectorFunction {
    /// The distance this function computes.
    #[must_use]
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// The function for `metric`.
    #[must_use]
    pub fn new(metric: Metric) -> Self {
        Self { metric, signature: Signature::any(2, Volatility::Immutable) }
    }
}

/// The element type of a vector argument's type, if it is one.
fn element(ty: &DataType) -> Option<&DataType> {
    match ty {
        DataType::FixedSizeList(f, _) | DataType::List(f) | DataType::LargeList(f) => Some(f.data_type()),
        _ => None,
    }
}

impl ScalarUDFImpl for VectorFunction {
    fn name(&self) -> &str {
        self.metric.function_name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        for ty in args {
            match element(ty) {
                Some(t) if t.is_floating() || t.is_integer() || t == &DataType::Null => {}
                _ => {
                    return plan_err!(
                        "{}: arguments must be float vectors (an f32/f16/bf16 column or [..]), got {ty}",
                        self.name()
                    );
                }
            }
        }
        Ok(DataType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let [a, b] = args.args.as_slice() else { return exec_err!("{} takes two vectors", self.name()) };
        let rows = args.number_rows;
        let (a, b) = (&as_float(a)?, &as_float(b)?);
        // One constant side (the query vector) is the common case: convert it once.
        let out = match (a, b) {
            (ColumnarValue::Array(col), ColumnarValue::Scalar(q))
            | (ColumnarValue::Scalar(q), ColumnarValue::Array(col)) => {
                let Some(q) = scalar_vector(q)? else { return Ok(ColumnarValue::Scalar(ScalarValue::Float64(None))) };
                against_constant(self.metric, col, &q)?
            }
            _ => {
                let a = a.to_array(rows)?;
                let b = b.to_array(rows)?;
                pairwise(self.metric, &a, &b)?
            }
        };
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// An integer vector (an image, a token list) as a `Float32` one; float vectors unchanged.
fn as_float(v: &ColumnarValue) -> DfResult<ColumnarValue> {
    let ty = v.data_type();
    let Some(item) = element(&ty).filter(|t| t.is_integer()) else { return Ok(v.clone()) };
    let f32_item = Arc::new(datafusion::arrow::datatypes::Field::new("item", DataType::Float32, true));
    let to = match &ty {
        DataType::FixedSizeList(_, n) => DataType::FixedSizeList(f32_item, *n),
        DataType::List(_) => DataType::List(f32_item),
        _ => DataType::LargeList(f32_item),
    };
    let _ = item;
    v.cast_to(&to, None)
}

/// A scalar vector's elements as f64, `None` when it is null.
pub(crate) fn scalar_vector(v: &ScalarValue) -> DfResult<Option<Vec<f64>>> {
    let array = v.to_array_of_size(1)?;
    if array.is_null(0) {
        return Ok(None);
    }
    rows_f64(&array).map(|mut rows| rows.pop().flatten())
}

/// Each row of a vector array as f64 (`None` for a null row).
fn rows_f64(array: &ArrayRef) -> DfResult<Vec<Option<Vec<f64>>>> {
    let values = |v: ArrayRef| -> DfResult<Vec<f64>> {
        let v = datafusion::arrow::compute::cast(&v, &DataType::Float64)?;
        Ok(v.as_primitive::<Float64Type>().values().to_vec())
    };
    (0..array.len())
        .map(|i| if array.is_null(i) { Ok(None) } else { row(array, i).and_then(values).map(Some) })
        .collect()
}

/// Row `i` of a list-like array as its values.
fn row(array: &ArrayRef, i: usize) -> DfResult<ArrayRef> {
    match array.data_type() {
        DataType::FixedSizeList(..) => Ok(array.as_fixed_size_list().value(i)),
        DataType::List(_) => Ok(array.as_list::<i32>().value(i)),
        DataType::LargeList(_) => Ok(array.as_list::<i64>().value(i)),
        other => exec_err!("not a vector: {other}"),
    }
}

/// The distance of every row of `col` to the constant `q`.
fn against_constant(metric: Metric, col: &ArrayRef, q: &[f64]) -> DfResult<Float64Array> {
    let name = metric.function_name();
    let check = |len: usize| {
        if len == q.len() { Ok(()) } else { exec_err!("{name}: vectors of {len} and {} elements", q.len()) }
    };
    match col.data_type() {
        DataType::FixedSizeList(f, n) => {
            let list = col.as_fixed_size_list();
            check(*n as usize)?;
            fixed(metric, list, f.data_type(), q)
        }
        DataType::List(_) => variable(metric, col.as_list::<i32>(), q, check),
        DataType::LargeList(_) => variable(metric, col.as_list::<i64>(), q, check),
        other => exec_err!("{name}: not a vector: {other}"),
    }
}

/// Fixed-size rows: slice the flat values directly, no per-row allocation.
fn fixed(metric: Metric, list: &FixedSizeListArray, ty: &DataType, q: &[f64]) -> DfResult<Float64Array> {
    let n = list.value_length() as usize;
    let values = list.values();
    let start = list.offset() * n;
    let distances: Vec<Option<f64>> = match ty {
        DataType::Float32 => {
            let qv = query_f32(q, false);
            let flat = &values.as_primitive::<Float32Type>().values()[start..start + list.len() * n];
            chunk_distances(list, flat, n, |r| metric.f32(r, &qv))
        }
        DataType::Float16 => {
            let qv = query_f32(q, true);
            let flat = &values.as_primitive::<Float16Type>().values()[start..start + list.len() * n];
            let mut scratch = vec![0f32; n];
            chunk_distances(list, flat, n, |r| {
                r.convert_to_f32_slice(&mut scratch);
                metric.f32(&scratch, &qv)
            })
        }
        DataType::Float64 => {
            let flat = &values.as_primitive::<Float64Type>().values()[start..start + list.len() * n];
            chunk_distances(list, flat, n, |r| metric.f64(r, q))
        }
        other => return exec_err!("{}: vectors of {other}", metric.function_name()),
    };
    Ok(Float64Array::from(distances))
}

/// Applies `f` to each row of `flat` (rows of `n` elements), null where the list is null.
fn chunk_distances<T>(
    list: &FixedSizeListArray,
    flat: &[T],
    n: usize,
    mut f: impl FnMut(&[T]) -> Option<f64>,
) -> Vec<Option<f64>> {
    if n == 0 {
        return (0..list.len()).map(|i| if list.is_valid(i) { f(&[]) } else { None }).collect();
    }
    flat.chunks_exact(n).enumerate().map(|(i, r)| if list.is_valid(i) { f(r) } else { None }).collect()
}

/// Variable-size rows: each row's length must equal the query's. `f64` rows stay `f64`; every
/// other element type converts to `f32` (exactly for f16 and bf16), the query with it.
fn variable<O: OffsetSizeTrait>(
    metric: Metric,
    list: &GenericListArray<O>,
    q: &[f64],
    check: impl Fn(usize) -> DfResult<()>,
) -> DfResult<Float64Array> {
    let wide = list.value_type() == DataType::Float64;
    let qv = query_f32(q, list.value_type() == DataType::Float16);
    let mut out = Vec::with_capacity(list.len());
    for i in 0..list.len() {
        if list.is_null(i) {
            out.push(None);
            continue;
        }
        let row = list.value(i);
        if wide {
            let v = row.as_primitive::<Float64Type>().values();
            check(v.len())?;
            out.push(metric.f64(v, q));
        } else {
            let v = datafusion::arrow::compute::cast(&row, &DataType::Float32)?;
            let v = v.as_primitive::<Float32Type>().values();
            check(v.len())?;
            out.push(metric.f32(v, &qv));
        }
    }
    Ok(Float64Array::from(out))
}

/// Two vector arrays row by row (neither side constant), in f64.
fn pairwise(metric: Metric, a: &ArrayRef, b: &ArrayRef) -> DfResult<Float64Array> {
    let (ra, rb) = (rows_f64(a)?, rows_f64(b)?);
    let mut out = Vec::with_capacity(ra.len());
    for (x, y) in ra.iter().zip(&rb) {
        out.push(match (x, y) {
            (Some(x), Some(y)) if x.len() != y.len() => {
                return exec_err!("{}: vectors of {} and {} elements", metric.function_name(), x.len(), y.len());
            }
            (Some(x), Some(y)) => metric.f64(x, y),
            _ => None,
        });
    }
    Ok(Float64Array::from(out))
}

/// Plans `[1, -2.5, 3]` with numeric literal elements as a constant `List<Float64>`, so that
/// a query vector needs no array-function library.
#[derive(Debug, Default)]
pub struct ArrayLiteralPlanner;

impl ExprPlanner for ArrayLiteralPlanner {
    fn plan_array_literal(&self, exprs: Vec<Expr>, _schema: &DFSchema) -> DfResult<PlannerResult<Vec<Expr>>> {
        let mut values = Vec::with_capacity(exprs.len());
        for e in &exprs {
            let (v, negate) = match e {
                Expr::Literal(v, _) => (v, false),
                Expr::Negative(inner) => match inner.as_ref() {
                    Expr::Literal(v, _) => (v, true),
                    _ => return Ok(PlannerResult::Original(exprs)),
                },
                _ => return Ok(PlannerResult::Original(exprs)),
            };
            let Ok(ScalarValue::Float64(Some(x))) = v.cast_to(&DataType::Float64) else {
                return Ok(PlannerResult::Original(exprs));
            };
            values.push(ScalarValue::Float64(Some(if negate { -x } else { x })));
        }
        let list = ScalarValue::new_list_nullable(&values, &DataType::Float64);
        Ok(PlannerResult::Planned(Expr::Literal(ScalarValue::List(list), None)))
    }
}
