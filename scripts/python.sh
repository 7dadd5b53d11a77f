#!/usr/bin/env bash
# Builds the Python package `tessera` (python/: pyo3 + maturin, abi3) into the project's
# .venv and runs its tests (python/tests, pytest). Extra arguments go to pytest.
#
# `maturin develop --profile dev` builds with cargo in the workspace's target/ (a debug build, like the
# Rust tests), so a warm workspace build is reused, and installs the package into .venv in
# editable form. Needs .venv with numpy and torch (scripts/setup.sh makes it).
set -euo pipefail
cd "$(dirname "$0")/.."

MATURIN_VERSION=1.16.0
PYTEST_VERSION=8.4.2

test -x .venv/bin/python || { echo "python.sh: .venv is missing; run scripts/setup.sh first" >&2; exit 1; }
if ! .venv/bin/maturin --version 2>/dev/null | grep -qx "maturin $MATURIN_VERSION"; then
  .venv/bin/pip install --quiet --disable-pip-version-check "maturin==$MATURIN_VERSION"
fi
if ! .venv/bin/python -c "import pytest, sys; sys.exit(pytest.__version__ != '$PYTEST_VERSION')" 2>/dev/null; then
  .venv/bin/pip install --quiet --disable-pip-version-check "pytest==$PYTEST_VERSION"
fi

echo "== python: build and install the tessera package (maturin develop)"
# maturin runs cargo for python/Cargo.toml, a workspace member: artefacts go to target/.
VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH" \
  .venv/bin/maturin develop --quiet --profile dev -m python/Cargo.toml -j"${JOBS:-2}"

echo "== python: pytest python/tests"
.venv/bin/python -m pytest python/tests -q "$@"
