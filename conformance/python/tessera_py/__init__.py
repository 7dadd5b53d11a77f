"""tessera_py: an independent, read-only Python implementation of the Tessera format,
written from SPEC.md alone (conformance check of the specification)."""

from .errors import NotSupportedHere, TesseraError
from .reader import open_version, read_rows
from .store import Store
from .dump import dump

__version__ = "0.1.0"
__all__ = ["Store", "TesseraError", "NotSupportedHere", "open_version", "read_rows", "dump"]
