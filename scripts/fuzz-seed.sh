#!/usr/bin/env bash
# Writes the fuzz seed corpora into fuzz/corpus/<target>/, deterministically:
#   scripts/fuzz-seed.sh [fixtures-dir]      (default: fixtures/cases when it exists)
#
# Seeds are written from datasets the reference writer creates (fixed timestamps and writer
# ids) plus, when present, every data file, manifest, segment, tag and deletion vector of the
# fixtures directory and each fixture dataset as a whole store layout. Files are named by the
# SHA-256 of their content, so duplicates collapse and re-running only adds what is new.
set -euo pipefail
cd "$(dirname "$0")/.."
FIXTURES=${1:-fixtures/cases}
args=(fuzz/corpus)
[ -d "$FIXTURES" ] && args+=("$FIXTURES")
cargo run -q -j"${JOBS:-2}" -p tessera-fuzz-harness --bin tessera-fuzz-seed -- "${args[@]}"
