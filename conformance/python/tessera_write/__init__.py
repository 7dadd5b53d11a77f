"""tessera_write: the writer of the independent Python implementation, written from SPEC.md
alone. It creates a dataset, appends rows as fragments (data files with pages, validity and
shapes blocks, none/lz4/zstd codecs, statistics), commits manifests with create-if-absent on
a local file system (VER-05, VER-11), and creates tags. It reads through `tessera_py`.

| module | job |
|---|---|
| `encode` | §6 encoding of every stored struct, §5 envelope |
| `rows` | row checks (MOD-06, DT-02, DT-05, KND-11, LIM-09) and statistics (§12) |
| `datafile` | one data file: pages, blocks in canonical order, codecs, footer, trailer (§7) |
| `fsstore` | create-if-absent on a local file system (VER-11) |
| `dataset` | create (VER-12), append with the commit loop (VER-05, SEG-09, SEG-10), tags (REF-05) |
| `tree` | the fragment tree of an append (TREE-08, TREE-09), when asked for or kept from the base |
| `logical` | `tessera-logical/1` descriptions, as the adapter's `write` receives them |
"""

from .dataset import WriteOptions, Writer
from .logical import parse as parse_logical, write as write_logical, write_file

__all__ = ["WriteOptions", "Writer", "parse_logical", "write_logical", "write_file"]
