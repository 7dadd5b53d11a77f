//! Token packing: a ragged token column's documents, in the loader's order, packed back to
//! back into fixed `[windows, context]` batches for language-model pretraining.
//!
//! Documents are taken in this rank's order (any shuffle mode, a view, a mixture) and their
//! tokens copied into windows of `context` tokens. With `split_documents` (the default) a
//! document that does not fit continues in the next window, so no window is padded until the
//! epoch's tokens run out; otherwise a document that would not fit starts the next window
//! (documents longer than a window are still split). Every piece of a document in a window is
//! a *segment*: `segment_ids` number them 1, 2, … within each window (0 marks padding) and
//! `position_ids` restart at 0 at each segment, which is what block-diagonal attention
//! (a mask from equal segment ids, or `cu_seqlens` from their boundaries) needs.
//!
//! Every token of every document this rank reads in an epoch is emitted exactly once; the
//! loader's padding rows (the repeated rows that fill its last batch) are not packed. The
//! state ([`PackState`]) is the loader's state before the document batch being consumed plus
//! the tokens of it already emitted: constant size, and a resume yields exactly the packed
//! batches that would have followed. Ranks pack their own shards, so their window counts can
//! differ by a few at the end of an epoch; [`Packer::stream`] packs epoch after epoch without
//! stopping there, so a DDP loop that trains by steps always finds a batch on every rank.

use std::sync::Arc;

use crate::assemble::Elem;
use crate::batch::{HostBatch, HostLayout};
use crate::buffer::{AlignedBuffer, HostBuffer};
use crate::error::{LoaderError, Result};
use crate::loader::{EpochIter, Loader};
use crate::sampler::LoaderState;

/// How to pack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackConfig {
    /// The token column: one ragged dim (`shape [None]`), read with
    /// [`RaggedLayout::Packed`](crate::RaggedLayout).
    pub column: String,
    /// Tokens per window.
    pub context: usize,
    /// Windows per packed batch.
    pub windows: usize,
    /// Continue a document that does not fit in the next window (no padding); `false`
    /// starts the next window instead (documents stay whole where they fit).
    pub split_documents: bool,
}

impl PackConfig {
    /// Packs `column` into batches of `windows` windows of `context` tokens, splitting
    /// documents across windows.
    #[must_use]
    pub fn new(column: impl Into<String>, context: usize, windows: usize) -> Self {
        Self { column: column.into(), context, windows, split_documents: true }
    }
}

/// One piece of a document in a packed batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The window.
    pub window: usize,
    /// The piece's first token's index in the window.
    pub start: usize,
    /// Tokens.
    pub len: usize,
    /// The document's row (of its source's version).
    pub row: u64,
    /// The document's mixture source (0 for one dataset).
    pub source: u32,
    /// The piece's first token's offset in its document.
    pub doc_offset: usize,
}

/// A packed batch: `[windows, context]` tokens with their segments and positions.
#[derive(Clone, Debug)]
pub struct PackedBatch {
    /// The tokens' element type (the column's).
    pub elem: Elem,
    /// Windows × context tokens, row-major little-endian bytes (padding is zeros).
    pub tokens: Vec<u8>,
    /// Per token: its segment within its window (1, 2, …), 0 for padding.
    pub segment_ids: Vec<i32>,
    /// Per token: its offset in its segment (0 for padding).
    pub position_ids: Vec<i32>,
    /// Windows in the batch.
    pub windows: usize,
    /// Tokens per window.
    pub context: usize,
    /// Tokens that are not padding.
    pub real_tokens: usize,
    /// The document pieces, window by window.
    pub pieces: Vec<Piece>,
}

/// Where a packer stands: the loader's state before the document batch being consumed, and
/// the tokens of that batch already emitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackState {
    /// The loader's state before the batch of documents being consumed.
    pub loader: LoaderState,
    /// Tokens of that batch (its documents' tokens back to back, padding rows excluded)
    /// already emitted.
    pub tokens: u64,
}

