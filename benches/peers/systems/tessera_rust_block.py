"""Tessera from Rust with block shuffle (`tessera bench --shuffle block`): fragments in a
shuffled order, rows shuffled within a window of fragments. Measured from a bucket only
(`run.py --remote`), where it is compared with the global-shuffle row over the same link."""

from __future__ import annotations

from typing import List

from systems import tessera_rust

NAME = "Tessera, Rust/tch, block shuffle"
FORMAT = "tessera"
CHECKED = False
REMOTE = True
REMOTE_ONLY = True
CONFIG = "as the Rust row, with block shuffle (the default window of fragments)"
parse = tessera_rust.parse


def command(path: str, args) -> List[str]:
    return tessera_rust.command(path, args, shuffle="block")
