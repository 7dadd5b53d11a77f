//! Fragment tree cases (SPEC.md §"The fragment tree", TREE-01 to TREE-09, VAL-20, FLG-09,
//! LIM-17): valid trees of several shapes, and must-reject cases that each break one rule of a
//! valid three-level tree. An edited node is re-sealed under its key and the size and CRC of
//! every reference above it are fixed, so the edit is the only fault.

use std::path::Path;

use tessera::envelope::{self, ObjectKind};
use tessera::tree::IndexNode;
use tessera::{Column, ColumnData, DType, Dataset, IndexLayout, Schema, WriteOptions};

use crate::case::Args;
use crate::generate::Result;
use crate::generate::data::{batch, loc};
use crate::generate::emit::{Emitter, Spec};
use crate::generate::mutate::Ds;
use crate::generate::options::Clock;

/// Options for a commit that writes a fragment tree of small nodes (two entries each).
fn tree(clock: &mut Clock) -> WriteOptions {
    clock.next(WriteOptions { index: IndexLayout::Tree { node_bytes: 400 }, ..WriteOptions::default() })
}

fn ids(values: &[i64]) -> Result<tessera::Batch> {
    batch(vec![("id", ColumnData::from_scalars(values))])
}

fn schema() -> Result<Schema> {
    Ok(Schema::new([Column::new("id", DType::I64, &[])])?)
}

/// main@1 creates a dataset indexed by a fragment tree; main@2..=main@9 append two rows each
/// (`id` 10·i, 10·i + 1: fragments 0 to 7); main@10 deletes row 3 (fragment 1 gets a deletion
/// vector). With nodes of about 400 bytes the tree has three levels: a root (level 2) over two
/// inner nodes (level 1) over four leaves of two fragments each.
fn three_levels(input: &Path) -> Result<()> {
    let mut clock = Clock::new();
    let mut ds = Dataset::create(loc(input)?, schema()?, &tree(&mut clock))?;
    for i in 0..8i64 {
        ds = ds.append(&ids(&[10 * i, 10 * i + 1])?, &format!("fragment {i}"), tree(&mut clock))?;
    }
    ds.delete_rows(&[3], "delete row 3", &tree(&mut clock))?;
    let root = root_node(&Ds::new(input))?;
    if root.level != 2 || root.children.len() != 2 {
        crate::generate::bail!("three_levels: root at level {} with {} children", root.level, root.children.len());
    }
    Ok(())
}

/// The root node of the latest version of `main`.
fn root_node(ds: &Ds) -> Result<IndexNode> {
    let m = ds.manifest(&ds.main()?)?;
    let Some(r) = m.segments.first() else { crate::generate::bail!("no root") };
    node(ds, &r.path)
}

fn node(ds: &Ds, key: &str) -> Result<IndexNode> {
    Ok(envelope::open(ObjectKind::Node, &ds.read(key)?, u64::MAX, key)?)
}

/// Applies `f` to the node reached from the root of the latest `main` manifest through the
/// child indices `path`, re-seals it under its key, and fixes the size and CRC of every
/// reference above it (the parents' `NodeRef`s, then the manifest's `SegmentRef`).
fn edit_node(input: &Path, path: &[usize], f: impl FnOnce(&mut IndexNode)) -> Result<()> {
    let ds = Ds::new(input);
    let mkey = ds.main()?;
    let m = ds.manifest(&mkey)?;
    let Some(root) = m.segments.first() else { crate::generate::bail!("no root") };
    let mut chain = vec![(root.path.clone(), node(&ds, &root.path)?)];
    for &i in path {
        let Some(c) = chain.last().and_then(|(_, n)| n.children.get(i)).map(|c| c.path.clone()) else {
            crate::generate::bail!("edit_node: no child {i}")
        };
        chain.push((c.clone(), node(&ds, &c)?));
    }
    let Some((_, target)) = chain.last_mut() else { crate::generate::bail!("empty chain") };
    f(target);
    let mut below: Option<(usize, Vec<u8>)> = None;
    for (depth, (key, n)) in chain.iter_mut().enumerate().rev() {
        if let Some((i, bytes)) = below.take() {
            n.children[i].size = bytes.len() as u64;
            n.children[i].crc32 = envelope::stored_crc(&bytes);
        }
        let bytes = envelope::seal(ObjectKind::Node, n)?;
        ds.write(key, &bytes)?;
        below = Some((if depth == 0 { 0 } else { path[depth - 1] }, bytes));
    }
    let Some((_, bytes)) = below else { crate::generate::bail!("nothing sealed") };
    ds.edit_manifest(&mkey, |m| {
        m.segments[0].size = bytes.len() as u64;
        m.segments[0].crc32 = envelope::stored_crc(&bytes);
    })
}