/// The documents of one loader batch being consumed.
#[derive(Debug)]
struct Docs<B: HostBuffer> {
    /// The batch, whose packed buffer holds the documents' tokens back to back (copied from
    /// there straight into the windows).
    batch: Option<HostBatch<B>>,
    /// Token offset where each document starts in that buffer, and the end.
    starts: Vec<usize>,
    rows: Vec<u64>,
    sources: Vec<u32>,
    /// The next document, and its tokens already taken.
    doc: usize,
    within: usize,
    /// Tokens taken from this batch.
    taken: u64,
}

impl<B: HostBuffer> Default for Docs<B> {
    fn default() -> Self {
        Self { batch: None, starts: Vec::new(), rows: Vec::new(), sources: Vec::new(), doc: 0, within: 0, taken: 0 }
    }
}

impl<B: HostBuffer> Docs<B> {
    fn remaining(&self) -> usize {
        self.starts[self.doc + 1] - self.starts[self.doc] - self.within
    }

    fn exhausted(&self) -> bool {
        self.doc + 1 >= self.starts.len()
    }

    /// Skips `n` tokens (a resume), returning whether the batch held that many.
    fn skip(&mut self, mut n: u64) -> bool {
        while n > 0 && !self.exhausted() {
            let k = (self.remaining() as u64).min(n);
            self.advance(k as usize);
            n -= k;
        }
        n == 0
    }

    fn advance(&mut self, n: usize) {
        self.within += n;
        self.taken += n as u64;
        while !self.exhausted() && self.remaining() == 0 {
            self.doc += 1;
            self.within = 0;
        }
    }
}

/// Packs one epoch of a loader's documents into [`PackedBatch`]es (an `Iterator`).
#[derive(Debug)]
pub struct Packer<B: HostBuffer = AlignedBuffer> {
    /// The epoch being read (`None` only while a stream moves to its next epoch).
    iter: Option<EpochIter<B>>,
    /// A stream's loader: at an epoch's end the next epoch starts and packing goes on.
    stream: Option<Arc<Loader<B>>>,
    config: PackConfig,
    column: usize,
    elem: Elem,
    /// Rows of the epoch's order: later positions are the loader's padding.
    rows_n: u64,
    docs: Docs<B>,
    /// The loader's state before `docs`' batch.
    docs_state: LoaderState,
    done: bool,
}

impl<B: HostBuffer> Packer<B> {
    /// Packs `epoch` of `loader` from its beginning.
    ///
    /// # Errors
    /// [`LoaderError::Config`] for a bad configuration or a column that is not one ragged
    /// dim read packed; as [`Loader::epoch`].
    pub fn epoch(loader: &Loader<B>, config: PackConfig, epoch: u64) -> Result<Self> {
        let column = Self::check(loader, &config)?;
        Ok(Self::start(loader.epoch(epoch)?, config, column))
    }

    /// Continues from `state` ([`Packer::state`]), yielding exactly the packed batches that
    /// would have followed it.
    ///
    /// # Errors
    /// As [`Packer::epoch`] and [`Loader::resume`]; [`LoaderError::Resume`] when the state's
    /// token count exceeds its batch.
    pub fn resume(loader: &Loader<B>, config: PackConfig, state: &PackState) -> Result<Self> {
        let column = Self::check(loader, &config)?;
        let mut packer = Self::start(loader.resume(&state.loader)?, config, column);
        packer.skip_emitted(state.tokens)?;
        Ok(packer)
    }

    /// Packs epoch after epoch from `epoch` on, without padding at epoch ends: the windows
    /// run on from one epoch's documents into the next's, for training by steps. Every rank
    /// then yields as many batches as it is asked for (a DDP loop runs a fixed number of
    /// steps), and the state resumes anywhere, also across an epoch's end.
    ///
    /// # Errors
    /// As [`Packer::epoch`].
    pub fn stream(loader: Arc<Loader<B>>, config: PackConfig, epoch: u64) -> Result<Self> {
        let mut packer = Self::epoch(&loader, config, epoch)?;
        packer.stream = Some(loader);
        Ok(packer)
    }

