//! The rows of a batch that the block window does not hold, read from storage. Per data
//! file, its slots become needs in serving order: a row on its own (uncompressed, checksums
//! off), a page that is exactly one row, a whole page (verified, decoded, rows copied out,
//! cached for later batches), or a page already cached. A local file serves them with
//! positioned reads (straight into the slot where the layout allows); object-store files
//! fetch theirs as range reads packed into waves, about one round trip per batch.

use std::collections::VecDeque;
use std::ops::Range;

use bytes::Bytes;
use tessera::Codec;
use tessera::datafile::{self, Block};

use super::{
    BatchFill, FileRef, FillError, FillResult, Worker, clone_fault, column_buf, decode_page, slot_error, verify,
};
use crate::assemble::ColumnPlan;
use crate::catalog::FileMeta;
use crate::error::{LoaderError, Result, from_format};

/// Column `col` of slot `j`, read on its own from `range` of the data file.
#[derive(Debug)]
struct RowRead {
    col: usize,
    j: usize,
    range: Range<u64>,
}

/// Column `col` of slot `j`, which is the whole of page `block`.
#[derive(Debug)]
struct SingleRead {
    col: usize,
    j: usize,
    block: Block,
}

/// The rows a batch takes from one page of column `col` (position `pos` in its data file):
/// (slot, physical row).
#[derive(Debug)]
struct PageRows {
    pos: usize,
    col: usize,
    items: Vec<(usize, u64)>,
}

/// Page `page` (stored as `block`), read whole for `rows`.
#[derive(Debug)]
struct PageRead {
    rows: PageRows,
    page: usize,
    block: Block,
}

/// What one column of one data file needs from storage for a batch.
#[derive(Debug)]
enum Need {
    /// One row read on its own (uncompressed, checksums off).
    Row(RowRead),
    /// A page holding one wanted row that is the whole page: read/decompressed into the slot.
    Single(SingleRead),
    /// A whole page, verified and decoded, then rows copied out (and the page cached).
    Page(PageRead),
    /// A page already in the worker's cache (its decoded bytes).
    Cached(PageRows, Bytes),
}

impl Need {
    fn range(&self) -> Option<Range<u64>> {
        match self {
            Need::Row(row) => Some(row.range.clone()),
            Need::Single(SingleRead { block, .. }) | Need::Page(PageRead { block, .. }) => Some(block.range()),
            Need::Cached(..) => None,
        }
    }
}

/// An object-store data file a batch reads from: what to serve, the ranges to fetch for it
/// (one per need with a range, in order) and the bodies fetched so far.
pub(super) struct RemoteFile<'a> {
    file: FileRef<'a>,
    needs: VecDeque<Need>,
    ranges: Vec<Range<u64>>,
    fetched: VecDeque<Bytes>,
}

impl Worker {
    /// An object-store data file to serve slots `js` of `file` from, with the ranges to fetch.
    pub(super) fn remote_file<'a>(&mut self, fill: &BatchFill<'_>, file: FileRef<'a>, js: &[usize]) -> RemoteFile<'a> {
        let needs: VecDeque<Need> = self.direct_needs(fill, file, js).into();
        let ranges = needs.iter().filter_map(Need::range).collect();
        RemoteFile { file, needs, ranges, fetched: VecDeque::new() }
    }

