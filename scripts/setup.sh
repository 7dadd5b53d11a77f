#!/usr/bin/env bash
# Installs everything the project needs that cargo does not: libtorch (PyTorch 2.11.0 from
# PyPI) into the project-local virtualenv .venv, which .cargo/config.toml points LIBTORCH at,
# and the local object-storage test servers (moto into .venv, Azurite into .tools/azurite; see
# scripts/servers.sh; TESSERA_SKIP_SERVERS=1 skips them).
# Idempotent: a second run only checks. Optional parts live in scripts/setup.d/.
set -euo pipefail
# torch alone is 4.6 GB; a pip cache would double that on disk.
export PIP_NO_CACHE_DIR=${PIP_NO_CACHE_DIR:-1}
cd "$(dirname "$0")/.."

TORCH_VERSION=2.11.0
ZSTANDARD_VERSION=0.25.0
PY=${PYTHON:-python3}

command -v cargo >/dev/null || { echo "setup: cargo is required (https://rustup.rs)" >&2; exit 1; }
command -v "$PY" >/dev/null || { echo "setup: $PY is required to install libtorch" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import torch, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$TORCH_VERSION' else 1)" 2>/dev/null; then
  echo "setup: installing torch==$TORCH_VERSION (about a minute, ~4.6 GB)"
  .venv/bin/pip install --quiet --disable-pip-version-check "torch==$TORCH_VERSION"
fi
# zstandard: the zstd codec of the independent Python reader (conformance/python).
if ! .venv/bin/python -c "import numpy, zstandard" 2>/dev/null; then
  .venv/bin/pip install --quiet --disable-pip-version-check numpy "zstandard==$ZSTANDARD_VERSION"
fi
# A stable path for LIBTORCH whatever the Python minor version is.
SITE=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ln -sfn "$SITE/torch" .venv/libtorch
test -f .venv/libtorch/lib/libtorch_cpu.so || { echo "setup: libtorch not found under .venv/libtorch" >&2; exit 1; }
if [ "${TESSERA_SKIP_SERVERS:-0}" != 1 ] && ! bash scripts/servers.sh install; then
  case ${CI:-} in
    ""|false|0) echo "setup: WARNING: test servers not installed; S3/Azure storage tests will be skipped" >&2 ;;
    *) echo "setup: installing the S3/Azure test servers failed (scripts/servers.sh install)" >&2; exit 1 ;;
  esac
fi
# Optional parts, one script each (media decoders, Ray, the peers of the benchmark, ...):
# every scripts/setup.d/*.sh is idempotent and runs in name order.
for extra in scripts/setup.d/*.sh; do
  [ -e "$extra" ] || continue
  bash "$extra"
done
echo "setup: ok (libtorch at $(readlink .venv/libtorch))"
