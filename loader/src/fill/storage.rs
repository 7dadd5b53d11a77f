//! The rows of a batch that the block window does not hold, read from storage. Per data
//! file, its slots become needs in serving order: a row on its own (uncompressed, checksums
//! off), a page that is exactly one row, a whole page (verified, decoded, rows copied out,
//! cached for later batches), or a page already cached. A local file serves them with
//! positioned reads (straight into the slot where the layout allows); object-store files
//! fetch theirs with coalesced range GETs in waves, about one round trip per batch, their
//! bodies landing in the slots (rows, single-row pages) or in the worker's staging arena.

use std::ops::Range;

use bytes::Bytes;
use tessera::Codec;
use tessera::datafile::Block;

use super::{
    BatchFill, FileRef, FillError, FillResult, Worker, clone_fault, column_buf, decode_page, slot_error, verify,
};
use crate::assemble::ColumnPlan;
use crate::catalog::FileMeta;
use crate::error::{LoaderError, Result, from_format};
use crate::source::{Dest, Fetcher, RangeRequest};

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
    /// The column's position in its data file and the page's index there.
    pos: usize,
    page: usize,
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

    /// The stored block the need reads whole (its bytes can be verified as they land).
    fn block(&self) -> Option<&Block> {
        match self {
            Need::Single(SingleRead { block, .. }) | Need::Page(PageRead { block, .. }) => Some(block),
            Need::Row(_) | Need::Cached(..) => None,
        }
    }
}

/// An object-store data file a batch reads from, and what to serve from it (in order).
pub(super) struct RemoteFile<'a> {
    file: FileRef<'a>,
    needs: Vec<Option<Need>>,
}

/// Where the stored bytes of one need land.
#[derive(Clone, Debug)]
enum Land {
    /// Straight in the row's slot of column `col`'s buffer (`Slot(col, bytes of the buffer)`).
    Slot(usize, Range<usize>),
    /// In the worker's staging arena (these bytes of it, once the wave is laid out).
    Arena(Range<usize>),
}

/// A need of a remote file with a stored range: file, need, range, landing place.
#[derive(Clone, Debug)]
struct Planned {
    file: usize,
    need: usize,
    range: Range<u64>,
    land: Land,
}

/// Splits `buf` into the disjoint pieces `wants` name (ascending, non-overlapping once sorted)
/// and puts each into `out` at the want's id.
fn carve<'b>(buf: &'b mut [u8], mut wants: Vec<(usize, Range<usize>)>, out: &mut [Option<&'b mut [u8]>]) -> Result<()> {
    wants.sort_by_key(|w| (w.1.start, w.1.end));
    let mut rest = buf;
    let mut base = 0usize;
    for (id, r) in wants {
        if r.start < base || r.end - base > rest.len() {
            return Err(LoaderError::WorkerPanicked(format!("landing range {r:?} overlaps or leaves its buffer")));
        }
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(r.start - base);
        let (mine, tail) = tail.split_at_mut(r.end - r.start);
        out[id] = Some(mine);
        rest = tail;
        base = r.end;
    }
    Ok(())
}

