use super::*;
use crate::batch::Batch;
use crate::column::ColumnData;
use crate::distance::distance_f32;
use crate::error::ErrorClass;
use crate::schema::{Column, Schema};
use crate::writer::WriteOptions;

const DIM: usize = 12;

/// Clustered vectors: 8 centres, each row a centre plus a small deterministic offset; rows
/// 7 and 300 repeat row 0 and row 299 nearly exactly (near-duplicates).
fn vectors(n: usize) -> Vec<f32> {
    let mut v = Vec::with_capacity(n * DIM);
    let mut x = 0x9e37_79b9_u32;
    for r in 0..n {
        let centre = (r * 5) % 8;
        for j in 0..DIM {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let noise = (x % 1000) as f32 / 4000.0;
            v.push(if (j + centre) % 4 == 0 { 1.0 } else { 0.1 } + noise + centre as f32 * 0.05);
        }
    }
    for (dup, of) in [(7, 0), (300, 299)] {
        if dup < n {
            let src: Vec<f32> = v[of * DIM..(of + 1) * DIM].to_vec();
            for (j, x) in src.iter().enumerate() {
                v[dup * DIM + j] = x + 1e-4;
            }
        }
    }
    v
}

fn dataset(dir: &std::path::Path, n: usize, nulls: bool) -> Dataset {
    let mut col = Column::new("emb", DType::F32, &[Dim::Fixed(DIM as u64)]);
    if nulls {
        col = col.nullable();
    }
    let schema = Schema::new([col, Column::new("id", DType::I64, &[])]).unwrap();
    let ds = Dataset::create(dir.to_str().unwrap(), schema, &WriteOptions::default()).unwrap();
    let v = vectors(n);
    let mut emb = ColumnData::from_fixed(&[DIM as u64], &v).unwrap();
    if nulls {
        let mut data = ColumnData::for_column(ds.schema().column("emb").unwrap());
        for r in 0..n {
            if r % 10 == 3 {
                data.push_null().unwrap();
            } else {
                data.push_row(&[DIM as u64], emb.row(r)).unwrap();
            }
        }
        emb = data;
    }
    let ids: Vec<i64> = (0..n as i64).collect();
    let batch = Batch::new().with("emb", emb).unwrap().with("id", ColumnData::from_scalars(&ids)).unwrap();
    let opts = WriteOptions { target_file_bytes: 4096, ..WriteOptions::default() };
    ds.append(&batch, "rows", opts).unwrap()
}

/// The exact top-k by brute force: (distance total order, row).
fn brute(ds: &Dataset, metric: Distance, q: &[f32], k: usize) -> Vec<(u64, f64)> {
    let data = ds.read_rows(0..ds.row_count(), Some(&["emb"])).unwrap();
    let emb = data.get("emb").unwrap();
    let mut all: Vec<(i64, u64, f64)> = (0..emb.len())
        .filter(|&i| emb.is_valid(i))
        .map(|i| {
            let v: Vec<f32> = emb.row(i).chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
            let d = distance_f32(metric, &v, q).unwrap();
            (search::total_key(d), i as u64, d)
        })
        .collect();
    all.sort_by_key(|a| (a.0, a.1));
    all.into_iter().take(k).map(|(_, r, d)| (r, d)).collect()
}

fn options() -> WriteOptions {
    WriteOptions { timestamp_ms: Some(1_700_000_000_000), ..WriteOptions::default() }
}

#[test]
fn probing_every_list_is_the_exact_top_k() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path(), 500, true);
    for metric in [Distance::Cosine, Distance::L2] {
        let name = format!("emb-{}", metric_name(metric));
        let spec = IndexSpec { lists: Some(9), ..IndexSpec::new(&name, "emb", metric) };
        let index = ds.create_vector_index(&spec, &options()).unwrap();
        assert_eq!(index.rows, 450, "null vectors are not indexed");
        assert_eq!(index.nlist(), 9);
        assert_eq!(ds.vector_index(&name).unwrap(), index);
        let v = vectors(500);
        for probe_row in [0usize, 123, 499] {
            let q: Vec<f32> = v[probe_row * DIM..(probe_row + 1) * DIM].iter().map(|x| x * 1.01).collect();
            let q64: Vec<f64> = q.iter().map(|&x| f64::from(x)).collect();
            let (hits, stats) = index.search(ds.store(), &q64, 10, 9).unwrap();
            assert_eq!(stats.entries, 450);
            let got: Vec<(u64, f64)> = hits.iter().map(|h| (h.row, h.distance)).collect();
            assert_eq!(got, brute(&ds, metric, &q, 10), "{metric:?} row {probe_row}");
            let stored = ds.read_rows(hits[0].row..hits[0].row + 1, Some(&["emb"])).unwrap();
            assert_eq!(stored.get("emb").unwrap().row(0), &hits[0].vector[..]);
            // Probing fewer lists reads fewer entries and returns a subset ranked the same way.
            let (few, stats) = index.search(ds.store(), &q64, 10, 2).unwrap();
            assert!(stats.entries < 450);
            assert!(
                few.windows(2).all(
                    |w| (search::total_key(w[0].distance), w[0].row) < (search::total_key(w[1].distance), w[1].row)
                )
            );
        }
    }
    assert_eq!(ds.vector_indexes().unwrap(), vec!["emb-cosine", "emb-l2"]);
    assert_eq!(ds.vector_indexes_for("emb", Distance::L2).unwrap().len(), 1);
    assert!(ds.vector_indexes_for("emb", Distance::InnerProduct).unwrap().is_empty());
    // Indexes are invisible to the version: it still verifies.
    assert_eq!(ds.verify().unwrap().rows, 500);
}

