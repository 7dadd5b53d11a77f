"""The fragment tree (SPEC.md §8.3): index nodes, checked in the order of VAL-20.

A manifest with reader flag FRAGMENT_TREE (FLG-09) lists at most one `SegmentRef`, the root
of a tree of index nodes (`.tsn`). Leaves (level 0) list fragments in ascending id order;
inner nodes list `NodeRef`s summarising their subtrees. Every node is checked before it is
used (VAL-20 steps 1 to 9): `open_root` checks the root when the version is opened,
`open_child` a child when a reader descends into it. Reading a whole version visits every
node depth first, children in list order (`all_fragments`); reading some rows descends only
into the subtrees that hold them (`fragments_holding`, TREE-07).
"""

from bisect import bisect_left
from dataclasses import dataclass

from . import model as M
from .envelope import BODY_LIMIT_SEGMENT, MAGIC_NODE, check_envelope
from .errors import invalid, limit
from .reader import fetch_referenced, holding, live_rows
from .store import U64_MAX, Store
from .validate import check_fragment_columns, check_fragment_entry, check_path

LIM_LEVEL = 15  # LIM-17


@dataclass
class Summary:
    """TREE-05: what a node's entries add up to."""
    first_id: int
    last_id: int
    fragment_count: int
    row_count: int
    live_row_count: int

    def __str__(self):
        return (f"ids {self.first_id}..={self.last_id}, {self.fragment_count} fragments, "
                f"{self.row_count} rows, {self.live_row_count} live")


def check_level(node: M.IndexNode, parent_level, what: str):
    """VAL-20 step 5: LIM-17 (`limit`), then a child's level one below its parent's
    (TREE-03, `invalid`). `parent_level` is None for the root."""
    if node.level > LIM_LEVEL:
        raise limit(f"{what}: level {node.level}, over {LIM_LEVEL}")
    if parent_level is not None and node.level != parent_level - 1:
        raise invalid(f"{what}: level {node.level} is not one less than its parent's "
                      f"{parent_level}")


def check_lists(node: M.IndexNode, what: str):
    """VAL-20 step 6 (TREE-04): a leaf lists fragments and no children, an inner node
    children and no fragments."""
    if node.level == 0:
        if not node.fragments or node.children:
            raise invalid(f"{what}: a leaf must list one or more fragments and no children "
                          f"(it lists {len(node.fragments)} and {len(node.children)})")
    elif not node.children or node.fragments:
        raise invalid(f"{what}: an inner node (level {node.level}) must list one or more "
                      f"children and no fragments (it lists {len(node.children)} and "
                      f"{len(node.fragments)})")


def check_node_ref(ref: M.NodeRef, what: str):
    """TREE-04's rules on one `NodeRef` besides its path: the counts and the id range."""
    if ref.fragment_count < 1:
        raise invalid(f"{what}: fragment_count 0")
    if ref.first_id > ref.last_id:
        raise invalid(f"{what}: first_id {ref.first_id} is above last_id {ref.last_id}")
    if ref.fragment_count > ref.last_id - ref.first_id + 1:
        raise invalid(f"{what}: {ref.fragment_count} fragments are impossible for its subtree's "
                      f"ids {ref.first_id}..={ref.last_id}")
    if ref.live_row_count > ref.row_count:
        raise invalid(f"{what}: live_row_count {ref.live_row_count} is above row_count "
                      f"{ref.row_count}")


def check_entries(node: M.IndexNode, what: str):
    """VAL-20 step 7: a leaf's fragments (VAL-07 step 7, then ascending ids), or an inner
    node's children (path, counts and id range, then ranges ascending without overlap)."""
    if node.level == 0:
        prev = None
        for f in node.fragments:
            check_fragment_entry(f, what)
            if prev is not None and f.id <= prev:
                raise invalid(f"{what}: fragment ids must ascend: {f.id} follows {prev}")
            prev = f.id
        return
    prev = None
    for i, ref in enumerate(node.children):
        cw = f"{what}: child {i}"
        check_path(ref.path, cw)
        check_node_ref(ref, cw)
        if prev is not None and ref.first_id <= prev:
            raise invalid(f"{cw}: first_id {ref.first_id} is not above the previous child's "
                          f"last_id {prev}; children's id ranges must ascend without overlap")
        prev = ref.last_id


def summarize(node: M.IndexNode, next_fragment_id: int, what: str) -> Summary:
    """VAL-20 step 8: the node's last fragment id below `next_fragment_id`, then its summary
    (TREE-05), every sum exact and within u64 (`invalid`)."""
    if node.level == 0:
        first, last = node.fragments[0].id, node.fragments[-1].id
        counts = [(1, f.row_count, live_rows(f)) for f in node.fragments]
    else:
        first, last = node.children[0].first_id, node.children[-1].last_id
        counts = [(c.fragment_count, c.row_count, c.live_row_count) for c in node.children]
    if last >= next_fragment_id:
        raise invalid(f"{what}: fragment id {last} is not below next_fragment_id "
                      f"{next_fragment_id}")
    sums = [sum(c[k] for c in counts) for k in range(3)]
    if any(s > U64_MAX for s in sums):
        raise invalid(f"{what}: its fragment, row or live row count overflows u64")
    return Summary(first, last, *sums)


