#!/usr/bin/env bash
# needed by: test
# TensorFlow (CPU) for `ds.tensorflow()` and its test (python/tests/test_tensorflow.py): a
# pinned version that installs into .venv beside torch, JAX and Ray without changing any of
# their packages (checked with `pip install --dry-run`: new packages only). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."

TF_VERSION=2.21.0

test -x .venv/bin/python || { echo "setup.d/45-tensorflow: .venv is missing (scripts/setup.sh makes it first)" >&2; exit 1; }
if ! .venv/bin/python -c "
import sys
from importlib.metadata import version
sys.exit(version('tensorflow-cpu') != '$TF_VERSION')" 2>/dev/null; then
  echo "setup.d/45-tensorflow: installing tensorflow-cpu==$TF_VERSION (about 400 MB, a minute)"
  .venv/bin/pip install --quiet --disable-pip-version-check "tensorflow-cpu==$TF_VERSION"
fi
