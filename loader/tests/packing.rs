//! Token packing: every token of every document exactly once per epoch, segments and
//! positions that mark the documents' pieces, whole documents kept where asked, exact resume
//! mid-epoch (a document cut across the state), and shards that together pack every token.

use std::collections::BTreeMap;

use tessera::{Batch, Column, ColumnData, DType, Dataset, Dim, Schema, WriteOptions};
use tessera_loader::{Elem, Loader, LoaderConfig, PackConfig, PackedBatch, Packer, RaggedOptions};

const DOCS: u64 = 150;

/// Document `d`'s length: 0 to 300 tokens, some empty, some longer than a window.
fn len(d: u64) -> u64 {
    (d.wrapping_mul(2_654_435_761) >> 7) % 301 * u64::from(!d.is_multiple_of(11))
}

/// `DOCS` documents of i32 tokens `1000 × d + offset`, in fragments of 40 rows.
fn dataset(root: &str) {
    let schema =
        Schema::new([Column::new("tokens", DType::I32, &[Dim::Ragged]), Column::new("id", DType::I64, &[])]).unwrap();
    let mut ds = Dataset::create(root, schema, &WriteOptions::default()).unwrap();
    for start in (0..DOCS).step_by(40) {
        let docs: Vec<Vec<i32>> =
            (start..(start + 40).min(DOCS)).map(|d| (0..len(d)).map(|o| (1000 * d + o) as i32).collect()).collect();
        let refs: Vec<&[i32]> = docs.iter().map(Vec::as_slice).collect();
        let ids: Vec<i64> = (start..(start + 40).min(DOCS)).map(|d| d as i64).collect();
        let batch = Batch::new()
            .with("tokens", ColumnData::from_sequences(&refs))
            .unwrap()
            .with("id", ColumnData::from_scalars(&ids))
            .unwrap();
        ds = ds.append(&batch, "docs", WriteOptions::default()).unwrap();
    }
}

fn loader(root: &str, batch: usize, rank: usize, world: usize) -> Loader {
    let config = LoaderConfig { ragged: RaggedOptions::packed(), ..LoaderConfig::new(root) }
        .with_batch_size(batch)
        .with_rank(rank, world)
        .with_seed(11);
    Loader::open(config).unwrap()
}

/// Checks one packed batch's segments, positions and pieces against its tokens; returns its
/// tokens as (document, offset).
fn check(b: &PackedBatch) -> Vec<(u64, u64)> {
    assert_eq!(b.elem, Elem::I32);
    let tokens: Vec<i32> = b.tokens.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(tokens.len(), b.windows * b.context);
    let mut out = Vec::new();
    let mut covered = vec![false; tokens.len()];
    for (k, p) in b.pieces.iter().enumerate() {
        let segment = 1 + b.pieces[..k].iter().filter(|q| q.window == p.window).count() as i32;
        for i in 0..p.len {
            let at = p.window * b.context + p.start + i;
            covered[at] = true;
            let t = tokens[at] as u64;
            assert_eq!((t / 1000, t % 1000), (p.row, (p.doc_offset + i) as u64), "piece {p:?}");
            assert_eq!(b.segment_ids[at], segment);
            assert_eq!(b.position_ids[at], i as i32);
            out.push((p.row, (p.doc_offset + i) as u64));
        }
    }
    for (at, c) in covered.iter().enumerate() {
        if !c {
            assert_eq!((tokens[at], b.segment_ids[at], b.position_ids[at]), (0, 0, 0), "padding at {at}");
        }
    }
    assert_eq!(b.real_tokens, out.len());
    out
}

fn all_tokens() -> Vec<(u64, u64)> {
    (0..DOCS).flat_map(|d| (0..len(d)).map(move |o| (d, o))).collect()
}

#[test]
fn an_epoch_packs_every_token_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    dataset(root);
    let loader = loader(root, 16, 0, 1);
    let config = PackConfig::new("tokens", 128, 4);
    let batches: Vec<PackedBatch> = Packer::epoch(&loader, config.clone(), 0).unwrap().map(Result::unwrap).collect();
    let mut got: Vec<(u64, u64)> = batches.iter().flat_map(check).collect();
    let total = got.len();
    got.sort_unstable();
    got.dedup();
    assert_eq!(got.len(), total, "no token twice");
    assert_eq!(got, all_tokens(), "every token");
    // Split documents leave padding only in the last batch.
    for b in &batches[..batches.len() - 1] {
        assert_eq!(b.real_tokens, 4 * 128);
    }
    // Documents are read in the loader's order, each piece continuing the last.
    let mut next: BTreeMap<u64, usize> = BTreeMap::new();
    for p in batches.iter().flat_map(|b| &b.pieces) {
        assert_eq!(next.get(&p.row).copied().unwrap_or(0), p.doc_offset);
        next.insert(p.row, p.doc_offset + p.len);
    }
    // Another epoch packs another order.
    let other: Vec<PackedBatch> = Packer::epoch(&loader, config, 1).unwrap().map(Result::unwrap).collect();
    assert_ne!(other[0].tokens, batches[0].tokens);
}

