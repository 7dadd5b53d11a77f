//! What is where: the opened version's fragments, the data files holding the projected
//! columns, and per-file indexes (page table, per-row byte offsets, ragged sizes, validity)
//! that let a worker find any row's bytes without decoding anything else.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use tessera::datafile::{Block, DataFile, Page};
use tessera::limits::hard;
use tessera::manifest::DataFileRef;
use tessera::{Codec, Dataset, FragmentInfo};

use crate::assemble::ColumnLayout;
use crate::error::{LoaderError, Result};
use crate::memory::{Accountant, Charge, MemoryUse};
use crate::source::{Fetcher, classify, with_retry};

/// A data file of a fragment that holds projected columns.
#[derive(Clone, Debug)]
pub(crate) struct FileEntry {
    pub(crate) file: DataFileRef,
    /// Projection indices of the columns read from this file.
    pub(crate) columns: Vec<usize>,
}

/// A fragment with its live-row mapping.
#[derive(Clone, Debug)]
pub(crate) struct FragmentEntry {
    pub(crate) info: FragmentInfo,
    /// Physical row of each live row, when the fragment has deletions.
    pub(crate) physical: Option<Arc<Vec<u64>>>,
    pub(crate) files: Vec<FileEntry>,
    /// For each projected column: the index in `files` of the file holding it and the
    /// column's position in that file's `columns`.
    pub(crate) column_file: Vec<(usize, usize)>,
}

impl FragmentEntry {
    pub(crate) fn live_rows(&self) -> u64 {
        self.info.fragment.live_rows()
    }

    /// The physical row (within the fragment's files) of live row `live`.
    pub(crate) fn physical_row(&self, live: u64) -> u64 {
        match &self.physical {
            Some(map) => map.get(live as usize).copied().unwrap_or(u64::MAX),
            None => live,
        }
    }
}

/// One projected column's chunk in one data file, indexed.
#[derive(Debug)]
pub(crate) struct ChunkIndex {
    pub(crate) pages: Vec<Page>,
    /// First row of each page, then the row count (`pages.len() + 1` entries).
    pub(crate) page_first_row: Vec<u64>,
    /// For ragged columns, the byte offset of each row within the column's raw bytes
    /// (`rows + 1` entries); fixed rows are at `row * row_bytes`.
    pub(crate) row_start: Option<Vec<u64>>,
    pub(crate) fixed_row_bytes: u64,
    /// Ragged sizes, `rows * ragged`.
    pub(crate) sizes: Vec<u64>,
    pub(crate) ragged: usize,
    pub(crate) validity: Option<Vec<u8>>,
}

impl ChunkIndex {
    /// The page holding `row`.
    pub(crate) fn page_of(&self, row: u64) -> usize {
        self.page_first_row.partition_point(|&first| first <= row).saturating_sub(1)
    }

    fn raw_start(&self, row: u64) -> u64 {
        match &self.row_start {
            Some(starts) => starts.get(row as usize).copied().unwrap_or(u64::MAX),
            None => row * self.fixed_row_bytes,
        }
    }

    /// Row `row`'s page and byte range within the page's raw bytes.
    pub(crate) fn locate(&self, row: u64) -> (usize, std::ops::Range<usize>) {
        let page = self.page_of(row);
        let base = self.raw_start(self.page_first_row[page]);
        let (a, b) = (self.raw_start(row) - base, self.raw_start(row + 1) - base);
        (page, a as usize..b as usize)
    }

    /// Row `row`'s ragged sizes.
    pub(crate) fn sizes(&self, row: u64) -> &[u64] {
        let r = row as usize;
        self.sizes.get(r * self.ragged..(r + 1) * self.ragged).unwrap_or(&[])
    }

    /// Whether `row` holds a value.
    pub(crate) fn is_valid(&self, row: u64) -> bool {
        self.validity.as_ref().is_none_or(|bits| bits.get((row / 8) as usize).is_some_and(|b| b >> (row % 8) & 1 == 1))
    }
}

/// The index of one data file for the projected columns it holds.
#[derive(Debug)]
pub(crate) struct FileMeta {
    pub(crate) data_file: Arc<DataFile>,
    /// Parallel to [`FileEntry::columns`].
    pub(crate) chunks: Vec<ChunkIndex>,
    /// Bytes the index occupies (what the metadata share is charged).
    pub(crate) bytes: u64,
    /// The charge, released when the last user drops the index.
    _charge: Charge,
}