    /// As [`Packer::resume`], continuing a stream ([`Packer::stream`]).
    ///
    /// # Errors
    /// As [`Packer::resume`].
    pub fn resume_stream(loader: Arc<Loader<B>>, config: PackConfig, state: &PackState) -> Result<Self> {
        let column = Self::check(&loader, &config)?;
        let mut packer = Self::start(loader.resume(&state.loader)?, config, column);
        packer.stream = Some(loader);
        packer.skip_emitted(state.tokens)?;
        Ok(packer)
    }

    /// Skips the tokens of the first batch a resumed packer had already emitted.
    fn skip_emitted(&mut self, tokens: u64) -> Result<()> {
        if tokens > 0 {
            if !self.pull()? || !self.docs.skip(tokens) {
                return Err(LoaderError::Resume(format!(
                    "the packing state skips {tokens} tokens of a batch that holds fewer"
                )));
            }
            if self.docs.exhausted() {
                self.docs_state = self.epoch_state()?;
                self.docs = Docs::default();
            }
        }
        Ok(())
    }

    /// The token column's position in the projection, after checking `config`.
    fn check(loader: &Loader<B>, config: &PackConfig) -> Result<usize> {
        if config.context == 0 || config.windows == 0 {
            return Err(LoaderError::config("packing needs a context and windows per batch of at least 1"));
        }
        if i32::try_from(config.context).is_err() {
            return Err(LoaderError::config("the packing context must fit in i32 positions"));
        }
        (loader.column_names().iter().position(|c| *c == config.column))
            .ok_or_else(|| LoaderError::config(format!("packing: column {:?} is not projected", config.column)))
    }

    fn start(iter: EpochIter<B>, config: PackConfig, column: usize) -> Self {
        let rows_n = iter.plan().rows();
        let docs_state = iter.state();
        // The element type is the column's, read from each batch before any token is packed.
        let elem = Elem::U8;
        Self {
            iter: Some(iter),
            stream: None,
            config,
            column,
            elem,
            rows_n,
            docs: Docs::default(),
            docs_state,
            done: false,
        }
    }

    /// The state after the packed batches yielded so far.
    #[must_use]
    pub fn state(&self) -> PackState {
        if self.docs.exhausted() {
            PackState {
                loader: self.iter.as_ref().map_or_else(|| self.docs_state.clone(), EpochIter::state),
                tokens: 0,
            }
        } else {
            PackState { loader: self.docs_state.clone(), tokens: self.docs.taken }
        }
    }

    /// Takes the next loader batch with documents into `docs`; `false` at the epoch's end.
    fn pull(&mut self) -> Result<bool> {
        loop {
            let state = self.epoch_state()?;
            let it = self.iter.as_mut().ok_or_else(|| LoaderError::config("the packer's epoch could not start"))?;
            let Some(batch) = it.next() else {
                let Some(loader) = self.stream.clone() else { return Ok(false) };
                // A stream: the next epoch continues the windows (one epoch runs at a time).
                let next = it.epoch() + 1;
                self.iter = None;
                let it = loader.epoch(next)?;
                self.rows_n = it.plan().rows();
                self.iter = Some(it);
                continue;
            };
            let batch = batch?;
            self.load(batch)?;
            self.docs_state = state;
            if !self.docs.exhausted() {
                return Ok(true);
            }
        }
    }

    /// The epoch's state after the batches taken so far.
    fn epoch_state(&self) -> Result<LoaderState> {
        self.iter
            .as_ref()
            .map(EpochIter::state)
            .ok_or_else(|| LoaderError::config("the packer's epoch could not start"))
    }

