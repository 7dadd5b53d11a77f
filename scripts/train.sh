#!/usr/bin/env bash
# The main job: set-up (libtorch only), then train a small convnet from a Tessera dataset on the local default
# store (generated on first run under data/shapes). Extra arguments go to the example, e.g.
#   scripts/train.sh --epochs 5 --shuffle block
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh train
exec cargo run --release --locked -j"${JOBS:-2}" -p tessera-train -- "$@"