#[derive(Debug, Default)]
struct MetaCache {
    entries: HashMap<(usize, usize), (Arc<FileMeta>, u64)>,
    clock: u64,
}

/// The opened version as the loader sees it.
#[derive(Debug)]
pub(crate) struct Catalog {
    pub(crate) dataset: Dataset,
    pub(crate) columns: Vec<ColumnLayout>,
    pub(crate) fragments: Vec<FragmentEntry>,
    /// Live rows per fragment (the sampler's input).
    pub(crate) fragment_rows: Vec<u64>,
    /// First live global row of each fragment.
    first_rows: Vec<u64>,
    pub(crate) dataset_id: u64,
    meta: Mutex<MetaCache>,
}

/// The identity of a dataset version that every order derives from: FNV-1a 64 of the
/// branch, version and manifest CRC (the CRC binds it to the manifest's exact bytes, so a
/// re-created dataset with the same version number gets another id).
#[must_use]
pub fn version_id(branch: &str, version: u64, manifest_crc32: u32) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3);
        }
    };
    eat(b"tessera.version.v1");
    eat(&(branch.len() as u64).to_le_bytes());
    eat(branch.as_bytes());
    eat(&version.to_le_bytes());
    eat(&manifest_crc32.to_le_bytes());
    h
}

impl Catalog {
    /// Resolves the projection and the fragments of an opened version.
    pub(crate) fn new(dataset: Dataset, projection: Option<&[String]>) -> Result<Self> {
        let names: Vec<&str> = match projection {
            Some(cols) => cols.iter().map(String::as_str).collect(),
            None => dataset.schema().columns.iter().map(|c| c.name.as_str()).collect(),
        };
        let cols = dataset.project(Some(&names)).map_err(|e| LoaderError::config(format!("column projection: {e}")))?;
        let columns = cols.into_iter().map(ColumnLayout::new).collect::<Result<Vec<_>>>()?;
        let mut fragments = Vec::with_capacity(dataset.fragments().len());
        for info in dataset.fragments() {
            let mut files = Vec::new();
            for file in &info.fragment.files {
                let idx: Vec<usize> =
                    (0..columns.len()).filter(|&i| file.column_ids.contains(&columns[i].column.id)).collect();
                if !idx.is_empty() {
                    files.push(FileEntry { file: file.clone(), columns: idx });
                }
            }
            let covered: usize = files.iter().map(|f| f.columns.len()).sum();
            if covered != columns.len() && info.fragment.live_rows() > 0 {
                return Err(LoaderError::dataset(
                    "resolving the projection",
                    tessera::Error::Invalid {
                        what: format!("fragment {}", info.fragment.id),
                        reason: "the fragment's files do not hold every projected column exactly once".into(),
                    },
                ));
            }
            let physical = if info.fragment.deletion.is_some() {
                let live = dataset
                    .physical_rows(info, 0..info.fragment.live_rows())
                    .map_err(|e| LoaderError::dataset("reading a deletion vector", e))?;
                Some(Arc::new(live))
            } else {
                None
            };
            let mut column_file = vec![(usize::MAX, 0); columns.len()];
            for (fi, f) in files.iter().enumerate() {
                for (pos, &c) in f.columns.iter().enumerate() {
                    column_file[c] = (fi, pos);
                }
            }
            fragments.push(FragmentEntry { info: info.clone(), physical, files, column_file });
        }
        let fragment_rows = fragments.iter().map(FragmentEntry::live_rows).collect();
        let first_rows = fragments.iter().map(|f| f.info.first_row).collect();
        let dataset_id = version_id(dataset.branch(), dataset.version(), dataset.manifest_crc32());
        Ok(Self { dataset, columns, fragments, fragment_rows, first_rows, dataset_id, meta: Mutex::default() })
    }

    /// Estimated output bytes per row of projected column `c`: exact for fixed shapes; for
    /// ragged columns twice the average stored bytes per row of the files holding it (an
    /// allowance for padding to the batch's longest row).
    pub(crate) fn estimated_slot_bytes(&self, c: usize) -> u64 {
        let layout = &self.columns[c];
        let scale = |b: u64| b * layout.out_item as u64 / layout.in_item.max(1) as u64;
        if let Some(b) = layout.fixed_row_bytes {
            return scale(b);
        }
        let (mut bytes, mut rows) = (0u64, 0u64);
        for f in &self.fragments {
            if let Some(fe) = f.files.get(f.column_file[c].0) {
                bytes += fe.file.size;
                rows += f.info.fragment.row_count;
            }
        }
        scale(2 * bytes.checked_div(rows).unwrap_or(0)).max(64)
    }

