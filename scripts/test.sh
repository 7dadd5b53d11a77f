#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: set-up, then the Rust workspace
# (unit, integration, doc tests, conformance against the golden fixtures).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
JOBS=${JOBS:-2}

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo test (workspace)"
cargo test --workspace --locked -j"$JOBS" 2>&1 | tee target/test-output.log
# Summarise across all test binaries into one closing line.
awk '/^test result:/ { p += $4; f += $6; i += $8 } END { printf "workspace: %d passed, %d failed\n", p, f }' target/test-output.log