    /// What serving slots `js` from `file` takes: rows, pages and cached pages, in the order
    /// they are served.
    fn direct_needs(&mut self, fill: &BatchFill<'_>, file: FileRef<'_>, js: &[usize]) -> Vec<Need> {
        let sh = self.sh.clone();
        let cat = &sh.catalog;
        let local = sh.fetcher.is_local();
        let verify = sh.set.verify;
        let mut needs = Vec::new();
        for (pos, &col) in file.entry.columns.iter().enumerate() {
            let chunk = &file.meta.chunks[pos];
            let layout = &cat.columns[col];
            let mut items: Vec<(usize, u64)> = js.iter().map(|&j| (j, fill.slots[j].phys)).collect();
            items.sort_by_key(|&(j, phys)| (phys, j));
            let mut k = 0;
            while k < items.len() {
                let page = chunk.page_of(items[k].1);
                let mut end = k + 1;
                while end < items.len() && chunk.page_of(items[end].1) == page {
                    end += 1;
                }
                let group = items[k..end].to_vec();
                k = end;
                let block = chunk.pages()[page].block;
                if !verify && block.codec == Codec::None {
                    for (j, phys) in group {
                        let (_, r) = chunk.locate(phys);
                        let range = block.offset + r.start as u64..block.offset + r.end as u64;
                        needs.push(Need::Row(RowRead { col, j, range }));
                    }
                } else if let Some(raw) = self.cache.get((file.frag, file.fi, pos, page)) {
                    needs.push(Need::Cached(PageRows { pos, col, items: group }, raw));
                } else if local
                    && group.len() == 1
                    && chunk.pages()[page].row_count == 1
                    && fill.plans[col].direct_range(layout, group[0].0).is_some_and(|d| d.len() as u64 == block.raw_len)
                {
                    needs.push(Need::Single(SingleRead { col, j: group[0].0, block }));
                } else {
                    needs.push(Need::Page(PageRead { rows: PageRows { pos, col, items: group }, page, block }));
                }
            }
        }
        needs
    }

    /// Serves slots `js` from a local data file with positioned reads.
    pub(super) fn fill_local(&mut self, fill: &mut BatchFill<'_>, file: FileRef<'_>, js: &[usize]) -> FillResult<()> {
        for need in self.direct_needs(fill, file, js) {
            self.serve(fill, file, need, None)?;
        }
        self.account();
        Ok(())
    }

    /// Serves the object-store files of a batch. Every file's ranges are split into requests
    /// of at most the request limit, and requests are packed into waves of at most that many
    /// bytes and `max_requests_in_flight` requests; the requests of a wave (usually every
    /// file the batch touches) go out at once, so a batch costs about one round trip, not one
    /// per file. Each wave is counted while in flight, and what it brought is served before
    /// the next wave starts.
    pub(super) fn fill_remote(&mut self, fill: &mut BatchFill<'_>, mut files: Vec<RemoteFile<'_>>) -> FillResult<()> {
        let sh = self.sh.clone();
        let limit = self.sh.set.max_fetch.min(self.sh.allowance / 2).max(1);
        // (file, its range group, bytes) in order, then waves of consecutive units.
        let mut units: Vec<(usize, Range<usize>, u64)> = Vec::new();
        for (f, file) in files.iter().enumerate() {
            for g in self.chunked(&file.ranges) {
                let n = file.ranges[g.clone()].iter().map(|r| r.end - r.start).sum();
                units.push((f, g, n));
            }
        }
        let mut waves: Vec<Range<usize>> = Vec::new();
        let (mut start, mut sum) = (0, 0u64);
        for (i, u) in units.iter().enumerate() {
            if i > start && (sum + u.2 > limit || i - start >= sh.set.max_requests) {
                waves.push(start..i);
                start = i;
                sum = 0;
            }
            sum += u.2;
        }
        if start < units.len() {
            waves.push(start..units.len());
        }
        for wave in waves {
            let wave = &units[wave];
            self.begin_inflight(wave.iter().map(|u| u.2).sum())?; // the previous wave is served
            let requests: Vec<(&str, &[Range<u64>])> =
                wave.iter().map(|(f, g, _)| (files[*f].file.key(), &files[*f].ranges[g.clone()])).collect();
            let got = sh.fetcher.fetch_many(&requests, &sh.stopped)?;
            for ((f, _, _), bodies) in wave.iter().zip(got) {
                files[*f].fetched.extend(bodies);
            }
            for file in &mut files {
                self.serve_ready(fill, file)?;
            }
        }
        for file in &mut files {
            self.serve_ready(fill, file)?; // files with cached pages only
        }
        self.end_inflight();
        Ok(())
    }