#[test]
fn the_build_is_deterministic_and_bound_to_its_version() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path(), 300, false);
    let a = ds
        .create_vector_index(&IndexSpec { lists: Some(5), ..IndexSpec::new("a", "emb", Distance::L2) }, &options())
        .unwrap();
    let b = ds
        .create_vector_index(&IndexSpec { lists: Some(5), ..IndexSpec::new("b", "emb", Distance::L2) }, &options())
        .unwrap();
    assert_eq!(
        (a.data.clone(), a.centroids.clone(), a.lists.clone()),
        (b.data.clone(), b.centroids.clone(), b.lists.clone())
    );
    let taken = ds.create_vector_index(&IndexSpec::new("a", "emb", Distance::L2), &options()).unwrap_err();
    assert_eq!(taken.class(), ErrorClass::Conflict);
    for bad in [
        IndexSpec::new("c", "id", Distance::L2),
        IndexSpec::new("c", "emb", Distance::InnerProduct),
        IndexSpec::new("../c", "emb", Distance::L2),
    ] {
        assert_eq!(ds.create_vector_index(&bad, &options()).unwrap_err().class(), ErrorClass::Usage, "{bad:?}");
    }
    // A later version is not what the index indexes.
    let more = Batch::new()
        .with("emb", ColumnData::from_fixed(&[DIM as u64], &vectors(1)).unwrap())
        .unwrap()
        .with("id", ColumnData::from_scalars(&[9i64]))
        .unwrap();
    let next = ds.append(&more, "one more", WriteOptions::default()).unwrap();
    assert!(next.vector_indexes_for("emb", Distance::L2).unwrap().is_empty());
    assert_eq!(ds.vector_indexes_for("emb", Distance::L2).unwrap().len(), 2);
    // Deleting one keeps the lists object the other names; deleting both removes it.
    ds.delete_vector_index("a").unwrap();
    assert!(ds.store().list(LISTS_DIR).unwrap().len() == 1);
    ds.delete_vector_index("b").unwrap();
    assert!(ds.store().list(LISTS_DIR).unwrap().is_empty());
    assert_eq!(ds.delete_vector_index("b").unwrap_err().class(), ErrorClass::NotFound);
}

#[test]
fn damage_is_detected_by_checksums() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path(), 200, false);
    let index = ds
        .create_vector_index(&IndexSpec { lists: Some(4), ..IndexSpec::new("i", "emb", Distance::Cosine) }, &options())
        .unwrap();
    let q = vec![0.5f64; DIM];
    let lists_path = dir.path().join(&index.data);
    let mut bytes = std::fs::read(&lists_path).unwrap();
    let at = index.list_range(index.probe_order(&q)[0]).start as usize + 20;
    bytes[at] ^= 0x40;
    std::fs::write(&lists_path, &bytes).unwrap();
    let err = index.search(ds.store(), &q, 5, 1).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Malformed, "{err}");
    assert!(err.to_string().contains("CRC-32"), "{err}");
    // The record too: its envelope CRC.
    let record = dir.path().join(index_key("i"));
    let mut bytes = std::fs::read(&record).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    std::fs::write(&record, &bytes).unwrap();
    assert_eq!(ds.vector_index("i").unwrap_err().class(), ErrorClass::Malformed);
    assert_eq!(ds.vector_indexes_for("emb", Distance::Cosine).unwrap_err().class(), ErrorClass::Malformed);
    // A wrong-length query is the caller's fault.
    assert_eq!(index.search(ds.store(), &[1.0], 5, 1).unwrap_err().class(), ErrorClass::Usage);
}

/// A change to a valid record.
type Change = Box<dyn Fn(&mut VectorIndex)>;