    /// Estimated decoded bytes of fragment `frag`'s projected columns.
    pub(crate) fn estimated_fragment_bytes(&self, frag: usize) -> u64 {
        let f = &self.fragments[frag];
        let mut total = 0u64;
        for fe in &f.files {
            let fixed: Option<u64> =
                fe.columns.iter().map(|&c| self.columns[c].fixed_row_bytes).try_fold(0u64, |a, b| Some(a + b?));
            total += match fixed {
                Some(per_row) => per_row.saturating_mul(f.info.fragment.row_count),
                None => fe.file.size,
            };
        }
        total
    }

    /// The fragment and physical row of global (live) row `row`.
    pub(crate) fn locate(&self, row: u64) -> Option<(usize, u64)> {
        let f = self.first_rows.partition_point(|&first| first <= row).checked_sub(1)?;
        let frag = &self.fragments[f];
        let live = row - frag.info.first_row;
        (live < frag.live_rows()).then(|| (f, frag.physical_row(live)))
    }

    /// The index of file `file` of fragment `frag`, from the cache or built (one footer
    /// read, if not cached by the dataset, and one ranged read of the shape and validity
    /// blocks).
    pub(crate) fn file_meta(
        &self,
        frag: usize,
        file: usize,
        fetcher: &Fetcher,
        acct: &Arc<Accountant>,
        cap: u64,
        stopped: &AtomicBool,
    ) -> Result<Arc<FileMeta>> {
        {
            let mut cache = self.meta.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            cache.clock += 1;
            let now = cache.clock;
            if let Some(entry) = cache.entries.get_mut(&(frag, file)) {
                entry.1 = now;
                return Ok(entry.0.clone());
            }
        }
        let meta = Arc::new(self.build_meta(frag, file, fetcher, acct, stopped)?);
        let mut cache = self.meta.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let used: u64 = cache.entries.values().map(|e| e.0.bytes).sum();
        if used + meta.bytes > cap {
            // Evict least recently used entries until the new one fits (or the cache is empty).
            let mut by_age: Vec<((usize, usize), u64, u64)> =
                cache.entries.iter().map(|(k, e)| (*k, e.1, e.0.bytes)).collect();
            by_age.sort_by_key(|e| e.1);
            let mut freed = 0;
            for (key, _, bytes) in by_age {
                if used - freed + meta.bytes <= cap {
                    break;
                }
                cache.entries.remove(&key);
                freed += bytes;
            }
        }
        cache.clock += 1;
        let now = cache.clock;
        cache.entries.insert((frag, file), (meta.clone(), now));
        Ok(meta)
    }

    /// Drops every cached index (at the end of an epoch).
    pub(crate) fn clear_meta(&self) {
        self.meta.lock().unwrap_or_else(std::sync::PoisonError::into_inner).entries.clear();
    }

    fn build_meta(
        &self,
        frag: usize,
        file: usize,
        fetcher: &Fetcher,
        acct: &Arc<Accountant>,
        stopped: &AtomicBool,
    ) -> Result<FileMeta> {
        let entry = &self.fragments[frag];
        let fe = &entry.files[file];
        let key = fe.file.path.as_str();
        let data_file = with_retry(&fetcher.retry, stopped, &fetcher.counters, &|| key.to_string(), || {
            self.dataset.data_file(&entry.info.fragment, &fe.file).map_err(|e| classify(&format!("opening {key}"), e))
        })?;
        let rows = data_file.footer().row_count;
        // One ranged read for every projected column's validity and shape blocks.
        let mut blocks: Vec<Block> = Vec::new();
        for &ci in &fe.columns {
            let chunk = data_file
                .chunk(self.columns[ci].column.id)
                .ok_or_else(|| LoaderError::corrupt(key, "projected column missing from the footer"))?;
            blocks.extend(chunk.validity.iter().chain(chunk.shapes.iter()).copied());
        }
        let ranges: Vec<_> = blocks.iter().map(Block::range).collect();
        let fetched = fetcher.fetch(key, &ranges, stopped)?;
        let mut fetched = fetched.into_iter().zip(blocks);
        let mut next_block = |label: &str| -> Result<Vec<u8>> {
            let (bytes, block) = fetched.next().ok_or_else(|| LoaderError::corrupt(key, "missing block"))?;
            let computed = crc32fast::hash(&bytes);
            if computed != block.crc32 || block.codec != Codec::None {
                return Err(LoaderError::Checksum {
                    what: format!("{key}: {label} block"),
                    stored: block.crc32,
                    computed,
                });
            }
            Ok(bytes.to_vec())
        };
        let mut chunks = Vec::with_capacity(fe.columns.len());
        let mut bytes = 0u64;
        for &ci in &fe.columns {
            let layout = &self.columns[ci];
            let what = format!("{key}: column {:?}", layout.name);
            let chunk = data_file.chunk(layout.column.id).ok_or_else(|| LoaderError::corrupt(&what, "missing"))?;
            let validity = if chunk.validity.is_some() { Some(next_block("validity")?) } else { None };
            let sizes: Vec<u64> = if chunk.shapes.is_some() {
                next_block("shapes")?
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                    .collect()
            } else {
                Vec::new()
            };
            let index = index_chunk(layout, &chunk.pages, rows, sizes, validity, &what)?;
            bytes += 8
                * (index.page_first_row.len() + index.sizes.len() + index.row_start.as_ref().map_or(0, Vec::len))
                    as u64
                + index.validity.as_ref().map_or(0, |v| v.len() as u64)
                + (index.pages.len() * std::mem::size_of::<Page>()) as u64;
            chunks.push(index);
        }
        Ok(FileMeta { data_file, chunks, bytes, _charge: acct.charge(MemoryUse::Metadata, bytes) })
    }
}