    /// Serves a remote file's needs in order while their bytes are here.
    fn serve_ready(&mut self, fill: &mut BatchFill<'_>, file: &mut RemoteFile<'_>) -> FillResult<()> {
        while let Some(need) = file.needs.front() {
            let stored = if need.range().is_some() {
                match file.fetched.pop_front() {
                    Some(b) => Some(b),
                    None => break,
                }
            } else {
                None
            };
            let Some(need) = file.needs.pop_front() else { break };
            self.serve(fill, file.file, need, stored)?;
        }
        Ok(())
    }

    /// Serves one need of `file`: with `stored` bytes already fetched (object store), or by
    /// reading them now (local). Data errors go to the batch's fails, anything else fails the
    /// batch.
    fn serve(
        &mut self,
        fill: &mut BatchFill<'_>,
        file: FileRef<'_>,
        need: Need,
        stored: Option<Bytes>,
    ) -> FillResult<()> {
        match need {
            Need::Row(row) => {
                if let Err(e) = self.read_row(fill, file.key(), &row, stored.as_deref()) {
                    slot_error(&mut fill.fails, row.j, e)?;
                }
            }
            Need::Single(single) => {
                if let Err(e) = self.read_single(fill, file.key(), &single) {
                    slot_error(&mut fill.fails, single.j, e)?;
                }
            }
            Need::Page(read) => {
                let fetched = stored.is_some();
                match self.read_page(file.key(), &read, stored) {
                    Ok(raw) => {
                        let PageRead { rows, page, .. } = &read;
                        self.write_rows(fill, file.meta, rows, &raw)?;
                        // Cache the page only if it holds rows this batch did not take (a later
                        // batch may want them), and never as a slice of a fetched body, which
                        // would keep the whole coalesced body alive unaccounted.
                        let rows_left = (rows.items.len() as u64) < file.meta.chunks[rows.pos].pages()[*page].row_count;
                        if rows_left && raw.len() as u64 <= self.sh.allowance / 2 {
                            self.make_room(raw.len() as u64, true)?;
                            let raw = if fetched { Bytes::copy_from_slice(&raw) } else { raw };
                            self.cache.insert((file.frag, file.fi, rows.pos, *page), raw);
                        }
                    }
                    Err(e) if e.is_data_error() => {
                        for &(j, _) in &read.rows.items {
                            fill.fails.push((j, clone_fault(&e)));
                        }
                    }
                    Err(e) => return Err(FillError::Fatal(e)),
                }
            }
            Need::Cached(rows, raw) => {
                self.write_rows(fill, file.meta, &rows, &raw)?;
            }
        }
        Ok(())
    }

    /// One row on its own: positioned read straight into its slot when the layout allows,
    /// else through the scratch buffer (or from fetched bytes).
    fn read_row(&mut self, fill: &mut BatchFill<'_>, key: &str, row: &RowRead, stored: Option<&[u8]>) -> Result<()> {
        let sh = self.sh.clone();
        let (col, j, range) = (row.col, row.j, &row.range);
        let layout = &sh.catalog.columns[col];
        let plan = &fill.plans[col];
        let len = (range.end - range.start) as usize;
        match (stored, plan.direct_range(layout, j)) {
            (Some(bytes), _) => plan.write_row(layout, column_buf(fill.set, col)?, j, bytes),
            (None, Some(dst)) if dst.len() == len => {
                let buf = column_buf(fill.set, col)?;
                let r = sh.fetcher.read_into(key, range.start, &mut buf[dst.clone()], &sh.stopped);
                plan.pad(buf, j, len);
                r.and_then(|()| ColumnPlan::check_direct(layout, buf, dst))
            }
            (None, _) => {
                self.scratch(len)?;
                let mut tmp = std::mem::take(&mut self.scratch);
                let r = sh.fetcher.read_into(key, range.start, &mut tmp[..len], &sh.stopped);
                let r = r.and_then(|()| plan.write_row(layout, column_buf(fill.set, col)?, j, &tmp[..len]));
                self.scratch = tmp;
                r
            }
        }
    }

