//! Filters for open bugs of the reference crate.
//!
//! A fuzzer stops at the first crash, so while a reported bug is not fixed the harness skips
//! the inputs that reach it; the rest of the input space keeps being explored. Each filter
//! names its bug (see `fuzz/README.md`, "Findings"); the minimized inputs are in
//! `fuzz/regressions/<target>/`. Once the owner fixes a bug, delete its filter: the replay test
//! then runs the regression inputs through the fixed code.
//!
//! Setting `TESSERA_FUZZ_STRICT=1` turns every filter off (to reproduce a finding, or to check
//! a fix before deleting the filter).

use std::sync::OnceLock;

use serde::de::DeserializeOwned;
use tessera::datafile::Footer;

/// Byte budget of [`bounded_decode`]: above every body the harness limits allow.
///
/// (TFZ-1, a string's declared length allocated before any check, is fixed in the reference:
/// `envelope::decode_body` bounds every length by a limit of about twice the body `[ENC-04]`.
/// The harness still decodes with a budget of its own wherever it decodes outside the reader.)
const DECODE_BUDGET: usize = 4 << 20;

/// Rows above which a data file is skipped while TFZ-2 is open.
pub const TFZ2_MAX_ROWS: u64 = 1 << 20;

/// Whether the filters are off (`TESSERA_FUZZ_STRICT=1`).
#[must_use]
pub fn strict() -> bool {
    static STRICT: OnceLock<bool> = OnceLock::new();
    *STRICT.get_or_init(|| std::env::var_os("TESSERA_FUZZ_STRICT").is_some_and(|v| v != "0"))
}

/// Decodes a bincode body with the format's configuration plus a byte budget, so a declared
/// length can never allocate more than the budget; trailing bytes are an error, as in the
/// reference's `decode_body`.
///
/// # Errors
/// Whatever bincode reports (`LimitExceeded` for a declared length above the budget).
pub fn bounded_decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, bincode::error::DecodeError> {
    let cfg = bincode::config::standard().with_little_endian().with_fixed_int_encoding().with_limit::<DECODE_BUDGET>();
    let (v, used) = bincode::serde::decode_from_slice(bytes, cfg)?;
    if used == bytes.len() { Ok(v) } else { Err(bincode::error::DecodeError::OtherString("trailing bytes".into())) }
}

/// TFZ-2: `DataFile::decode` allocates and loops per row of a whole page
/// (`Vec::with_capacity(page.row_count)`), and `verify` decodes every row, while a page of
/// zero-byte rows (`Dim::Fixed(0)`) may declare up to 2^32 rows in a few bytes. True for a
/// footer with more than [`TFZ2_MAX_ROWS`] rows in the file or in any page.
#[must_use]
pub fn skip_footer(footer: &Footer) -> bool {
    if strict() {
        return false;
    }
    footer.row_count > TFZ2_MAX_ROWS
        || footer.columns.iter().flat_map(|c| &c.pages).any(|p| p.row_count > TFZ2_MAX_ROWS)
}

/// [`skip_footer`] for a whole data file (its footer located through the trailer).
#[must_use]
pub fn skip_data_file(file: &[u8]) -> bool {
    if strict() {
        return false;
    }
    let n = file.len();
    let Some(t) = n.checked_sub(24) else { return false };
    let footer_len = u64::from_le_bytes(file[t..t + 8].try_into().unwrap_or([0; 8]));
    let Some(start) = (t as u64).checked_sub(footer_len) else { return false };
    bounded_decode::<Footer>(&file[start as usize..t]).is_ok_and(|f| skip_footer(&f))
}

/// Whether any object of a store layout reaches an open bug.
#[must_use]
pub fn skip_layout(objects: &[(String, Vec<u8>)]) -> bool {
    objects.iter().any(|(_, o)| skip_data_file(o))
}

