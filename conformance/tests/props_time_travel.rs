//! Property: time travel returns each earlier state. A random sequence of appends, deletes,
//! updates, column additions, drops and renames, and compactions runs against the reference
//! writer while a model (the live rows of every column, and the schema with its column ids)
//! records what each version must hold. Afterwards every version, read by number, must dump
//! exactly its recorded state (computed from the model, `logical::dump_of`).
//!
//! 24 cases by default with a fixed seed; `PROPTEST_CASES` runs more.

mod common;

use common::{Rng, random_value};
use proptest::prelude::*;
use serde_json::Value;
use tessera::{Batch, Column, ColumnData, Dataset, Schema, WriteOptions};
use tessera_conformance::case::Args;
use tessera_conformance::compare;
use tessera_conformance::logical::{Row, dump_of};
use tessera_conformance::reference_impl::{self, Outcome};

/// One step of the history.
#[derive(Clone, Debug)]
enum Op {
    /// Append this many rows.
    Append(usize),
    /// Delete rows picked by these indices (into the live rows).
    Delete(Vec<prop::sample::Index>),
    /// Update one column (index) of some rows.
    Update(prop::sample::Index, Vec<prop::sample::Index>),
    /// Add a column built from the spec, with values (or all null if nullable and `false`).
    Add(common::ColumnSpec, bool),
    /// Drop a column (when more than one is left).
    Drop(prop::sample::Index),
    /// Rename a column.
    Rename(prop::sample::Index),
    /// Compact with this target row count.
    Compact(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let idx = || any::<prop::sample::Index>();
    prop_oneof![
        4 => (1usize..6).prop_map(Op::Append),
        3 => prop::collection::vec(idx(), 1..4).prop_map(Op::Delete),
        2 => (idx(), prop::collection::vec(idx(), 1..3)).prop_map(|(c, r)| Op::Update(c, r)),
        2 => (common::column_spec(), any::<bool>()).prop_map(|(s, v)| Op::Add(s, v)),
        1 => idx().prop_map(Op::Drop),
        1 => idx().prop_map(Op::Rename),
        1 => (1u64..8).prop_map(Op::Compact),
    ]
}

/// The model: schema (with the ids the writer must assign) and the live rows per column.
struct Model {
    schema: Schema,
    next_column_id: u32,
    rows: Vec<Vec<Option<Row>>>,
}

impl Model {
    fn dump(&self, version: u64) -> Value {
        dump_of("main", version, &self.schema, &self.rows)
    }