/// Builds a chunk index and checks that every page's raw length is the sum of its rows'
/// bytes `[DF-19]`: after this, a row's byte range always lies inside its page.
fn index_chunk(
    layout: &ColumnLayout,
    pages: &[Page],
    rows: u64,
    sizes: Vec<u64>,
    validity: Option<Vec<u8>>,
    what: &str,
) -> Result<ChunkIndex> {
    let ragged = layout.ragged;
    if sizes.len() as u64 != rows * ragged as u64 {
        return Err(LoaderError::corrupt(what, "shape block has the wrong length"));
    }
    if let Some(v) = &validity
        && v.len() as u64 != rows.div_ceil(8)
    {
        return Err(LoaderError::corrupt(what, "validity block has the wrong length"));
    }
    let mut page_first_row = Vec::with_capacity(pages.len() + 1);
    let mut at = 0u64;
    for p in pages {
        page_first_row.push(at);
        at = at.checked_add(p.row_count).ok_or_else(|| LoaderError::corrupt(what, "page row counts overflow"))?;
    }
    page_first_row.push(at);
    if at != rows {
        return Err(LoaderError::corrupt(what, "pages do not cover the file's rows"));
    }
    let mut index = ChunkIndex {
        pages: pages.to_vec(),
        page_first_row,
        row_start: None,
        fixed_row_bytes: layout.fixed_row_bytes.unwrap_or(0),
        sizes,
        ragged,
        validity,
    };
    if ragged > 0 {
        let mut starts = Vec::with_capacity(rows as usize + 1);
        let mut acc = 0u64;
        for r in 0..rows {
            starts.push(acc);
            let s = index.sizes(r);
            let n = layout
                .in_row_bytes(s)
                .filter(|&n| n <= hard::MAX_ROW_BYTES)
                .ok_or_else(|| LoaderError::corrupt(what, format!("row {r} is larger than the row limit")))?;
            if !index.is_valid(r) && s.iter().any(|&x| x != 0) {
                return Err(LoaderError::corrupt(what, format!("null row {r} has non-zero ragged sizes")));
            }
            acc = acc.checked_add(n).ok_or_else(|| LoaderError::corrupt(what, "row sizes overflow"))?;
        }
        starts.push(acc);
        index.row_start = Some(starts);
    }
    for (i, p) in index.pages.iter().enumerate() {
        let (a, b) = (index.page_first_row[i], index.page_first_row[i + 1]);
        let raw = index.raw_start(b).checked_sub(index.raw_start(a));
        if raw != Some(p.block.raw_len) {
            return Err(LoaderError::corrupt(what, format!("page {i} raw length disagrees with its rows [DF-19]")));
        }
    }
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ids_differ_by_every_input() {
        let a = version_id("main", 3, 7);
        assert_ne!(a, version_id("main", 4, 7));
        assert_ne!(a, version_id("main", 3, 8));
        assert_ne!(a, version_id("dev", 3, 7));
        assert_eq!(a, version_id("main", 3, 7));
    }
}