#[test]
fn records_that_break_the_rules_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path(), 100, false);
    let good = ds
        .create_vector_index(&IndexSpec { lists: Some(3), ..IndexSpec::new("g", "emb", Distance::L2) }, &options())
        .unwrap();
    let cases: Vec<(&str, Change, ErrorClass)> = vec![
        ("gap", Box::new(|i| i.lists[1].offset += 1), ErrorClass::Invalid),
        ("rows", Box::new(|i| i.rows += 1), ErrorClass::Invalid),
        (
            "centroids",
            Box::new(|i| {
                i.centroids.pop();
            }),
            ErrorClass::Invalid,
        ),
        ("nan centroid", Box::new(|i| i.centroids[0] = f32::NAN), ErrorClass::Invalid),
        ("path", Box::new(|i| i.data = "../x".into()), ErrorClass::Invalid),
        ("column", Box::new(|i| i.column = "id".into()), ErrorClass::Invalid),
        (
            "dim",
            Box::new(|i| {
                i.dim = 6;
                i.centroids.truncate(18);
                let e = i.entry_bytes();
                let mut at = 0;
                for l in &mut i.lists {
                    l.offset = at;
                    at += l.rows * e;
                }
                i.data_size = at;
            }),
            ErrorClass::Invalid,
        ),
        ("version", Box::new(|i| i.target.version = 99), ErrorClass::Invalid),
        ("sha", Box::new(|i| i.manifest_sha256[0] ^= 1), ErrorClass::Invalid),
        ("name", Box::new(|i| i.name = "other".into()), ErrorClass::Invalid),
        ("metric", Box::new(|i| i.metric = Distance::InnerProduct), ErrorClass::Unsupported),
    ];
    for (what, change, class) in cases {
        let mut bad = VectorIndex { name: "bad".into(), ..good.clone() };
        change(&mut bad);
        let key = index_key("bad");
        std::fs::write(dir.path().join(&key), bad.to_object().unwrap()).unwrap();
        let err = ds.vector_index("bad").unwrap_err();
        assert_eq!(err.class(), class, "{what}: {err}");
        assert!(what == "name" || !err.to_string().contains("record names"), "{what}: {err}");
        std::fs::remove_file(dir.path().join(&key)).unwrap();
    }
}

#[test]
fn near_duplicates_match_brute_force_when_every_list_is_compared() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path(), 400, false);
    let index = ds
        .create_vector_index(&IndexSpec { lists: Some(6), ..IndexSpec::new("d", "emb", Distance::Cosine) }, &options())
        .unwrap();
    let v = vectors(400);
    let row = |r: usize| &v[r * DIM..(r + 1) * DIM];
    let threshold = 1e-6;
    let brute: Vec<u64> = (0..400)
        .filter(|&r| (0..r).any(|s| distance_f32(Distance::Cosine, row(r), row(s)).unwrap() < threshold))
        .map(|r| r as u64)
        .collect();
    assert!(brute.contains(&7) && brute.contains(&300), "{brute:?}");
    assert_eq!(index.near_duplicates(ds.store(), threshold, 6).unwrap(), brute);
    // Fewer lists compared can only find fewer.
    let some = index.near_duplicates(ds.store(), threshold, 1).unwrap();
    assert!(some.iter().all(|r| brute.contains(r)));
    assert_eq!(index.near_duplicates(ds.store(), f64::NAN, 1).unwrap_err().class(), ErrorClass::Usage);
}

#[test]
fn garbage_collection_keeps_named_lists_and_drops_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path(), 100, false);
    let index = ds
        .create_vector_index(&IndexSpec { lists: Some(3), ..IndexSpec::new("g", "emb", Distance::L2) }, &options())
        .unwrap();
    let orphan = format!("{LISTS_DIR}/0123456789abcdef0123456789abcdef.{LISTS_EXT}");
    std::fs::write(dir.path().join(&orphan), b"left by a crashed build").unwrap();
    let report = crate::gc::collect_garbage(ds.store(), std::time::Duration::ZERO, false).unwrap();
    assert_eq!(report.garbage.iter().map(|g| g.0.as_str()).collect::<Vec<_>>(), vec![orphan.as_str()]);
    assert!(dir.path().join(&index.data).exists());
    assert_eq!(index.search(ds.store(), &[0.5; DIM], 3, 3).unwrap().0.len(), 3);
    // A record that cannot be read stops the collection before anything is deleted.
    std::fs::write(dir.path().join(index_key("broken")), b"not a record").unwrap();
    let err = crate::gc::collect_garbage(ds.store(), std::time::Duration::ZERO, false).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Malformed);
}

#[test]
fn verify_reads_every_list() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path(), 120, true);
    let index = ds
        .create_vector_index(&IndexSpec { lists: Some(4), ..IndexSpec::new("v", "emb", Distance::L2) }, &options())
        .unwrap();
    let stats = index.verify(ds.store()).unwrap();
    assert_eq!((stats.lists, stats.entries, stats.bytes), (4, index.rows, index.data_size));
    // The same row in two lists (CRC-32s recomputed, so only the repeat is wrong).
    let path = dir.path().join(&index.data);
    let mut bytes = std::fs::read(&path).unwrap();
    let full: Vec<usize> = (0..4).filter(|&i| index.lists[i].rows > 0).collect();
    assert!(full.len() >= 2, "{:?}", index.lists);
    let (a, b) = (index.list_range(full[0]).start as usize, index.list_range(full[1]).start as usize);
    let first: [u8; 8] = bytes[a..a + 8].try_into().unwrap();
    bytes[b..b + 8].copy_from_slice(&first);
    std::fs::write(&path, &bytes).unwrap();
    let mut forged = index.clone();
    let r = index.list_range(full[1]);
    forged.lists[full[1]].crc32 = crc32fast::hash(&bytes[r.start as usize..r.end as usize]);
    assert_eq!(forged.verify(ds.store()).unwrap_err().class(), ErrorClass::Invalid);
    assert_eq!(index.verify(ds.store()).unwrap_err().class(), ErrorClass::Malformed);
}
