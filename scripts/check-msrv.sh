#!/usr/bin/env bash
# Checks the declared `rust-version` (MSRV) of the workspace on the one toolchain a machine
# has: every member declares the same one, it is at least what edition 2024 needs (1.85), and
# no locked dependency declares a newer one. Clippy's `incompatible_msrv` lint (in the clippy
# run of scripts/test.sh) catches our own uses of std APIs newer than it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python3; [ -x .venv/bin/python ] && PY=.venv/bin/python
cargo metadata --format-version 1 --locked >target/metadata.json
"$PY" - target/metadata.json <<'PYTHON'
import json, sys
meta = json.load(open(sys.argv[1]))
members = set(meta["workspace_members"])
def ver(v):
    return tuple(int(x) for x in (v.split(".") + ["0", "0"])[:3])
declared = {p["name"]: p.get("rust_version") for p in meta["packages"] if p["id"] in members}
missing = sorted(n for n, v in declared.items() if v is None)
if missing:
    sys.exit(f"msrv: members without rust-version: {missing}")
if len(set(declared.values())) != 1:
    sys.exit(f"msrv: members disagree: {declared}")
msrv = next(iter(declared.values()))
if ver(msrv) < (1, 85, 0):
    sys.exit(f"msrv: {msrv} is older than edition 2024 allows (1.85)")
newer = sorted(
    "{} {} needs {}".format(p["name"], p["version"], p["rust_version"])
    for p in meta["packages"]
    if p["id"] not in members and p.get("rust_version") and ver(p["rust_version"]) > ver(msrv)
)
if newer:
    sys.exit(f"msrv: locked dependencies newer than rust-version {msrv}:\n  " + "\n  ".join(newer))
print(f"msrv: rust-version {msrv} declared by all {len(declared)} members; no locked dependency needs a newer one")
PYTHON