    /// A page that is exactly one wanted row: read (uncompressed) or decompressed (through
    /// the scratch buffer) straight into the row's slot, then CRC-checked.
    fn read_single(&mut self, fill: &mut BatchFill<'_>, key: &str, single: &SingleRead) -> Result<()> {
        let sh = self.sh.clone();
        let (col, j, block) = (single.col, single.j, &single.block);
        let layout = &sh.catalog.columns[col];
        let plan = &fill.plans[col];
        let check = sh.set.verify;
        let what = || format!("{key}: column {:?} page at {}", layout.name, block.offset);
        let crc_ok = |bytes: &[u8]| verify(block, bytes, check, &what);
        let dst = plan
            .direct_range(layout, j)
            .ok_or_else(|| LoaderError::WorkerPanicked("single-row page without a direct slot".into()))?;
        if block.codec == Codec::None {
            let buf = column_buf(fill.set, col)?;
            let r = sh.fetcher.read_into(key, block.offset, &mut buf[dst.clone()], &sh.stopped);
            let r = r.and_then(|()| crc_ok(&buf[dst.clone()]));
            plan.pad(buf, j, dst.len());
            return r.and_then(|()| ColumnPlan::check_direct(layout, buf, dst));
        }
        let n = block.stored_len as usize;
        self.scratch(n)?;
        let mut tmp = std::mem::take(&mut self.scratch);
        let buf = column_buf(fill.set, col)?;
        let r = sh.fetcher.read_into(key, block.offset, &mut tmp[..n], &sh.stopped).and_then(|()| {
            datafile::decode_block_into(block, &tmp[..n], &mut buf[dst.clone()], check, &what)
                .map_err(|e| from_format(&what(), e))
        });
        self.scratch = tmp;
        plan.pad(buf, j, dst.len());
        r.and_then(|()| ColumnPlan::check_direct(layout, buf, dst))
    }

    /// A whole page, verified and decoded (from fetched bytes, or read now).
    fn read_page(&mut self, key: &str, read: &PageRead, stored: Option<Bytes>) -> Result<Bytes> {
        let sh = self.sh.clone();
        let (col, page, block) = (read.rows.col, read.page, &read.block);
        let check = sh.set.verify;
        let what = || format!("{key}: column {:?} page {page}", sh.catalog.columns[col].name);
        if let Some(bytes) = stored {
            if block.codec == Codec::None {
                // Zero copy: the fetched bytes are the page.
                verify(block, &bytes, check, &what)?;
                return Ok(bytes);
            }
            return decode_page(block, &bytes, check, &what);
        }
        if block.codec == Codec::None {
            // Read straight into the page's own buffer: it becomes the cached raw bytes.
            self.make_room(block.stored_len, true)?;
            let mut v = vec![0u8; block.stored_len as usize];
            sh.fetcher.read_into(key, block.offset, &mut v, &sh.stopped)?;
            verify(block, &v, check, &what)?;
            return Ok(Bytes::from(v));
        }
        let n = block.stored_len as usize;
        self.scratch(n)?;
        let mut tmp = std::mem::take(&mut self.scratch);
        let r = sh
            .fetcher
            .read_into(key, block.offset, &mut tmp[..n], &sh.stopped)
            .and_then(|()| decode_page(block, &tmp[..n], check, &what));
        self.scratch = tmp;
        r
    }

    /// Copies `rows` out of their decoded page `raw` into their slots.
    fn write_rows(&self, fill: &mut BatchFill<'_>, meta: &FileMeta, rows: &PageRows, raw: &[u8]) -> FillResult<()> {
        let layout = &self.sh.catalog.columns[rows.col];
        let chunk = &meta.chunks[rows.pos];
        let plan = &fill.plans[rows.col];
        let buf = column_buf(fill.set, rows.col)?;
        for &(j, phys) in &rows.items {
            let (_, range) = chunk.locate(phys);
            let r = raw
                .get(range)
                .ok_or_else(|| LoaderError::corrupt(&layout.name, "row outside its page"))
                .and_then(|src| plan.write_row(layout, buf, j, src));
            if let Err(e) = r {
                slot_error(&mut fill.fails, j, e)?;
            }
        }
        Ok(())
    }
}
