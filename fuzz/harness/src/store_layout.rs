//! The whole-dataset target: arbitrary objects in an in-memory store, opened and read the way a
//! user would (`Dataset::open_at`, `read_rows`, `verify`, history walks).

use bytes::Bytes;
use tessera::{At, Dataset};

use crate::{check_column_data, known_bugs, layout, limits, repair};

/// Rows read from each end of a version.
const READ_ROWS: u64 = 16;
/// Versions with at most this many rows are also dumped whole.
const DUMP_ROWS: u64 = 256;

/// Target: lay the input out as objects of a dataset root (see [`layout`]), open the chosen
/// version and read it every way a reader can.
pub fn store_layout(data: &[u8]) {
    let mut input = layout::decode(data);
    if input.flags & 1 != 0 {
        repair::layout(&mut input.objects);
    }
    let store = known_bugs::memory_store();
    for (key, bytes) in &input.objects {
        let _ = store.put_if_absent(key, Bytes::from(bytes.clone()));
    }
    let at = layout::at(input.flags);
    let Ok(ds) = Dataset::open_at(&store, &at, limits()) else { return };
    read_everything(&ds);
    if let At::Tag(name) = &at {
        let _ = Dataset::open_tag(&store, name, limits());
    }
}

fn read_everything(ds: &Dataset) {
    let n = ds.row_count();
    let k = n.min(READ_ROWS);
    let schema = ds.schema().clone();
    for range in [0..k, n - k..n, n / 2..(n / 2 + 1).min(n)] {
        if let Ok(batch) = ds.read_rows(range.clone(), None) {
            assert_eq!(batch.columns().len(), schema.columns.len(), "read_rows returned another column count");
            for (c, (name, data)) in schema.columns.iter().zip(batch.columns()) {
                assert_eq!(&c.name, name, "read_rows returned the columns in another order");
                check_column_data(data, c, range.end - range.start);
            }
        }
    }
    if let Some(c) = schema.columns.last()
        && let Ok(batch) = ds.read_rows(0..k, Some(&[c.name.as_str()]))
    {
        assert_eq!(batch.columns().len(), 1);
        check_column_data(&batch.columns()[0].1, c, k);
    }
    if let Ok(report) = ds.verify() {
        assert_eq!(report.rows, n, "verify counted other rows than the manifest");
    }
    if n <= DUMP_ROWS {
        let _ = tessera::dump::dump(ds);
    }
    let _ = ds.log();
    let _ = ds.ancestors();
    let _ = ds.diff_from(ds);
    let _ = ds.tags();
    let _ = ds.branches();
}
