//! Shared pieces of the property tests: the proptest configuration (fixed seed, case count
//! from `PROPTEST_CASES`), a tiny seeded generator for row data, and strategies for random
//! schemas and logical descriptions.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use tessera::{Column, Compression, DType, Dim, Schema};
use tessera_conformance::logical::{Commit, Logical, Row, TagSpec};

/// A fixed seed unless `PROPTEST_RNG_SEED` is set; `default_cases` unless `PROPTEST_CASES`
/// is set (run longer with e.g. `PROPTEST_CASES=2000`).
pub fn config(default_cases: u32, seed: u64) -> Config {
    let mut c = Config { failure_persistence: None, ..Config::default() };
    if std::env::var_os("PROPTEST_CASES").is_none() {
        c.cases = default_cases;
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        c.rng_seed = RngSeed::Fixed(seed);
    }
    c
}

/// `SplitMix64`: row data from a seed, so proptest shrinks the structure, not every byte.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

const CHARS: [&str; 8] = ["a", "Z", " ", "é", "日", "🙂", "\0", "\n"];

/// A random non-null row of a column (ragged dims and byte lengths in `0..=max_ragged`).
pub fn random_row(rng: &mut Rng, c: &Column, max_ragged: u64) -> Row {
    match c.dtype {
        DType::Utf8 => {
            let s: String = (0..rng.below(max_ragged + 1)).map(|_| CHARS[rng.below(8) as usize]).collect();
            Row { shape: vec![s.len() as u64], bytes: s.into_bytes() }
        }
        DType::Bytes => {
            let n = rng.below(max_ragged + 1) as usize;
            let b = rng.bytes(n);
            Row { shape: vec![b.len() as u64], bytes: b }
        }
        d => {
            let shape: Vec<u64> = c
                .shape
                .iter()
                .map(|dim| match dim {
                    Dim::Fixed(n) => *n,
                    Dim::Ragged => rng.below(max_ragged + 1),
                })
                .collect();
            let n: u64 = if shape.contains(&0) { 0 } else { shape.iter().product() };
            let bytes = if d == DType::Bool {
                (0..n).map(|_| (rng.next() & 1) as u8).collect()
            } else {
                rng.bytes(n as usize * d.item_size())
            };
            Row { shape, bytes }
        }
    }
}

/// A random row or, one time in four for a nullable column, null.
pub fn random_value(rng: &mut Rng, c: &Column, max_ragged: u64) -> Option<Row> {
    if c.nullable && rng.below(4) == 0 { None } else { Some(random_row(rng, c, max_ragged)) }
}

/// What a random column is made of: dtype index, dims (`None` = ragged), nullable, codec.
pub type ColumnSpec = (usize, Vec<Option<u64>>, bool, u8);

/// A strategy for one column: any dtype; for fixed-size dtypes rank 0 to 3 with fixed dims
/// 0 to 3 (zero dims included) or ragged dims; nullable or not; none, lz4 or zstd.
pub fn column_spec() -> impl Strategy<Value = ColumnSpec> {
    (0usize..15, prop::collection::vec(prop::option::weighted(0.7, 0u64..4), 0..=3), any::<bool>(), 0u8..4)
}

/// Builds a column from its spec (`utf8` and `bytes` get rank 0).
pub fn column(i: usize, spec: &ColumnSpec) -> Column {
    let dtype = DType::ALL[spec.0];
    let shape: Vec<Dim> = if dtype.is_variable() {
        Vec::new()
    } else {
        spec.1.iter().map(|d| d.map_or(Dim::Ragged, Dim::Fixed)).collect()
    };
    let compression = match spec.3 {
        0 => Compression::None,
        1 => Compression::Lz4,
        2 => Compression::Zstd { level: 1 },
        _ => Compression::Zstd { level: 5 },
    };
    let mut c = Column::new(format!("c{i}_{}", dtype.name()), dtype, &shape).with_compression(compression);
    if spec.2 {
        c = c.nullable();
    }
    c
}

/// A strategy for a logical description: 1 to 5 columns, 0 to 3 commits of 0 to 7 rows, and up
/// to two tags.
pub fn logical() -> impl Strategy<Value = Logical> {
    (
        prop::collection::vec(column_spec(), 1..=5),
        prop::collection::vec(0usize..8, 0..=3),
        any::<u64>(),
        prop::collection::vec(any::<prop::sample::Index>(), 0..=2),
    )
        .prop_map(|(specs, sizes, seed, tags)| {
            let schema = Schema::new(specs.iter().enumerate().map(|(i, s)| column(i, s))).expect("valid schema");
            let mut rng = Rng(seed);
            let commits = sizes
                .iter()
                .enumerate()
                .map(|(k, &n)| Commit {
                    message: format!("commit {k}"),
                    columns: schema
                        .columns
                        .iter()
                        .map(|c| (0..n).map(|_| random_value(&mut rng, c, 3)).collect())
                        .collect(),
                })
                .collect::<Vec<_>>();
            let versions = commits.len() + 1;
            let tags = tags
                .iter()
                .enumerate()
                .map(|(i, t)| TagSpec {
                    name: format!("t{i}"),
                    version: t.index(versions) as u64 + 1,
                    message: String::new(),
                })
                .collect();
            Logical { schema, commits, tags }
        })
}

/// Every file under `root` by relative path.
pub fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(dir: &Path, prefix: &str, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        for e in rd.filter_map(Result::ok) {
            let name = e.file_name().to_string_lossy().into_owned();
            let rel = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
            if e.path().is_dir() {
                walk(&e.path(), &rel, out);
            } else {
                out.insert(rel, std::fs::read(e.path()).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, "", &mut out);
    out
}

/// Copies a directory tree.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create_dir_all");
    for e in std::fs::read_dir(from).expect("read_dir").filter_map(Result::ok) {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).expect("copy");
        }
    }
}