#[test]
fn whole_documents_stay_whole_where_they_fit() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    dataset(root);
    let loader = loader(root, 16, 0, 1);
    let config = PackConfig { split_documents: false, ..PackConfig::new("tokens", 320, 2) };
    let batches: Vec<PackedBatch> = Packer::epoch(&loader, config, 0).unwrap().map(Result::unwrap).collect();
    let mut got: Vec<(u64, u64)> = batches.iter().flat_map(check).collect();
    got.sort_unstable();
    assert_eq!(got, all_tokens());
    for p in batches.iter().flat_map(|b| &b.pieces) {
        assert_eq!((p.doc_offset, p.len as u64), (0, len(p.row)), "every document (≤ 300 tokens) whole: {p:?}");
    }
}

#[test]
fn a_resume_continues_exactly_even_inside_a_document() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    dataset(root);
    let loader = loader(root, 8, 0, 1);
    let config = PackConfig::new("tokens", 96, 3);
    let whole: Vec<PackedBatch> = Packer::epoch(&loader, config.clone(), 2).unwrap().map(Result::unwrap).collect();
    let mut cut_inside = 0;
    for k in [1usize, 2, 5, 9, whole.len() - 1, whole.len()] {
        let mut packer = Packer::epoch(&loader, config.clone(), 2).unwrap();
        for _ in 0..k {
            packer.next().unwrap().unwrap();
        }
        let state = packer.state();
        cut_inside += usize::from(state.tokens > 0);
        drop(packer);
        let rest: Vec<PackedBatch> =
            Packer::resume(&loader, config.clone(), &state).unwrap().map(Result::unwrap).collect();
        assert_eq!(rest.len(), whole.len() - k, "after {k}");
        for (a, b) in rest.iter().zip(&whole[k..]) {
            assert_eq!(
                (&a.tokens, &a.segment_ids, &a.position_ids, &a.pieces),
                (&b.tokens, &b.segment_ids, &b.position_ids, &b.pieces)
            );
        }
    }
    assert!(cut_inside >= 3, "most states fall inside a batch of documents");
}

#[test]
fn ranks_pack_disjoint_shards_that_cover_every_token() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    dataset(root);
    let mut got = Vec::new();
    for rank in 0..3 {
        let loader = loader(root, 5, rank, 3);
        for b in Packer::epoch(&loader, PackConfig::new("tokens", 64, 2), 0).unwrap() {
            got.extend(check(&b.unwrap()));
        }
    }
    let total = got.len();
    got.sort_unstable();
    got.dedup();
    assert_eq!(got.len(), total);
    assert_eq!(got, all_tokens());
    // A fixed-shape column cannot be packed.
    let loader = loader(root, 5, 0, 1);
    let mut p = Packer::epoch(&loader, PackConfig::new("id", 64, 2), 0).unwrap();
    assert!(p.next().unwrap().is_err());
    assert!(Packer::epoch(&loader, PackConfig::new("nope", 64, 2), 0).is_err());
}

#[test]
fn a_stream_runs_on_across_epochs_and_resumes_there() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    dataset(root);
    let loader = std::sync::Arc::new(loader(root, 16, 0, 1));
    let config = PackConfig::new("tokens", 128, 4);
    let per_epoch: usize = all_tokens().len();
    // Enough batches for three epochs and a bit.
    let n = 3 * per_epoch / (4 * 128) + 2;
    let stream: Vec<PackedBatch> =
        Packer::stream(loader.clone(), config.clone(), 0).unwrap().take(n).map(Result::unwrap).collect();
    assert!(stream.iter().all(|b| b.real_tokens == 4 * 128), "no padding at epoch ends");
    let flat: Vec<(u64, u64)> = stream.iter().flat_map(check).collect();
    // Each epoch's tokens, in order: every token once per epoch.
    for e in 0..3 {
        let mut epoch = flat[e * per_epoch..(e + 1) * per_epoch].to_vec();
        epoch.sort_unstable();
        assert_eq!(epoch, all_tokens(), "epoch {e}");
    }
    // The stream's epochs are the loader's epochs 0, 1, 2 (the first tokens of each).
    let first = |e: u64| check(&Packer::epoch(&loader, config.clone(), e).unwrap().next().unwrap().unwrap())[0];
    assert_eq!(flat[per_epoch], first(1));
    // Resume anywhere, also in a batch that crosses an epoch's end.
    for k in [1usize, per_epoch / 512, per_epoch / 512 + 1, n - 3] {
        let mut p = Packer::stream(loader.clone(), config.clone(), 0).unwrap();
        for _ in 0..k {
            p.next().unwrap().unwrap();
        }
        let state = p.state();
        drop(p);
        let rest: Vec<PackedBatch> = Packer::resume_stream(loader.clone(), config.clone(), &state)
            .unwrap()
            .take(n - k)
            .map(Result::unwrap)
            .collect();
        for (a, b) in rest.iter().zip(&stream[k..]) {
            assert_eq!((&a.tokens, &a.pieces), (&b.tokens, &b.pieces), "after {k}");
        }
    }
}
