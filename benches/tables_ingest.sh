#!/usr/bin/env bash
# Ingest rate of `tessera ingest` for Parquet input: rows/s, MB/s of input file and MB/s of
# decoded output (the raw bytes the dataset stores before compression), from the command's
# own --json summary, for two tables in the Hugging Face datasets layout:
#   images  - PNG images in {bytes, path} structs (96x96 RGB) and a ClassLabel column: the
#             decode-bound case;
#   vectors - an f32 [768] embedding, variable-length i32 token lists and an i64 id: the
#             copy-bound case;
#   npy     - the same vectors from the .npy files they were made from (no Parquet decode:
#             the rest of the ingest pipeline, for the ratio).
#
#   benches/tables_ingest.sh [--small] [--jobs N]
#
# Inputs are made once under target/bench-tables/ with the release binaries themselves
# (`cargo build --release -p tessera-cli --example make_inputs --bin tessera`): JPEGs from
# make_inputs (images) and .npy arrays from numpy (.venv, vectors) are ingested, then
# exported with `tessera export --format parquet`; the timed run ingests that Parquet file
# into a fresh dataset. --small (for CI) makes 200 and 2,000 rows.
set -euo pipefail
cd "$(dirname "$0")/.."

images=4000 vectors=40000 jobs=$(nproc)
while [ $# -gt 0 ]; do
  case $1 in
    --small) images=200 vectors=2000 ;;
    --jobs) jobs=$2; shift ;;
    *) echo "usage: $0 [--small] [--jobs N]" >&2; exit 2 ;;
  esac
  shift
done
bin=target/release/tessera make=target/release/examples/make_inputs
PY=python3; [ -x .venv/bin/python ] && PY=.venv/bin/python
[ -x "$bin" ] && [ -x "$make" ] || {
  echo "build first: cargo build --release -p tessera-cli --example make_inputs --bin tessera" >&2
  exit 1
}

root=target/bench-tables/$images-$vectors
if [ ! -e "$root/.done" ]; then
  rm -rf "$root"
  mkdir -p "$root/npy"
  "$make" "$root/jpeg" "$images" 96 1 > /dev/null
  "$bin" ingest "$root/images.tessera" "$root/jpeg/folder" --size 96 -q
  "$bin" export "$root/images.tessera" -o "$root/images" --format parquet -q > /dev/null
  "$PY" - "$root/npy" "$vectors" <<'PY'
import json, sys
import numpy as np
out, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(7)
np.save(f"{out}/emb.npy", rng.standard_normal((n, 768), dtype=np.float32))
lengths = rng.integers(16, 256, n)
np.save(f"{out}/tokens.lengths.npy", lengths.astype(np.uint64).reshape(n, 1))
np.save(f"{out}/tokens.values.npy", rng.integers(0, 50000, int(lengths.sum()), dtype=np.int32))
np.save(f"{out}/id.npy", np.arange(n, dtype=np.int64))
PY
  "$bin" ingest "$root/vectors.tessera" "$root/npy" -q
  "$bin" export "$root/vectors.tessera" -o "$root/vectors" --format parquet -q > /dev/null
  touch "$root/.done"
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-8s %7s %8s %9s %10s %13s %12s\n' table rows seconds rows/s "MB/s in" "decoded MB" "MB/s out"
# The same vectors from their .npy files: the ingest pipeline without a Parquet decode.
for run in images:images vectors:vectors npy:npy; do
  name=${run%%:*} src=$root/${run#*:}
  "$bin" --json ingest "$out/$name" "$src" -q --jobs "$jobs" > "$out/$name.json"
  "$PY" - "$name" "$out/$name.json" "$(du -sb --exclude=tessera.schema.json "$src" | cut -f1)" <<'PY'
import json, sys
name, path, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = json.load(open(path))
t, mb = s["seconds"], s["bytes_raw"] / 1e6
print(f'{name:<8} {s["rows"]:>7} {t:>8.2f} {s["rows"] / t:>9.0f} {size / 1e6 / t:>10.1f} {mb:>13.1f} {mb / t:>12.1f}')
PY
done
echo "($(nproc) CPUs, --jobs $jobs; images: 96x96 RGB PNG + class label; vectors: f32 [768] + i32 [16..255] + i64)"
