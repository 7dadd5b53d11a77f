#!/usr/bin/env python3
"""Conformance adapter for tessera-py (reader: tessera_py, writer: tessera_write).

  adapter.py [OPTIONS] info
  adapter.py [OPTIONS] read <dataset-dir> [--version N] [--branch B] [--tag T] [--view V]
  adapter.py [OPTIONS] write <logical.json> <out-dir>

The leading OPTIONS are writer settings: `--page-bytes N` and `--file-bytes N` set the page
and data file targets (default 256 KiB and 64 MiB; the cross-language property test passes
small ones so rows spread over pages and fragments); `--fragment-tree` indexes the written
dataset with a fragment tree (§8.3) instead of a fragment log, and `--node-bytes N` sets its
target node body size (default 256 KiB).

Exit codes: 0 success; 1 the input was rejected, first stderr line `error[<class>]: <msg>`;
89 this implementation does not support what was asked; 70 an unexpected exception (a bug in
this implementation), with its Python traceback on stderr.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tessera_py import NotSupportedHere, Store, TesseraError, dump, open_version  # noqa: E402
from tessera_py import image, lz4, zstd_codec  # noqa: E402
from tessera_py.view import dump_view, open_view  # noqa: E402
from tessera_write import WriteOptions, write_file  # noqa: E402

EXIT_REJECT = 1
EXIT_UNSUPPORTED_HERE = 89


def info() -> int:
    features = ["codec-none", "deletion-vectors", "branches", "tags",
                "base-resolution", "canonical-dump"]
    if zstd_codec.available():
        features.insert(1, "codec-zstd")
    if lz4.available():
        features.insert(1, "codec-lz4")
    if image.available():  # all three image codecs: the reader flag ENCODED_IMAGES (FLG-08)
        features.append("encoded-images")
    print(json.dumps({"name": "tessera-py", "version": "0.1.0", "spec": ["1.0-draft"],
                      "operations": ["read", "write"], "features": features}))
    return 0


def usage(msg: str) -> int:
    print(f"error[usage]: {msg}", file=sys.stderr)
    return EXIT_REJECT


def read(args: list) -> int:
    root = None
    opts = {"version": None, "branch": None, "tag": None, "view": None}
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("--version", "--branch", "--tag", "--view"):
            if i + 1 >= len(args):
                return usage(f"{a} needs a value")
            key = a[2:]
            if opts[key] is not None:
                return usage(f"{a} given twice")
            opts[key] = args[i + 1]
            i += 2
        elif a.startswith("--"):
            return usage(f"unknown option {a}")
        elif root is None:
            root = a
            i += 1
        else:
            return usage(f"unexpected argument {a}")
    if root is None:
        return usage("read needs a dataset directory")
    if opts["tag"] is not None and (opts["version"] is not None or opts["branch"] is not None):
        return usage("--tag cannot be combined with --version or --branch")
    if opts["view"] is not None and any(opts[k] is not None for k in ("version", "branch", "tag")):
        return usage("--view cannot be combined with --version, --branch or --tag")
    version = None
    if opts["version"] is not None:
        if not opts["version"].isdigit() or not opts["version"].isascii():
            return usage(f"--version {opts['version']!r} is not a number")
        version = int(opts["version"])
    if not os.path.isdir(root):
        print(f"error[not_found]: dataset root {root!r} is not a directory", file=sys.stderr)
        return EXIT_REJECT
    store = Store(root)
    try:
        if opts["view"] is not None:
            out = dump_view(store, *open_view(store, opts["view"]))
        else:
            v = open_version(store, branch=opts["branch"], version=version, tag=opts["tag"])
            out = dump(store, v)
    except TesseraError as e:
        print(f"error[{e.cls}]: {e.message}", file=sys.stderr)
        return EXIT_REJECT
    except NotSupportedHere as e:
        print(f"unsupported here: {e}", file=sys.stderr)
        return EXIT_UNSUPPORTED_HERE
    sys.stdout.write(json.dumps(out, sort_keys=True))
    sys.stdout.write("\n")
    return 0


def write(args: list, options: WriteOptions) -> int:
    if len(args) != 2:
        return usage("write needs <logical.json> <out-dir>")
    logical, out = args
    if not os.path.isdir(out):
        return usage(f"the output directory {out!r} does not exist")
    try:
        write_file(logical, out, options)
    except TesseraError as e:
        print(f"error[{e.cls}]: {e.message}", file=sys.stderr)
        return EXIT_REJECT
    except NotSupportedHere as e:
        print(f"unsupported here: {e}", file=sys.stderr)
        return EXIT_UNSUPPORTED_HERE
    return 0


def main(argv: list) -> int:
    options = WriteOptions()
    args = argv[1:]
    while args and args[0] in ("--page-bytes", "--file-bytes", "--node-bytes", "--fragment-tree"):
        if args[0] == "--fragment-tree":
            options.fragment_tree = True
            args = args[1:]
            continue
        if len(args) < 2 or not args[1].isascii() or not args[1].isdigit() or int(args[1]) < 1:
            return usage(f"{args[0]} needs a positive number")
        setattr(options, args[0][2:].replace("-", "_"), int(args[1]))
        args = args[2:]
    if not args:
        return usage("expected a command: info, read or write")
    cmd = args[0]
    if cmd == "info":
        return info()
    if cmd == "read":
        return read(args[1:])
    if cmd == "write":
        return write(args[1:], options)
    print(f"unsupported here: unknown command {cmd!r}", file=sys.stderr)
    return EXIT_UNSUPPORTED_HERE


EXIT_BUG = 70  # EX_SOFTWARE: an unexpected exception, i.e. a bug in this implementation


if __name__ == "__main__":
    try:
        code = main(sys.argv)
    except Exception:  # a bug: crash visibly, never as a (class-bearing) rejection
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(EXIT_BUG)
    sys.exit(code)