/// TFZ-3: `Dataset::read_rows` asks the store for every block's byte range, and an empty block
/// (`stored_len` 0, which CMP-04 allows and the writer produces for a page of zero-byte rows)
/// is an empty range, which `InMemory` (and HTTP range requests) reject: a valid dataset with
/// such a page cannot be read from `memory://` or cloud stores. While the bug is open the
/// harness's stores answer empty ranges (of `get_ranges`, and `get_opts` with an empty bounded
/// range) with empty bytes, so the code behind it stays covered.
#[must_use]
pub fn memory_store() -> tessera::Store {
    let inner: std::sync::Arc<dyn object_store::ObjectStore> =
        std::sync::Arc::new(object_store::memory::InMemory::new());
    if strict() {
        tessera::Store::from_object_store(inner, "", true)
    } else {
        tessera::Store::from_object_store(std::sync::Arc::new(EmptyRanges(inner)), "", true)
    }
}

/// An object store that answers empty ranges of `get_ranges` itself (see [`memory_store`]).
#[derive(Debug)]
struct EmptyRanges(std::sync::Arc<dyn object_store::ObjectStore>);

impl std::fmt::Display for EmptyRanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EmptyRanges({})", self.0)
    }
}

mod empty_ranges {
    use std::ops::Range;

    use bytes::Bytes;
    use futures::StreamExt;
    use futures::stream::BoxStream;
    use object_store::path::Path;
    use object_store::{
        CopyOptions, GetOptions, GetRange, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
        ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
    };

    use super::EmptyRanges;

    #[async_trait::async_trait]
    impl ObjectStore for EmptyRanges {
        async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
            self.0.put_opts(location, payload, opts).await
        }

        async fn put_multipart_opts(
            &self,
            location: &Path,
            opts: PutMultipartOptions,
        ) -> Result<Box<dyn MultipartUpload>> {
            self.0.put_multipart_opts(location, opts).await
        }

        async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
            if let Some(GetRange::Bounded(r)) = &options.range
                && r.start == r.end
            {
                let r = r.clone();
                let whole = GetOptions { range: None, ..options.clone() };
                let got = self.0.get_opts(location, whole).await?;
                if r.start <= got.meta.size {
                    let empty = futures::stream::once(async { Ok(Bytes::new()) }).boxed();
                    return Ok(GetResult { payload: GetResultPayload::Stream(empty), range: r, ..got });
                }
            }
            self.0.get_opts(location, options).await
        }

        async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
            let wanted: Vec<Range<u64>> = ranges.iter().filter(|r| r.start < r.end).cloned().collect();
            let mut got = self.0.get_ranges(location, &wanted).await?.into_iter();
            Ok(ranges
                .iter()
                .map(|r| if r.start < r.end { got.next().unwrap_or_default() } else { Bytes::new() })
                .collect())
        }

        fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
            self.0.delete_stream(locations)
        }

        fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
            self.0.list(prefix)
        }

        async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
            self.0.list_with_delimiter(prefix).await
        }

        async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
            self.0.copy_opts(from, to, options).await
        }
    }
}

/// TFZ-4: `Dataset::log` follows `parent` links with no cycle check, so a manifest whose
/// parent chain loops (e.g. `parent` = itself) makes it loop forever, growing memory. True
/// when the chain from `ds` repeats a version, is longer than 64, or cannot be walked here
/// (then `log` is not called).
#[must_use]
pub fn log_would_cycle(ds: &tessera::Dataset) -> bool {
    if strict() {
        return false;
    }
    let mut seen = std::collections::HashSet::from([ds.manifest().version_ref()]);
    let mut next = ds.manifest().parent.clone();
    while let Some(p) = next.take() {
        if !seen.insert(p.clone()) || seen.len() > 64 {
            return true;
        }
        match ds.checkout(&tessera::At::BranchVersion(p.branch.clone(), p.version)) {
            Ok(d) => next.clone_from(&d.manifest().parent),
            Err(_) => return true,
        }
    }
    false
}
