"""Writing a fragment tree (SPEC.md §8.3, TREE-08, TREE-09).

An append to a version indexed by a fragment tree rewrites only the nodes on the rightmost
path, the one that leads to the last leaf, since new fragments take ids after every existing
one (VER-06); every other node of the base is reused by reference. At each level, bottom
up, the entries of the rewritten node (the last leaf's fragments plus the new ones; a parent's
children with its last child replaced by the nodes written below) are packed left to right
into nodes whose body stays within `target` bytes: a node is split before the entry that would
take it past the target. An inner node gets at least two children while more than one remains
(TREE-09), so a tree of n fragments has O(log n) levels; while more than one node remains at
the top a level is added, and a root that is an inner node with one child is dropped (TREE-08).
A version with a fragment log (or none) that is turned into a tree is packed the same way from
all its fragments.

Nodes are named by content (`index/<32 hex digits>.tsn`, TREE-01, LAY-04). They are built in
memory first: a node over the body limit (an entry too large for a node on its own) or a tree
over LIM-17 levels is `limit` before anything is written (TREE-09).
"""

import hashlib

from tessera_py import model as M
from tessera_py import tree as T
from tessera_py.envelope import BODY_LIMIT_SEGMENT, MAGIC_NODE
from tessera_py.errors import TesseraError
from tessera_py.reader import live_rows

from .encode import NODE_OVERHEAD, fragment_size, index_node_body, node_ref_size, seal, stored_crc
from .rows import version_stats

DEFAULT_NODE_BYTES = 256 << 10  # the reference's target (TREE-08)


def pack(sizes: list, target: int, min_two: bool) -> list:
    """Ranges `[start, end)` over entries of the given encoded sizes: a range is closed before
    the entry that would take its node's body past `target` (each holds at least one entry; with
    `min_two`, at least two while more than one entry remains)."""
    out, start, acc = [], 0, NODE_OVERHEAD
    for i, n in enumerate(sizes):
        if i > start and acc + n > target and not (min_two and i - start < 2):
            out.append((start, i))
            start, acc = i, NODE_OVERHEAD
        acc += n
    out.append((start, len(sizes)))
    if min_two and len(out) > 1 and out[-1][1] - out[-1][0] == 1:
        (a, b), (_, c) = out[-2], out[-1]
        # the last range would hold one child: take one from its neighbour, or join it
        out[-2:] = [(a, b - 1), (b - 1, c)] if b - a >= 3 else [(a, c)]
    return out


class TreeBuilder:
    """Builds the nodes of one commit's tree in memory; `objects` maps the key of each node to
    upload to its bytes (in the order built: children before their parents)."""

    def __init__(self, schema: M.Schema, target: int, body_limit: int = BODY_LIMIT_SEGMENT):
        self.schema = schema
        self.target = target
        self.body_limit = body_limit
        self.objects = {}
        self.nodes = {}  # key -> IndexNode, for the nodes built here

    def node(self, node: M.IndexNode) -> M.NodeRef:
        """Seals one node and returns the `NodeRef` that references it (TREE-05 summary)."""
        if node.level > T.LIM_LEVEL:
            raise TesseraError("limit", f"the fragment tree would need level {node.level}, "
                               f"over {T.LIM_LEVEL} (LIM-17)")
        body = index_node_body(node)
        if len(body) > self.body_limit:
            raise TesseraError("limit", f"an index node of {len(body)} bytes is over the body "
                               f"limit {self.body_limit}: an entry is too large for a node")
        obj = seal(MAGIC_NODE, body)
        key = f"index/{hashlib.sha256(obj).hexdigest()[:32]}.tsn"
        self.objects[key] = obj
        self.nodes[key] = node
        if node.level == 0:
            fr = node.fragments
            first, last, count = fr[0].id, fr[-1].id, len(fr)
            rows, live = sum(f.row_count for f in fr), sum(live_rows(f) for f in fr)
            stats = version_stats(self.schema, fr)
        else:
            ch = node.children
            first, last = ch[0].first_id, ch[-1].last_id
            count = sum(c.fragment_count for c in ch)
            rows, live = sum(c.row_count for c in ch), sum(c.live_row_count for c in ch)
            stats = version_stats(self.schema, ch)  # NodeRefs carry `stats` like fragments
        return M.NodeRef(key, len(obj), stored_crc(obj), first, last, count, rows, live, stats)

    def level(self, level: int, entries: list) -> list:
        """Packs a level's entries (fragments at level 0, else `NodeRef`s) into nodes."""
        if level == 0:
            sizes = [fragment_size(f) for f in entries]
            groups = pack(sizes, self.target, False)
            return [self.node(M.IndexNode(0, entries[a:b], [])) for a, b in groups]
        sizes = [node_ref_size(r) for r in entries]
        groups = pack(sizes, self.target, True)
        return [self.node(M.IndexNode(level, [], entries[a:b])) for a, b in groups]

    def build(self, fragments: list, path: list = ()) -> M.SegmentRef | None:
        """The root of the tree after appending `fragments`, given `path`, the base tree's
        nodes from the root down to its last leaf (empty: a new tree of `fragments` alone).
        Returns the manifest's `SegmentRef` to the root, or None for an empty tree."""
        path = list(path)
        if not path and not fragments:
            return None
        leaf = path.pop() if path else None
        refs = self.level(0, (leaf.fragments if leaf else []) + list(fragments))
        level = 0
        while path or len(refs) > 1:
            level += 1
            parent = path.pop() if path else None
            refs = self.level(level, (parent.children[:-1] if parent else []) + refs)
        top = refs[0]
        # Drop a root that is an inner node with one child (a base may have one, v-tree-0005).
        # The nodes on the rightmost path are all built here, so the child's shape is known.
        while self.nodes[top.path].level > 0 and len(self.nodes[top.path].children) == 1:
            dropped = top.path
            top = self.nodes[dropped].children[0]
            del self.objects[dropped]
        return M.SegmentRef(top.path, top.size, top.crc32, top.fragment_count, top.row_count)