def load_node(store: Store, m: M.Manifest, path: str, size: int, crc: int, parent_level,
              what: str) -> tuple:
    """VAL-20 steps 1 to 8 for the node a reference (`path`, `size`, `crc`) reaches;
    returns the node and its summary."""
    obj = fetch_referenced(store, path, size, crc, what)  # 1. 2. TREE-02
    body = check_envelope(obj, MAGIC_NODE, BODY_LIMIT_SEGMENT, what)  # 3. TREE-01
    node = M.decode_index_node(body)  # 4.
    check_level(node, parent_level, what)  # 5.
    check_lists(node, what)  # 6.
    check_entries(node, what)  # 7.
    return node, summarize(node, m.next_fragment_id, what)  # 8.


def open_root(store: Store, m: M.Manifest):
    """VAL-20 for the version's root, when the version is opened: at most one `SegmentRef`
    (TREE-06); with none, row_count 0 (MAN-06) and no root (None); with one, the root's
    steps 1 to 9, step 9 against the `SegmentRef` and the manifest's row_count (TREE-05)."""
    if len(m.segments) > 1:
        raise invalid(f"the manifest sets FRAGMENT_TREE and lists {len(m.segments)} segment "
                      f"references; a fragment tree has one root (TREE-06)")
    if not m.segments:
        if m.row_count != 0:
            raise invalid(f"manifest row_count {m.row_count}, but its fragment tree has no "
                          f"root (MAN-06)")
        return None
    sref = m.segments[0]
    what = f"root node {sref.path}"
    node, s = load_node(store, m, sref.path, sref.size, sref.crc32, None, what)
    if s.fragment_count != sref.fragment_count or s.row_count != sref.row_count:  # 9.
        raise invalid(f"{what}: {s.fragment_count} fragments of {s.row_count} rows; the "
                      f"manifest's reference says {sref.fragment_count} of {sref.row_count}")
    if s.live_row_count != m.row_count:  # MAN-06
        raise invalid(f"manifest row_count {m.row_count}; the fragment tree holds "
                      f"{s.live_row_count} live rows")
    return node


def open_child(store: Store, m: M.Manifest, parent: M.IndexNode, ref: M.NodeRef,
               what: str) -> M.IndexNode:
    """VAL-20 steps 1 to 9 for the child that `ref`, an entry of `parent`, references."""
    node, s = load_node(store, m, ref.path, ref.size, ref.crc32, parent.level, what)
    want = Summary(ref.first_id, ref.last_id, ref.fragment_count, ref.row_count,
                   ref.live_row_count)
    if s != want:  # 9. TREE-05
        raise invalid(f"{what}: its entries sum to {s}, which differ from its parent's "
                      f"summary ({want})")
    return node


def all_fragments(store: Store, m: M.Manifest, root) -> list:
    """Reading a whole version: every node depth first, children in list order, then SEG-06
    for every fragment in id order (VAL-20). Returns the fragments in ascending id order."""
    out = []
    if root is not None:
        _collect(store, m, root, m.segments[0].path, out)
    for f in out:
        check_fragment_columns(m.schema, f)
    return out


def _collect(store: Store, m: M.Manifest, node: M.IndexNode, path: str, out: list):
    if node.level == 0:
        out.extend(node.fragments)
        return
    for i, ref in enumerate(node.children):
        child = open_child(store, m, node, ref, f"node {ref.path} (child {i} of {path})")
        _collect(store, m, child, ref.path, out)


def fragments_holding(store: Store, m: M.Manifest, root, rows: list) -> list:
    """Reading some rows (TREE-07, VAL-19): descends only into the subtrees holding one of
    `rows` (global live rows, ascending, each below the version's row_count) and returns
    `(first global row, fragment)` for each fragment holding one, in row order, after SEG-06
    for each of them."""
    out = []
    if root is not None and rows:
        _descend(store, m, root, m.segments[0].path, 0, rows, out)
    for _, f in out:
        check_fragment_columns(m.schema, f)
    return out


def _descend(store, m, node, path, base, rows, out):
    at = base
    if node.level == 0:
        holding(node.fragments, rows, at, out)
        return
    for i, ref in enumerate(node.children):
        lo, hi = bisect_left(rows, at), bisect_left(rows, at + ref.live_row_count)
        if lo < hi:
            child = open_child(store, m, node, ref, f"node {ref.path} (child {i} of {path})")
            _descend(store, m, child, ref.path, at, rows[lo:hi], out)
        at += ref.live_row_count