/// [`three_levels`], then view `sel` of the latest version lists `rows`, then the stored CRC of
/// the first leaf under the root's second child (fragments 4 and 5, rows 7 to 10) is flipped, with no
/// reference fixed: a reader that reads that leaf finds it differs from its reference (TREE-02).
fn view_over_faulty_leaf(input: &Path, rows: &[u64]) -> Result<()> {
    three_levels(input)?;
    let mut clock = Clock::new();
    let ds = Dataset::open(loc(input)?)?;
    ds.save_view_with("sel", rows, "SELECT * FROM t", &clock.tick())?;
    let store = Ds::new(input);
    let root = root_node(&store)?;
    let inner = node(&store, &root.children[1].path)?;
    store.edit_raw(&inner.children[0].path, |b| {
        if let Some(last) = b.last_mut() {
            *last ^= 1;
        }
    })
}

fn view_args() -> Args {
    Args { view: Some("sel".into()), ..Args::default() }
}

#[allow(clippy::too_many_lines)] // one case after another
pub(in crate::generate) fn valid(em: &mut Emitter) -> Result<()> {
    em.valid(
        Spec::new(
            "v-tree-0001-three-levels",
            &["TREE-01", "TREE-03", "TREE-04", "TREE-05", "TREE-06", "TREE-08", "TREE-09", "FLG-09", "VAL-20"],
            "a fragment tree of three levels (root, two inner nodes, four leaves of two fragments); fragment 1 \
             has a deletion vector, so its node references count 2 physical and 1 live row. The writer split \
             nodes of about 400 bytes, two entries each, as the tree grew",
        ),
        three_levels,
    )?;
    em.valid(
        Spec::new(
            "v-tree-0002-empty",
            &["TREE-06", "FLG-09"],
            "a dataset created with a fragment tree and no fragment: reader flag FRAGMENT_TREE, no segments, 0 rows",
        ),
        |input| {
            let mut clock = Clock::new();
            Dataset::create(loc(input)?, schema()?, &tree(&mut clock))?;
            Ok(())
        },
    )?;
    em.valid(
        Spec::new(
            "v-tree-0003-leaf-root",
            &["TREE-03", "TREE-06"],
            "a fragment tree whose root is a leaf (level 0) listing the one fragment",
        ),
        |input| {
            let mut clock = Clock::new();
            let ds = Dataset::create(loc(input)?, schema()?, &tree(&mut clock))?;
            ds.append(&ids(&[7, 8, 9])?, "three rows", tree(&mut clock))?;
            Ok(())
        },
    )?;
    em.valid(
        Spec::new(
            "v-tree-0004-converted-from-log",
            &["TREE-08", "FLG-09", "VER-06"],
            "main@2 and main@3 index their fragments with a fragment log; main@4 appends a third fragment and \
             writes a fragment tree of all three instead, setting FRAGMENT_TREE",
        ),
        |input| {
            let mut clock = Clock::new();
            let mut ds = Dataset::create(loc(input)?, schema()?, &clock.tick())?;
            ds = ds.append(&ids(&[1, 2])?, "log 1", clock.tick())?;
            ds = ds.append(&ids(&[3])?, "log 2", clock.tick())?;
            ds.append(&ids(&[4, 5, 6])?, "to a tree", tree(&mut clock))?;
            Ok(())
        },
    )?;
    em.valid(
        Spec::new(
            "v-tree-0005-root-with-one-child",
            &["TREE-03", "TREE-04", "TREE-06"],
            "the tree of v-tree-0001 under a new root (level 3) with one child, the old root: a shape writers do \
             not produce (they drop such a root), yet valid",
        ),
        |input| {
            three_levels(input)?;
            let ds = Ds::new(input);
            let mkey = ds.main()?;
            let m = ds.manifest(&mkey)?;
            let old = &m.segments[0];
            let inner = node(&ds, &old.path)?;
            let first = root_first_last(&ds, &inner)?;
            let live: u64 = inner.children.iter().map(|c| c.live_row_count).sum();
            let top = IndexNode {
                level: inner.level + 1,
                fragments: Vec::new(),
                children: vec![tessera::tree::NodeRef {
                    path: old.path.clone(),
                    size: old.size,
                    crc32: old.crc32,
                    first_id: first.0,
                    last_id: first.1,
                    fragment_count: old.fragment_count,
                    row_count: old.row_count,
                    live_row_count: live,
                    stats: Vec::new(),
                }],
            };
            let bytes = envelope::seal(ObjectKind::Node, &top)?;
            let key = tessera::paths::content_key(tessera::paths::INDEX_DIR, "tsn", &bytes);
            ds.write(&key, &bytes)?;
            ds.edit_manifest(&mkey, |m| {
                m.segments[0].path = key;
                m.segments[0].size = bytes.len() as u64;
                m.segments[0].crc32 = envelope::stored_crc(&bytes);
            })
        },
    )?;
    em.valid_unverified(
        Spec::new(
            "v-tree-0006-view-skips-a-faulty-subtree",
            &["VAL-19", "TREE-07", "VAL-20"],
            "the tree of v-tree-0001 with view sel of rows 0, 2, 4 (fragments 0 to 2, under the root's first \
             child); a leaf under the root's second child differs from its reference (flipped CRC). Reading \
             the view reads only the nodes on the paths to its rows, so it reads",
        )
        .with_args(view_args()),
        |input| view_over_faulty_leaf(input, &[0, 2, 4]),
    )?;
    Ok(())
}

