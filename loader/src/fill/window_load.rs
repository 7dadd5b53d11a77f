//! Block mode: admitting a batch's window fragments in schedule order, and loading a
//! fragment whose turn it is: every page this rank needs from it, read and decoded (one
//! positioned read per page locally, ranged reads per data file from object stores) after
//! its bytes are reserved in the `Shuffle` share.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use tessera::Codec;
use tessera::datafile::Block;

use super::{Worker, decode_page, verify};
use crate::catalog::FileMeta;
use crate::error::Result;
use crate::memory::MemoryUse;
use crate::window::{Admission, Fault, FragmentData, PageMap, WindowCache};

impl Worker {
    /// Admits fragment `f` into the window, loading it if it is this worker's turn.
    pub(super) fn admit(&mut self, window: &WindowCache, f: usize) -> Result<Arc<FragmentData>> {
        let sh = self.sh.clone();
        match window.admit(f, &sh.stopped)? {
            Admission::Ready(d) => Ok(d),
            Admission::Load => match self.load_fragment(window, f) {
                Ok(d) => {
                    let d = Arc::new(d);
                    window.loaded(f, d.clone());
                    Ok(d)
                }
                Err(e) => {
                    window.abandon(f);
                    Err(e)
                }
            },
        }
    }

    /// Reads and decodes every page of fragment `f` this rank needs (one ranged read per
    /// data file), after reserving its bytes in the `Shuffle` share.
    fn load_fragment(&mut self, window: &WindowCache, f: usize) -> Result<FragmentData> {
        let sh = self.sh.clone();
        let entry = &sh.catalog.fragments[f];
        let needed = &sh.needed[f];
        let mut metas: Vec<std::result::Result<Arc<FileMeta>, Fault>> = Vec::with_capacity(entry.files.len());
        for fi in 0..entry.files.len() {
            match sh.catalog.file_meta(f, fi, &sh.fetcher, &sh.acct, sh.meta_cap, &sh.stopped) {
                Ok(m) => metas.push(Ok(m)),
                Err(e) => match Fault::of(&e) {
                    Some(fault) => metas.push(Err(fault)),
                    None => return Err(e),
                },
            }
        }
        // Pages per file and column.
        let mut wanted: Vec<Vec<Vec<usize>>> = Vec::with_capacity(metas.len());
        let mut bytes = 0u64;
        for m in &metas {
            let mut cols = Vec::new();
            if let Ok(meta) = m {
                for chunk in &meta.chunks {
                    let mut pages: Vec<usize> = needed.iter().map(|&r| chunk.page_of(r)).collect();
                    pages.dedup();
                    pages.sort_unstable();
                    pages.dedup();
                    bytes += pages.iter().map(|&p| chunk.pages()[p].block.raw_len).sum::<u64>();
                    cols.push(pages);
                }
            }
            wanted.push(cols);
        }
        let first_need = window.first_need(f);
        let charge = sh.acct.acquire(MemoryUse::Shuffle, bytes, &sh.stopped, &|| first_need <= sh.oldest())?;
        let mut files = Vec::with_capacity(metas.len());
        for (fi, m) in metas.into_iter().enumerate() {
            match m {
                Err(fault) => files.push(Err(fault)),
                Ok(meta) => files.push(Ok(self.load_pages(f, fi, &meta, &wanted[fi])?)),
            }
        }
        Ok(FragmentData { files, _charge: Some(charge) })
    }

    /// Loads the given pages of one data file: decoded bytes or the page's fault.
    fn load_pages(&mut self, f: usize, fi: usize, meta: &FileMeta, wanted: &[Vec<usize>]) -> Result<Vec<PageMap>> {
        let sh = self.sh.clone();
        let key = sh.catalog.fragments[f].files[fi].file.path.clone();
        let mut out: Vec<PageMap> = wanted.iter().map(|_| PageMap::new()).collect();
        let mut list: Vec<(usize, usize, Block)> = Vec::new();
        for (pos, pages) in wanted.iter().enumerate() {
            for &p in pages {
                list.push((pos, p, meta.chunks[pos].pages()[p].block));
            }
        }
        let what = |pos: usize, p: usize| format!("{key}: projected column #{pos} page {p}");
        if sh.fetcher.is_local() {
            for (pos, p, block) in list {
                let raw = if block.codec == Codec::None {
                    self.make_room(0, true)?;
                    let mut v = vec![0u8; block.stored_len as usize];
                    sh.fetcher.read_into(&key, block.offset, &mut v, &sh.stopped)?;
                    verify(&block, &v, sh.set.verify, &|| what(pos, p)).map(|()| Bytes::from(v))
                } else {
                    let n = block.stored_len as usize;
                    self.scratch(n)?;
                    let mut stored = std::mem::take(&mut self.scratch);
                    let r = sh.fetcher.read_into(&key, block.offset, &mut stored[..n], &sh.stopped);
                    let decoded = r.and_then(|()| {
                        decode_page(&meta.chunks[pos], p, &stored[..n], sh.set.verify, &|| what(pos, p))
                    });
                    self.scratch = stored;
                    decoded
                };
                record_page(&mut out[pos], p, raw)?;
            }
        } else {
            for chunk in self.chunked(&list.iter().map(|(_, _, b)| b.range()).collect::<Vec<_>>()) {
                let ranges: Vec<Range<u64>> = chunk.clone().map(|k| list[k].2.range()).collect();
                self.begin_inflight(ranges.iter().map(|r| r.end - r.start).sum())?;
                let got = sh.fetcher.fetch(&key, &ranges, &sh.stopped)?;
                for (k, stored) in chunk.zip(got) {
                    let (pos, p, _) = list[k];
                    let raw = decode_page(&meta.chunks[pos], p, &stored, sh.set.verify, &|| what(pos, p));
                    record_page(&mut out[pos], p, raw)?;
                }
            }
            self.end_inflight();
        }
        Ok(out)
    }
}

/// Records a page's decoded bytes, or its data fault; any other error fails the load.
fn record_page(map: &mut PageMap, p: usize, raw: Result<Bytes>) -> Result<()> {
    match raw {
        Ok(b) => {
            map.insert(p, Ok(b));
            Ok(())
        }
        Err(e) => match Fault::of(&e) {
            Some(fault) => {
                map.insert(p, Err(fault));
                Ok(())
            }
            None => Err(e),
        },
    }
}
