#!/usr/bin/env python3
"""Runs every conformance case under fixtures/cases through an adapter (default: this
directory's adapter.py) and checks the results as fixtures/README.md describes. A writer
case is written by the adapter and read back by the same adapter, version by version and tag
by tag (an adapter that exits 89 on `write` skips it).

  run_fixtures.py [--cases DIR] [--adapter CMD ...] [--jobs N] [-v] [FILTER]

Prints one line per failure (and per skip, with its reason), then
`N passed, N failed, N skipped`; exits 1 if any case failed.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_CASES = os.path.join(REPO, "fixtures", "cases")
CLASSES = {"malformed", "invalid", "unsupported", "limit", "io"}
ERR_LINE = re.compile(r"error\[([a-z_]+)\]: ")


def find_cases(root: str) -> list:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        if "case.toml" in filenames:
            out.append(dirpath)
            dirnames[:] = []
        dirnames.sort()
    return sorted(out)


def compare(a, b, path="$", user_keys=False):
    """Structural equality of DUMP-10: returns None when equal, else where they differ.
    Member order is irrelevant, array order matters, integers compare exactly (Python ints),
    `x-` members are ignored except among stored strings (the top-level `columns` object's
    column names and every `metadata` object's keys), and JSON types are compared strictly
    (true is not 1)."""
    if isinstance(a, dict) and isinstance(b, dict):
        ka = {k for k in a if user_keys or not k.startswith("x-")}
        kb = {k for k in b if user_keys or not k.startswith("x-")}
        if ka != kb:
            return f"{path}: members differ: only got {sorted(ka - kb)}, only expected {sorted(kb - ka)}"
        for k in sorted(ka):
            user = not user_keys and (k == "metadata" or (path == "$" and k == "columns"))
            d = compare(a[k], b[k], f"{path}.{k}", user)
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: array length {len(a)}, expected {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = compare(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if type(a) is not type(b) or a != b:
        return f"{path}: got {json.dumps(a)[:80]}, expected {json.dumps(b)[:80]}"
    return None


def adapter_args(case: dict) -> list:
    args = case.get("args") or {}
    out = []
    if "tag" in args:
        out += ["--tag", str(args["tag"])]
    if "branch" in args:
        out += ["--branch", str(args["branch"])]
    if "version" in args:
        out += ["--version", str(args["version"])]
    if "view" in args:
        out += ["--view", str(args["view"])]
    return out


def run_case(adapter: list, case_dir: str):
    """Returns (status, id, message) with status in pass / fail / skip."""
    try:
        with open(os.path.join(case_dir, "case.toml"), "rb") as f:
            case = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        return ("fail", case_dir, f"cannot load case.toml: {e}")
    cid = case.get("id", os.path.basename(case_dir))
    op = case.get("operation", "read")
    if op == "write":
        # The adapter writes, then reads back what it wrote (`impl.write -> impl.read`); the
        # `tessera-conformance` runner checks the write with the reference reader and lint.
        return run_writer_case(adapter, case_dir, cid)
    if op != "read":
        return ("fail", cid, f"unknown operation {op!r}")
    timeout = case.get("timeout_ms", 10_000) / 1000
    cmd = adapter + ["read", os.path.join(case_dir, "input")] + adapter_args(case)
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return ("fail", cid, f"timed out after {timeout:g} s")
    dt = time.monotonic() - t0
    stderr = p.stderr.decode("utf-8", "replace")
    first = stderr.splitlines()[0] if stderr.strip() else ""
    if p.returncode == 89:
        return ("skip", cid, f"unsupported by the adapter: {first}")
    expect = case.get("expect")
    if expect == "accept":
        if p.returncode != 0:
            return ("fail", cid, f"exit {p.returncode}, expected a dump: {first or stderr[-300:]}")
        try:
            got = json.loads(p.stdout)
        except ValueError as e:
            return ("fail", cid, f"stdout is not JSON: {e}")
        with open(os.path.join(case_dir, "expected.json"), "rb") as f:
            want = json.load(f)
        diff = compare(got, want)
        if diff:
            return ("fail", cid, f"dump differs: {diff}")
        return ("pass", cid, f"{dt:.2f}s")
    if expect == "reject":
        allowed = case.get("error") or []
        if p.returncode == 0:
            return ("fail", cid, f"accepted; expected {'/'.join(allowed)}")
        if p.returncode != 1:
            return ("fail", cid, f"exit {p.returncode} (crash?): {stderr[-400:]}")
        m = ERR_LINE.match(first)
        if not m:
            return ("fail", cid, f"first stderr line is not `error[<class>]: …`: {first!r}")
        if m.group(1) not in allowed:
            return ("fail", cid, f"class {m.group(1)}, expected {'/'.join(allowed)}: {first}")
        return ("pass", cid, f"{dt:.2f}s {first}")
    return ("fail", cid, f"unknown expect {expect!r}")


def run_writer_case(adapter: list, case_dir: str, cid: str):
    """Writes the case's logical.json into a fresh directory, then reads every version and
    tag back through the same adapter and compares with expected.json."""
    with open(os.path.join(case_dir, "expected.json"), "rb") as f:
        expected = json.load(f)
    dumps = {v["version"]: v["dump"] for v in expected["versions"]}
    with tempfile.TemporaryDirectory(prefix="tessera-py-writer-") as out:
        p = subprocess.run(adapter + ["write", os.path.join(case_dir, "logical.json"), out],
                           capture_output=True, timeout=60)
        if p.returncode == 89:
            return ("skip", cid, "the adapter does not write")
        if p.returncode != 0:
            return ("fail", cid, f"write: exit {p.returncode}: {p.stderr.decode()[-300:]}")
        reads = [(["--version", str(v)], d, f"main@{v}") for v, d in dumps.items()]
        reads += [(["--tag", t["name"]], dumps[t["version"]], f"tag {t['name']}")
                  for t in expected.get("tags", [])]
        for args, want, what in reads:
            p = subprocess.run(adapter + ["read", out] + args, capture_output=True, timeout=60)
            if p.returncode != 0:
                return ("fail", cid, f"{what}: read back: exit {p.returncode}: "
                                     f"{p.stderr.decode()[-300:]}")
            diff = compare(json.loads(p.stdout), want)
            if diff:
                return ("fail", cid, f"{what}: read back differently: {diff}")
    return ("pass", cid, f"{len(reads)} read(s) of what it wrote")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=DEFAULT_CASES)
    ap.add_argument("--adapter", help="adapter command line (default: this adapter.py)")
    ap.add_argument("--jobs", type=int, default=max(2, min(8, os.cpu_count() or 2)))
    ap.add_argument("-v", "--verbose", action="store_true", help="also print passing cases")
    ap.add_argument("filter", nargs="?", help="only cases whose id contains this")
    a = ap.parse_args()
    adapter = (shlex.split(a.adapter) if a.adapter
               else [sys.executable, os.path.join(HERE, "adapter.py")])
    cases = find_cases(a.cases)
    if a.filter:
        cases = [c for c in cases if a.filter in os.path.basename(c)]
    if not cases:
        print(f"no cases under {a.cases}", file=sys.stderr)
        return 1
    counts = {"pass": 0, "fail": 0, "skip": 0}
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        results = list(ex.map(lambda c: run_case(adapter, c), cases))
    for status, cid, msg in results:
        counts[status] += 1
        if status == "fail":
            print(f"FAIL {cid}: {msg}")
        elif status == "skip":
            print(f"SKIP {cid}: {msg}")
        elif a.verbose:
            print(f"ok   {cid}: {msg}")
    print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