    fn len(&self) -> usize {
        self.rows.first().map_or(0, Vec::len)
    }
}

fn data(c: &Column, rows: &[Option<Row>]) -> ColumnData {
    let mut d = ColumnData::for_column(c);
    for r in rows {
        match r {
            Some(r) => d.push_row(&r.shape, &r.bytes).expect("row fits"),
            None => d.push_null().expect("nullable"),
        }
    }
    d
}

fn opts(n: &mut u8) -> WriteOptions {
    *n = n.wrapping_add(1);
    let mut id = *b"tessera-history\0";
    id[15] = *n;
    WriteOptions {
        page_bytes: 48,
        target_file_bytes: 96,
        timestamp_ms: Some(1_000 + u64::from(*n)),
        writer_id: Some(id),
        ..WriteOptions::default()
    }
}

/// Applies one step to the dataset and the model; `None` when the step changes nothing.
fn apply(ds: &Dataset, model: &mut Model, op: &Op, rng: &mut Rng, seq: &mut u8) -> Result<Option<Dataset>, String> {
    let msg = |err: tessera::Error| err.to_string();
    match op {
        Op::Append(k) => {
            let mut batch = Batch::new();
            for (i, c) in model.schema.columns.iter().enumerate() {
                let new: Vec<Option<Row>> = (0..*k).map(|_| random_value(rng, c, 3)).collect();
                batch.push(c.name.clone(), data(c, &new)).map_err(msg)?;
                model.rows[i].extend(new);
            }
            ds.append(&batch, "append", opts(seq)).map(Some).map_err(msg)
        }
        Op::Delete(picks) if model.len() > 0 => {
            let mut rows: Vec<u64> = picks.iter().map(|p| p.index(model.len()) as u64).collect();
            rows.sort_unstable();
            rows.dedup();
            for col in &mut model.rows {
                for r in rows.iter().rev() {
                    col.remove(*r as usize);
                }
            }
            ds.delete_rows(&rows, "delete", &opts(seq)).map(Some).map_err(msg)
        }
        Op::Update(c, picks) if model.len() > 0 => {
            let ci = c.index(model.schema.columns.len());
            let col = model.schema.columns[ci].clone();
            let mut rows: Vec<u64> = picks.iter().map(|p| p.index(model.len()) as u64).collect();
            rows.sort_unstable();
            rows.dedup();
            let new: Vec<Option<Row>> = rows.iter().map(|_| random_value(rng, &col, 3)).collect();
            for (r, v) in rows.iter().zip(&new) {
                model.rows[ci][*r as usize].clone_from(v);
            }
            let mut batch = Batch::new();
            batch.push(col.name.clone(), data(&col, &new)).map_err(msg)?;
            ds.update_rows(&rows, &batch, "update", &opts(seq)).map(Some).map_err(msg)
        }
        Op::Add(spec, with_values) => {
            let mut c = common::column(model.next_column_id as usize, spec);
            c.id = model.next_column_id;
            let values: Option<Vec<Option<Row>>> =
                (*with_values || !c.nullable).then(|| (0..model.len()).map(|_| random_value(rng, &c, 3)).collect());
            let d = values.as_ref().map(|v| data(&c, v));
            let out = ds.add_column(c.clone(), d.as_ref(), "add column", &opts(seq)).map_err(msg)?;
            model.rows.push(values.unwrap_or_else(|| vec![None; model.len()]));
            model.schema.columns.push(c);
            model.next_column_id += 1;
            Ok(Some(out))
        }
        Op::Drop(c) if model.schema.columns.len() > 1 => {
            let ci = c.index(model.schema.columns.len());
            let name = model.schema.columns.remove(ci).name;
            model.rows.remove(ci);
            ds.drop_column(&name, "drop column", &opts(seq)).map(Some).map_err(msg)
        }
        Op::Rename(c) => {
            let ci = c.index(model.schema.columns.len());
            let from = model.schema.columns[ci].name.clone();
            let to = format!("{from}_r");
            if model.schema.column(&to).is_some() {
                return Ok(None);
            }
            model.schema.columns[ci].name.clone_from(&to);
            ds.rename_column(&from, &to, "rename column", &opts(seq)).map(Some).map_err(msg)
        }
        Op::Compact(target) => {
            let out = ds.compact(*target, "compact", &opts(seq)).map_err(msg)?;
            Ok((out.version() != ds.version()).then_some(out))
        }
        _ => Ok(None),
    }
}

proptest! {
    #![proptest_config(common::config(24, 0x71AE_7AE1))]

    #[test]
    fn every_version_reads_back_its_recorded_state(
        specs in prop::collection::vec(common::column_spec(), 1..=3),
        ops in prop::collection::vec(op(), 1..10),
        seed in any::<u64>(),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let schema = Schema::new(specs.iter().enumerate().map(|(i, s)| common::column(i, s))).unwrap();
        let mut n = 0u8;
        let mut ds = Dataset::create(tmp.path().to_str().unwrap(), schema.clone(), &opts(&mut n))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let next_column_id = schema.columns.len() as u32;
        let mut model = Model { rows: vec![Vec::new(); schema.columns.len()], schema, next_column_id };
        let mut rng = Rng(seed);
        let mut recorded = vec![(1u64, model.dump(1))];
        for op in &ops {
            match apply(&ds, &mut model, op, &mut rng, &mut n) {
                Ok(Some(next)) => {
                    prop_assert_eq!(next.version(), ds.version() + 1, "{:?} did not make the next version", op);
                    ds = next;
                    recorded.push((ds.version(), model.dump(ds.version())));
                }
                Ok(None) => {}
                Err(e) => prop_assert!(false, "{:?} failed: {}", op, e),
            }
        }
        for (v, want) in &recorded {
            let args = Args { version: Some(*v), ..Args::default() };
            match reference_impl::read(tmp.path(), Some(&args)) {
                Outcome::Accepted(got) => {
                    let d = compare::diff(want, &got);
                    prop_assert!(d.is_empty(), "main@{v} after {ops:?}:\n{}", compare::render(&d, 10));
                }
                other => prop_assert!(false, "main@{v}: {}", other.summary()),
            }
            let verified = reference_impl::verify(tmp.path(), Some(&args));
            prop_assert!(verified.is_ok(), "main@{v}: {:?}", verified);
        }
    }
}
