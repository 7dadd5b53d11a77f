#!/usr/bin/env bash
# Ray ingest throughput (1 and 2 workers) against single-process `tessera ingest` on the same
# .npy input, and the commit time of 1,000 fragment records: release builds of the CLI and of
# the Python extension (staged in a temporary package, the installed debug one is untouched).
# Needs scripts/setup.sh (Ray from scripts/setup.d/40-ray.sh). Extra arguments go to
# bench.py (e.g. --rows 20000 --repeat 1 for a quick run).
set -euo pipefail
cd "$(dirname "$0")/../.."

cargo build --release --locked -p tessera-cli -p tessera-python
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps --locked |
  .venv/bin/python -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir "$STAGE/tessera"
cp python/tessera/*.py python/tessera/py.typed "$STAGE/tessera/"
cp "$TARGET_DIR/release/lib_native.so" "$STAGE/tessera/_native.abi3.so"
# Ray workers inherit the driver's environment: they import the staged package too.
PYTHONPATH="$STAGE" .venv/bin/python benches/ray/bench.py --tessera "$TARGET_DIR/release/tessera" "$@"
