#!/usr/bin/env bash
# Installs what the project needs that cargo does not, by purpose:
#
#   scripts/setup.sh train   libtorch (PyTorch 2.11.0 from PyPI) into the project-local
#                            virtualenv .venv, which .cargo/config.toml points LIBTORCH at:
#                            all that scripts/train.sh needs
#   scripts/setup.sh cli     + the FFmpeg/clang development packages the CLI's video input
#                            builds against, and the ffmpeg and sox tools
#   scripts/setup.sh bench   + the peers of the benchmark (.venv-peers) and its HTTP server
#   scripts/setup.sh test    everything the tests use: all of the above, the S3/Azure test
#                            servers, the independent Python implementation's codecs, Ray, JAX
#   scripts/setup.sh         everything
#
# libtorch is part of every purpose; each other part is one script in scripts/setup.d/ whose
# `# needed by:` line names the purposes it serves. Idempotent: a second run only checks.
set -euo pipefail
# torch alone is 4.6 GB; a pip cache would double that on disk.
export PIP_NO_CACHE_DIR=${PIP_NO_CACHE_DIR:-1}
cd "$(dirname "$0")/.."

TORCH_VERSION=2.11.0
ZSTANDARD_VERSION=0.25.0
PY=${PYTHON:-python3}

purposes=("$@")
[ ${#purposes[@]} -gt 0 ] || purposes=(train cli bench test)
for p in "${purposes[@]}"; do
  case $p in
    train|cli|bench|test) ;;
    *) echo "usage: scripts/setup.sh [train|cli|bench|test]... (none: everything)" >&2; exit 2 ;;
  esac
done

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
# numpy (torch's tensors from and to arrays); zstandard: the zstd codec of the independent
# Python reader (conformance/python).
if ! .venv/bin/python -c "import numpy, zstandard" 2>/dev/null; then
  .venv/bin/pip install --quiet --disable-pip-version-check numpy "zstandard==$ZSTANDARD_VERSION"
fi
# A stable path for LIBTORCH whatever the Python minor version is.
SITE=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ln -sfn "$SITE/torch" .venv/libtorch
test -f .venv/libtorch/lib/libtorch_cpu.so || { echo "setup: libtorch not found under .venv/libtorch" >&2; exit 1; }

# The parts, in name order: those whose `# needed by:` line names a requested purpose.
for part in scripts/setup.d/*.sh; do
  [ -e "$part" ] || continue
  needed_by=$(sed -n 's/^# needed by: *//p' "$part" | head -n 1)
  [ -n "$needed_by" ] || { echo "setup: $part has no '# needed by:' line" >&2; exit 1; }
  for p in "${purposes[@]}"; do
    if [[ " $needed_by " == *" $p "* ]]; then
      bash "$part"
      break
    fi
  done
done
echo "setup: ok for ${purposes[*]} (libtorch at $(readlink .venv/libtorch))"