/// The first and last fragment id under an inner node.
fn root_first_last(_ds: &Ds, inner: &IndexNode) -> Result<(u64, u64)> {
    match (inner.children.first(), inner.children.last()) {
        (Some(a), Some(b)) => Ok((a.first_id, b.last_id)),
        _ => crate::generate::bail!("inner node without children"),
    }
}

#[allow(clippy::too_many_lines)] // one case after another
pub(in crate::generate) fn reject(em: &mut Emitter) -> Result<()> {
    em.reject(
        Spec::new(
            "n-tree-0001-root-crc-differs-from-ref",
            &["TREE-02", "VAL-20"],
            "the manifest's reference to the root node records another envelope CRC than the node's",
        ),
        "invalid",
        "size or CRC differs",
        |input| {
            three_levels(input)?;
            let ds = Ds::new(input);
            ds.edit_manifest(&ds.main()?, |m| m.segments[0].crc32 ^= 1)
        },
    )?;
    em.reject(
        Spec::new(
            "n-tree-0002-child-size-differs-from-ref",
            &["TREE-02", "VAL-20"],
            "the root's reference to its first child gives a size one byte larger than the child object",
        ),
        "invalid",
        "size or CRC differs",
        |input| {
            three_levels(input)?;
            edit_node(input, &[], |n| n.children[0].size += 1)
        },
    )?;
    em.reject(
        Spec::new(
            "n-tree-0003-child-missing",
            &["VAL-15", "VAL-20"],
            "the second inner node, which the root references, does not exist",
        ),
        "invalid",
        "does not exist",
        |input| {
            three_levels(input)?;
            let ds = Ds::new(input);
            let root = root_node(&ds)?;
            ds.remove(&root.children[1].path)
        },
    )?;
    em.reject(
        Spec::new(
            "n-tree-0004-child-level-not-one-less",
            &["TREE-03", "VAL-20"],
            "the root's first child (an inner node at level 1) says level 2, its parent's level",
        ),
        "invalid",
        "level is not one less",
        |input| {
            three_levels(input)?;
            edit_node(input, &[0], |n| n.level = 2)
        },
    )?;
    em.reject(
        Spec::new(
            "n-tree-0005-level-over-limit",
            &["LIM-17", "TREE-03", "VAL-20"],
            "the root node says level 16; the limit is 15",
        ),
        "limit",
        "LIM-17",
        |input| {
            three_levels(input)?;
            edit_node(input, &[], |n| n.level = 16)
        },
    )?;
    em.reject(
        Spec::new(
            "n-tree-0006-leaf-lists-children",
            &["TREE-04", "VAL-20"],
            "the first leaf (level 0) also lists a child reference",
        ),
        "invalid",
        "a leaf lists one or more fragments and no children",
        |input| {
            three_levels(input)?;
            let ds = Ds::new(input);
            let root = root_node(&ds)?;
            let extra = root.children[0].clone();
            edit_node(input, &[0, 0], |n| n.children.push(extra))
        },
    )?;
    em.reject(
        Spec::new(
            "n-tree-0007-inner-node-without-children",
            &["TREE-04", "VAL-20"],
            "the second inner node (level 1) lists no children (its reference in the root is unchanged)",
        ),
        "invalid",
        "an inner node lists one or more children",
        |input| {
            three_levels(input)?;
            edit_node(input, &[1], |n| n.children.clear())
        },
    )?;
    em.reject(
        Spec::new(
            "n-tree-0008-leaf-ids-descend",
            &["TREE-04", "VAL-20"],
            "the first leaf lists its two fragments, ids 0 and 1, in the order 1, 0",
        ),
        "invalid",
        "fragment ids must ascend",
        |input| {
            three_levels(input)?;
            edit_node(input, &[0, 0], |n| n.fragments.swap(0, 1))
        },
    )?;
    em.reject(
        Spec::new(
            "n-tree-0009-children-ranges-overlap",
            &["TREE-04", "VAL-20"],
            "the root's second child reference starts at the first child's last id",
        ),
        "invalid",
        "must ascend without overlap",
        |input| {
            three_levels(input)?;
            edit_node(input, &[], |n| n.children[1].first_id = n.children[0].last_id)
        },
    )?;
    em.reject(
        Spec::new(
            "n-tree-0010-child-summary-differs",
            &["TREE-05", "VAL-20"],
            "the root's reference to its first child counts one live row fewer than the child holds (the \
             manifest's row_count is lowered to match the root, so the child is the one fault)",
        ),
        "invalid",
        "differ from its parent's summary",
        |input| {
            three_levels(input)?;
            edit_node(input, &[], |n| n.children[0].live_row_count -= 1)?;
            let ds = Ds::new(input);
            ds.edit_manifest(&ds.main()?, |m| m.row_count -= 1)
        },
    )?;
    em.reject(
        Spec::new(
            "n-tree-0011-root-live-rows-differ-from-manifest",
            &["TREE-05", "MAN-06", "VAL-20"],
            "the manifest's row_count is one more than the live rows the root counts",
        ),
        "invalid",
        "MAN-06",
        |input| {
            three_levels(input)?;
            let ds = Ds::new(input);
            ds.edit_manifest(&ds.main()?, |m| m.row_count += 1)
        },
    )?;
    em.reject(
        Spec::new(
            "n-tree-0012-two-roots",
            &["TREE-06", "VAL-20"],
            "the manifest sets FRAGMENT_TREE and its segments list the root twice",
        ),
        "invalid",
        "TREE-06",
        |input| {
            three_levels(input)?;
            let ds = Ds::new(input);
            ds.edit_manifest(&ds.main()?, |m| m.segments.push(m.segments[0].clone()))
        },
    )?;
    em.reject(
        Spec::new(
            "n-tree-0013-id-not-below-next-fragment-id",
            &["TREE-04", "VAL-20"],
            "the manifest's next_fragment_id is 7, the id of the tree's last fragment",
        ),
        "invalid",
        "not below next_fragment_id",
        |input| {
            three_levels(input)?;
            let ds = Ds::new(input);
            ds.edit_manifest(&ds.main()?, |m| m.next_fragment_id = 7)
        },
    )?;
    em.reject(
        Spec::new(
            "n-tree-0014-root-has-segment-magic",
            &["TREE-01", "ENV-02", "VAL-20"],
            "the root node's envelope carries the index segment magic (the manifest's reference is fixed)",
        ),
        "malformed",
        "magic",
        |input| {
            three_levels(input)?;
            let ds = Ds::new(input);
            let mkey = ds.main()?;
            let key = ds.manifest(&mkey)?.segments[0].path.clone();
            let bytes = ds.edit_envelope_header(&key, |h| h[..8].copy_from_slice(&ObjectKind::Segment.magic()))?;
            ds.edit_manifest(&mkey, |m| m.segments[0].crc32 = envelope::stored_crc(&bytes))
        },
    )?;
    em.reject(
        Spec::new(
            "n-tree-0015-fragment-lacks-a-column",
            &["SEG-06", "TREE-06", "VAL-20"],
            "the third leaf's second fragment (id 5) reads column 0 from none of its files",
        ),
        "invalid",
        "SEG-06",
        |input| {
            three_levels(input)?;
            edit_node(input, &[1, 0], |n| n.fragments[1].files[0].column_ids.clear())
        },
    )?;
    em.reject(
        Spec::new(
            "n-tree-0016-no-root-but-rows",
            &["TREE-06", "MAN-06", "VAL-20"],
            "the manifest sets FRAGMENT_TREE, lists no root and says it holds 15 rows",
        ),
        "invalid",
        "MAN-06",
        |input| {
            three_levels(input)?;
            let ds = Ds::new(input);
            ds.edit_manifest(&ds.main()?, |m| m.segments.clear())
        },
    )?;
    em.reject(
        Spec::new(
            "n-tree-0018-view-through-a-faulty-leaf",
            &["VAL-19", "TREE-02", "VAL-20"],
            "as v-tree-0006, but view sel lists rows 0 and 9; row 9 lies in the leaf that differs from its \
             reference, which the view read must read",
        )
        .with_args(view_args()),
        "invalid",
        "size or CRC differs",
        |input| view_over_faulty_leaf(input, &[0, 9]),
    )?;
    em.reject(
        Spec::new(
            "n-tree-0017-child-without-fragments",
            &["TREE-04", "VAL-20"],
            "the root's reference to its first child counts 0 fragments",
        ),
        "invalid",
        "impossible for its subtree",
        |input| {
            three_levels(input)?;
            edit_node(input, &[], |n| n.children[0].fragment_count = 0)
        },
    )?;
    Ok(())
}