    /// Takes the real (not padding) documents of `batch` as `docs` (their tokens stay in the
    /// batch's buffer).
    fn load(&mut self, batch: HostBatch<B>) -> Result<()> {
        let col = &batch.columns[self.column];
        let bad = |m: &str| LoaderError::config(format!("packing column {:?}: {m}", col.name));
        let offsets = match &col.layout {
            HostLayout::Packed { ragged_dims: 1, offsets, .. } if !col.text && col.shape.len() == 1 => offsets,
            _ => return Err(bad("needs a one-dimensional ragged column read packed (RaggedLayout::Packed)")),
        };
        let real = (self.rows_n.saturating_sub(batch.position)).min(batch.rows.len() as u64) as usize;
        let end = offsets.get(real).map_or(0, |&o| o.max(0) as usize) * col.elem.size();
        let readable = batch.with_buffer(self.column, |b| b.bytes().map(|bytes| bytes.len() >= end));
        match readable {
            Some(Some(true)) => {}
            Some(Some(false)) => return Err(bad("offsets past the buffer")),
            _ => return Err(bad("the adapter's buffers cannot be read on the host")),
        }
        self.elem = col.elem;
        let docs = &mut self.docs;
        docs.starts.clear();
        docs.starts.extend(offsets[..=real].iter().map(|&o| o.max(0) as usize));
        docs.rows.clear();
        docs.rows.extend_from_slice(&batch.rows[..real]);
        docs.sources.clear();
        docs.sources.extend((0..real).map(|j| batch.sources.get(j).copied().unwrap_or(0)));
        (docs.doc, docs.within, docs.taken) = (0, 0, 0);
        docs.batch = Some(batch);
        // Empty documents carry no token: step over them.
        while !docs.exhausted() && docs.remaining() == 0 {
            docs.doc += 1;
        }
        Ok(())
    }

    fn next_batch(&mut self) -> Result<Option<PackedBatch>> {
        if self.done {
            return Ok(None);
        }
        let (c, w) = (self.config.context, self.config.windows);
        let mut out: Option<PackedBatch> = None;
        for window in 0..w {
            let mut fill = 0usize;
            let mut segment = 0i32;
            while fill < c {
                if self.docs.exhausted() && !self.pull()? {
                    self.done = true;
                    break;
                }
                let remaining = self.docs.remaining();
                if !self.config.split_documents
                    && fill > 0
                    && self.docs.within == 0
                    && remaining > c - fill
                    && remaining <= c
                {
                    break; // a whole document that fits the next window starts it
                }
                let item = self.elem.size();
                let batch = out.get_or_insert_with(|| PackedBatch {
                    elem: self.elem,
                    tokens: vec![0u8; w * c * item],
                    segment_ids: vec![0; w * c],
                    position_ids: vec![0; w * c],
                    windows: w,
                    context: c,
                    real_tokens: 0,
                    pieces: Vec::new(),
                });
                let n = remaining.min(c - fill);
                let d = &self.docs;
                let from = (d.starts[d.doc] + d.within) * item;
                let at = (window * c + fill) * item;
                let dst = &mut batch.tokens[at..at + n * item];
                (d.batch.as_ref())
                    .and_then(|b| {
                        b.with_buffer(self.column, |buf| {
                            let src = buf.bytes()?.get(from..from + n * item)?;
                            dst.copy_from_slice(src);
                            Some(())
                        })
                    })
                    .flatten()
                    .ok_or_else(|| LoaderError::WorkerPanicked("a document outside its batch's buffer".into()))?;
                segment += 1;
                let base = window * c + fill;
                batch.segment_ids[base..base + n].fill(segment);
                for (k, p) in batch.position_ids[base..base + n].iter_mut().enumerate() {
                    *p = k as i32; // k < context, which fits i32 (checked)
                }
                batch.pieces.push(Piece {
                    window,
                    start: fill,
                    len: n,
                    row: d.rows[d.doc],
                    source: d.sources[d.doc],
                    doc_offset: d.within,
                });
                batch.real_tokens += n;
                fill += n;
                self.docs.advance(n);
            }
            if self.done {
                break;
            }
        }
        Ok(out)
    }
}

impl<B: HostBuffer> Iterator for Packer<B> {
    type Item = Result<PackedBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_batch() {
            Ok(b) => b.map(Ok),
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