/// Runs a wave's `requests`, each on its file's `fetchers` entry: all together when they
/// share one (a lone source), else one group per source, in turn. Keeps the requests' order.
fn run_by_source<'a>(
    requests: &mut Vec<RangeRequest<'a>>,
    fetchers: &[&Fetcher],
    max_requests: usize,
    stopped: &std::sync::atomic::AtomicBool,
) -> Result<()> {
    let Some(&first) = fetchers.first() else { return Ok(()) };
    if fetchers.iter().all(|f| std::ptr::eq(*f, first)) {
        return first.run_requests(requests, max_requests, stopped);
    }
    let mut pending: Vec<(usize, RangeRequest<'a>)> = requests.drain(..).enumerate().collect();
    let mut done: Vec<(usize, RangeRequest<'a>)> = Vec::with_capacity(pending.len());
    while let Some(&(lead_at, _)) = pending.first() {
        let lead = fetchers[lead_at];
        let (mine, others): (Vec<_>, Vec<_>) = pending.into_iter().partition(|(i, _)| std::ptr::eq(fetchers[*i], lead));
        let (idx, mut group): (Vec<usize>, Vec<RangeRequest<'a>>) = mine.into_iter().unzip();
        lead.run_requests(&mut group, max_requests, stopped)?;
        done.extend(idx.into_iter().zip(group));
        pending = others;
    }
    done.sort_by_key(|(i, _)| *i);
    requests.extend(done.into_iter().map(|(_, q)| q));
    Ok(())
}

impl Worker {
    /// An object-store data file to serve slots `js` of `file` from.
    pub(super) fn remote_file<'a>(&mut self, fill: &BatchFill<'_>, file: FileRef<'a>, js: &[usize]) -> RemoteFile<'a> {
        RemoteFile { file, needs: self.direct_needs(fill, file, js).into_iter().map(Some).collect() }
    }

    /// What serving slots `js` from `file` takes: rows, pages and cached pages, in the order
    /// they are served.
    fn direct_needs(&mut self, fill: &BatchFill<'_>, file: FileRef<'_>, js: &[usize]) -> Vec<Need> {
        let sh = self.sh.clone();
        let cat = &sh.catalog;
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
                } else if let Some(raw) = sh.set.pages.get((file.frag, file.fi, pos, page)) {
                    needs.push(Need::Cached(PageRows { pos, col, items: group }, raw));
                } else if group.len() == 1
                    && chunk.pages()[page].row_count == 1
                    && fill.plans[col].direct_range(layout, group[0].0).is_some_and(|d| d.len() as u64 == block.raw_len)
                {
                    needs.push(Need::Single(SingleRead { col, j: group[0].0, pos, page, block }));
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

    /// Serves the object-store files of a batch. Every need with a stored range gets a
    /// landing place: a row (or a single-row uncompressed page) straight in its slot of the
    /// batch buffer, anything else (whole pages, compressed pages) in the worker's reused
    /// staging arena. Needs are taken in waves whose staged bytes fit the request limit
    /// (usually one wave per batch); within a wave, each file's ranges are sorted by offset
    /// and neighbours closer than the coalescing gap (`Fetcher::gap_bytes`: the idle round
    /// trip × the rate one request in flight gets, or
    /// `coalesce_gap_bytes`; unbounded while the store answers with local file handles,
    /// whose gaps are never read) share one range GET, and all the wave's GETs go out
    /// together, at most `max_requests_in_flight` at a time: a batch costs about one round
    /// trip.
    pub(super) fn fill_remote(&mut self, fill: &mut BatchFill<'_>, mut files: Vec<RemoteFile<'_>>) -> FillResult<()> {
        let sh = self.sh.clone();
        // A wave's staged bytes come from the epoch's shared staging pool.
        let limit = sh.set.max_fetch.min(sh.set.staging.cap()).max(1);
        // (gap, span): ranges closer than `gap` share a GET of at most `span` bytes; with
        // free gaps (local file bodies) a file's ranges of a wave are one GET.
        let (gap, span) = match sh.set.coalesce_gap {
            Some(gap) => (gap.min(limit), limit),
            None if sh.fetcher.link.gaps_free() => (u64::MAX, u64::MAX),
            None => (sh.fetcher.gap_bytes().min(limit), limit),
        };
        let mut planned: Vec<Planned> = Vec::new();
        for (f, rf) in files.iter().enumerate() {
            for (n, need) in rf.needs.iter().enumerate() {
                if let Some(need) = need
                    && let Some(range) = need.range()
                {
                    let land = self.landing(fill, need, &range);
                    planned.push(Planned { file: f, need: n, range, land });
                }
            }
        }
        planned.sort_by_key(|p| (p.file, p.range.start, p.range.end));
        // Waves: consecutive needs whose staged bytes fit the limit (a larger one alone).
        let mut start = 0;
        while start < planned.len() {
            let mut staged = 0usize;
            let mut end = start;
            while end < planned.len() {
                if let Land::Arena(r) = &planned[end].land {
                    let n = r.end - r.start;
                    if end > start && (staged + n) as u64 > limit {
                        break;
                    }
                    planned[end].land = Land::Arena(staged..staged + n);
                    staged += n;
                }
                end += 1;
            }
            let wave = &planned[start..end];
            start = end;
            let mut lent = if staged > 0 { Some(sh.set.staging.take(staged, &sh.stopped)?) } else { None };
            let arena: &mut [u8] = lent.as_mut().map_or(&mut [][..], |b| b.bytes_mut());
            let verified = self.run_wave(fill, &files, wave, arena, gap, span)?;
            let mut order: Vec<(&Planned, bool)> = wave.iter().zip(verified).collect();
            order.sort_by_key(|(p, _)| (p.file, p.need));
            for (p, verified) in order {
                let rf = &mut files[p.file];
                let Some(need) = rf.needs[p.need].take() else { continue };
                self.serve_landed(fill, rf.file, need, &p.land, arena, verified)?;
            }
            drop(lent);
        }
        for rf in &mut files {
            for need in rf.needs.iter_mut().filter_map(Option::take) {
                self.serve(fill, rf.file, need, None)?; // cached pages
            }
        }
        self.account();
        Ok(())
    }

    /// Where a need's stored bytes land (an arena need's range is its length until the wave
    /// is laid out).
    fn landing(&self, fill: &BatchFill<'_>, need: &Need, range: &Range<u64>) -> Land {
        let len = (range.end - range.start) as usize;
        let slot = |col: usize, j: usize| {
            let layout = &self.sh.catalog.columns[col];
            fill.plans[col].direct_range(layout, j).filter(|d| d.len() == len).map(|d| Land::Slot(col, d))
        };
        let direct = match need {
            Need::Row(row) => slot(row.col, row.j),
            Need::Single(single) if single.block.codec == Codec::None => slot(single.col, single.j),
            _ => None,
        };
        direct.unwrap_or(Land::Arena(0..len))
    }

    /// Fetches one wave: carves the landing places out of the batch buffers and `arena` (the
    /// wave's staging buffer), coalesces each file's ranges into range GETs and runs them.
    /// With checksums on, a need's block is verified as it lands; returns, per need of the
    /// wave, whether it passed then.
    fn run_wave(
        &mut self,
        fill: &mut BatchFill<'_>,
        files: &[RemoteFile<'_>],
        wave: &[Planned],
        arena: &mut [u8],
        gap: u64,
        span: u64,
    ) -> FillResult<Vec<bool>> {
        let sh = self.sh.clone();
        let r = (|| -> Result<Vec<bool>> {
            let mut dests: Vec<Option<&mut [u8]>> = (0..wave.len()).map(|_| None).collect();
            let mut by_col: Vec<Vec<(usize, Range<usize>)>> = vec![Vec::new(); fill.plans.len()];
            let mut in_arena = Vec::new();
            for (i, p) in wave.iter().enumerate() {
                match &p.land {
                    Land::Slot(c, d) => by_col[*c].push((i, d.clone())),
                    Land::Arena(r) => in_arena.push((i, r.clone())),
                }
            }
            let bufs = fill
                .set
                .all_fill_bytes(&|c| by_col.get(c).is_some_and(|w| !w.is_empty()))
                .map_err(|c| LoaderError::WorkerPanicked(format!("column {c}'s buffer is missing or shared")))?;
            for (buf, wants) in bufs.into_iter().zip(by_col) {
                if !wants.is_empty() {
                    carve(buf, wants, &mut dests)?;
                }
            }
            carve(arena, in_arena, &mut dests)?;
            let mut requests: Vec<RangeRequest<'_>> = Vec::new();
            // The storage of each request's file (a mixture's sources have their own).
            let mut fetchers: Vec<&Fetcher> = Vec::new();
            // The wave index of each destination, in request order.
            let mut tags: Vec<usize> = Vec::new();
            let mut last_file = usize::MAX;
            for (i, (p, dest)) in wave.iter().zip(dests).enumerate() {
                let dest = dest.ok_or_else(|| LoaderError::WorkerPanicked("a need has no landing place".into()))?;
                if p.range.is_empty() {
                    continue; // an empty block needs no request
                }
                let key = files[p.file].file.key();
                let joins = last_file == p.file
                    && requests.last().is_some_and(|q| {
                        p.range.start <= q.range.end.saturating_add(gap)
                            && p.range.end.max(q.range.end) - q.range.start <= span
                    });
                if !joins {
                    requests.push(RangeRequest { key, range: p.range.clone(), dests: Vec::new() });
                    fetchers.push(files[p.file].file.fetcher);
                    last_file = p.file;
                }
                let q = requests.last_mut().ok_or_else(|| LoaderError::WorkerPanicked("no request".into()))?;
                q.range.end = q.range.end.max(p.range.end);
                let check =
                    if sh.set.verify { files[p.file].needs[p.need].as_ref().and_then(Need::block) } else { None };
                q.dests.push(Dest { check, ..Dest::new(p.range.start - q.range.start, dest) });
                tags.push(i);
            }
            run_by_source(&mut requests, &fetchers, sh.set.max_requests, &sh.stopped)?;
            let mut verified = vec![false; wave.len()];
            for (d, &i) in requests.iter().flat_map(|q| &q.dests).zip(&tags) {
                verified[i] = d.verified;
            }
            Ok(verified)
        })();
        r.map_err(FillError::Fatal)
    }

    /// Serves a need whose stored bytes have landed (in its slot or in the wave's `arena`);
    /// `verified` when their checksum passed as they landed.
    fn serve_landed(
        &mut self,
        fill: &mut BatchFill<'_>,
        file: FileRef<'_>,
        need: Need,
        land: &Land,
        arena: &[u8],
        verified: bool,
    ) -> FillResult<()> {
        let sh = self.sh.clone();
        let check = sh.set.verify && !verified;
        match (need, land) {
            (Need::Row(row), Land::Slot(_, dst)) => {
                let layout = &sh.catalog.columns[row.col];
                let buf = column_buf(fill.set, row.col)?;
                fill.plans[row.col].pad(buf, row.j, dst.len());
                if let Err(e) = ColumnPlan::check_direct(layout, buf, dst.clone()) {
                    slot_error(&mut fill.fails, row.j, e)?;
                }
            }
            (Need::Row(row), Land::Arena(r)) => {
                let layout = &sh.catalog.columns[row.col];
                let buf = column_buf(fill.set, row.col)?;
                if let Err(e) = fill.plans[row.col].write_row(layout, buf, row.j, &arena[r.clone()]) {
                    slot_error(&mut fill.fails, row.j, e)?;
                }
            }
            (Need::Single(single), land) => {
                let (col, j, block) = (single.col, single.j, &single.block);
                let layout = &sh.catalog.columns[col];
                let plan = &fill.plans[col];
                let what = || format!("{}: column {:?} page at {}", file.key(), layout.name, block.offset);
                let dst = plan
                    .direct_range(layout, j)
                    .ok_or_else(|| LoaderError::WorkerPanicked("single-row page without a direct slot".into()))?;
                let buf = column_buf(fill.set, col)?;
                let r = match land {
                    Land::Slot(..) => verify(block, &buf[dst.clone()], check, &what),
                    Land::Arena(r) => file.meta.chunks[single.pos]
                        .decode_page_into(single.page, &arena[r.clone()], &mut buf[dst.clone()], check, &what)
                        .map_err(|e| from_format(&what(), e)),
                };
                plan.pad(buf, j, dst.len());
                if let Err(e) = r.and_then(|()| ColumnPlan::check_direct(layout, buf, dst)) {
                    slot_error(&mut fill.fails, j, e)?;
                }
            }
            (Need::Page(read), Land::Arena(r)) => {
                let PageRead { rows, page, block } = &read;
                let what = || format!("{}: column {:?} page {page}", file.key(), sh.catalog.columns[rows.col].name);
                let stored = &arena[r.clone()];
                let decoded = if block.codec == Codec::None {
                    verify(block, stored, check, &what).map(|()| None)
                } else {
                    decode_page(&file.meta.chunks[rows.pos], *page, stored, check, &what).map(Some)
                };
                match decoded {
                    Ok(owned) => {
                        let raw: &[u8] = owned.as_deref().unwrap_or(stored);
                        self.write_rows(fill, file.meta, rows, raw)?;
                        // Cache the page only if it holds rows this batch did not take (a later
                        // batch may want them), as a copy: the arena is reused.
                        let rows_left = (rows.items.len() as u64) < file.meta.chunks[rows.pos].pages()[*page].row_count;
                        if rows_left && raw.len() as u64 <= sh.set.pages.max_page() {
                            let raw = owned.unwrap_or_else(|| Bytes::copy_from_slice(stored));
                            sh.set.pages.insert((file.frag, file.fi, rows.pos, *page), raw);
                        }
                    }
                    Err(e) if e.is_data_error() => {
                        for &(j, _) in &rows.items {
                            fill.fails.push((j, clone_fault(&e)));
                        }
                    }
                    Err(e) => return Err(FillError::Fatal(e)),
                }
            }
            (Need::Cached(rows, raw), _) => self.write_rows(fill, file.meta, &rows, &raw)?,
            (Need::Page(_), Land::Slot(..)) => {
                return Err(FillError::Fatal(LoaderError::WorkerPanicked("a whole page landed in a slot".into())));
            }
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
                if let Err(e) = self.read_row(fill, file, &row, stored.as_deref()) {
                    slot_error(&mut fill.fails, row.j, e)?;
                }
            }
            Need::Single(single) => {
                if let Err(e) = self.read_single(fill, file, &single) {
                    slot_error(&mut fill.fails, single.j, e)?;
                }
            }
            Need::Page(read) => {
                let fetched = stored.is_some();
                match self.read_page(file, &read, stored) {
                    Ok(raw) => {
                        let PageRead { rows, page, .. } = &read;
                        self.write_rows(fill, file.meta, rows, &raw)?;
                        // Cache the page only if it holds rows this batch did not take (a later
                        // batch may want them), and never as a slice of a fetched body, which
                        // would keep the whole coalesced body alive unaccounted.
                        let rows_left = (rows.items.len() as u64) < file.meta.chunks[rows.pos].pages()[*page].row_count;
                        if rows_left && raw.len() as u64 <= self.sh.set.pages.max_page() {
                            let raw = if fetched { Bytes::copy_from_slice(&raw) } else { raw };
                            self.sh.set.pages.insert((file.frag, file.fi, rows.pos, *page), raw);
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
    fn read_row(
        &mut self,
        fill: &mut BatchFill<'_>,
        file: FileRef<'_>,
        row: &RowRead,
        stored: Option<&[u8]>,
    ) -> Result<()> {
        let sh = self.sh.clone();
        let key = file.key();
        let (col, j, range) = (row.col, row.j, &row.range);
        let layout = &sh.catalog.columns[col];
        let plan = &fill.plans[col];
        let len = (range.end - range.start) as usize;
        match (stored, plan.direct_range(layout, j)) {
            (Some(bytes), _) => plan.write_row(layout, column_buf(fill.set, col)?, j, bytes),
            (None, Some(dst)) if dst.len() == len => {
                let buf = column_buf(fill.set, col)?;
                let r = file.fetcher.read_into(key, range.start, &mut buf[dst.clone()], &sh.stopped);
                plan.pad(buf, j, len);
                r.and_then(|()| ColumnPlan::check_direct(layout, buf, dst))
            }
            (None, _) => {
                self.scratch(len)?;
                let mut tmp = std::mem::take(&mut self.scratch);
                let r = file.fetcher.read_into(key, range.start, &mut tmp[..len], &sh.stopped);
                let r = r.and_then(|()| plan.write_row(layout, column_buf(fill.set, col)?, j, &tmp[..len]));
                self.scratch = tmp;
                r
            }
        }
    }

    /// A page that is exactly one wanted row: read (uncompressed) or decompressed (through
    /// the scratch buffer) straight into the row's slot, then CRC-checked.
    fn read_single(&mut self, fill: &mut BatchFill<'_>, file: FileRef<'_>, single: &SingleRead) -> Result<()> {
        let sh = self.sh.clone();
        let key = file.key();
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
            let r = file.fetcher.read_into(key, block.offset, &mut buf[dst.clone()], &sh.stopped);
            let r = r.and_then(|()| crc_ok(&buf[dst.clone()]));
            plan.pad(buf, j, dst.len());
            return r.and_then(|()| ColumnPlan::check_direct(layout, buf, dst));
        }
        let n = block.stored_len as usize;
        self.scratch(n)?;
        let mut tmp = std::mem::take(&mut self.scratch);
        let buf = column_buf(fill.set, col)?;
        let r = file.fetcher.read_into(key, block.offset, &mut tmp[..n], &sh.stopped).and_then(|()| {
            file.meta.chunks[single.pos]
                .decode_page_into(single.page, &tmp[..n], &mut buf[dst.clone()], check, &what)
                .map_err(|e| from_format(&what(), e))
        });
        self.scratch = tmp;
        plan.pad(buf, j, dst.len());
        r.and_then(|()| ColumnPlan::check_direct(layout, buf, dst))
    }

    /// A whole page, verified and decoded (from fetched bytes, or read now).
    fn read_page(&mut self, file: FileRef<'_>, read: &PageRead, stored: Option<Bytes>) -> Result<Bytes> {
        let sh = self.sh.clone();
        let (key, chunk) = (file.key(), &file.meta.chunks[read.rows.pos]);
        let (col, page, block) = (read.rows.col, read.page, &read.block);
        let check = sh.set.verify;
        let what = || format!("{key}: column {:?} page {page}", sh.catalog.columns[col].name);
        if let Some(bytes) = stored {
            if block.codec == Codec::None {
                // Zero copy: the fetched bytes are the page.
                verify(block, &bytes, check, &what)?;
                return Ok(bytes);
            }
            return decode_page(chunk, page, &bytes, check, &what);
        }
        if block.codec == Codec::None {
            // Read straight into the page's own buffer: it becomes the cached raw bytes.
            self.within_allowance(block.stored_len)?;
            let mut v = vec![0u8; block.stored_len as usize];
            file.fetcher.read_into(key, block.offset, &mut v, &sh.stopped)?;
            verify(block, &v, check, &what)?;
            return Ok(Bytes::from(v));
        }
        let n = block.stored_len as usize;
        self.scratch(n)?;
        let mut tmp = std::mem::take(&mut self.scratch);
        let r = file
            .fetcher
            .read_into(key, block.offset, &mut tmp[..n], &sh.stopped)
            .and_then(|()| decode_page(chunk, page, &tmp[..n], check, &what));
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
