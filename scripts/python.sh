#!/usr/bin/env bash
# Builds the Python package `tessera` (python/: pyo3, abi3) into the project's .venv and runs
# its tests (python/tests, pytest). Extra arguments go to pytest.
#
# The extension module is built by plain `cargo build -p tessera-python` (debug, like the Rust
# tests; `--release` when TESSERA_BUILD_PROFILE=release, which scripts/test.sh sets so that
# the whole run shares one build), in the environment every other cargo command of
# scripts/test.sh runs in. That matters: pyo3's build script re-runs, and pyo3, numpy and this crate recompile, whenever
# PYO3_PYTHON or PATH differ from the previous build, and `maturin develop` sets both — so
# going through maturin here would rebuild them on every run of scripts/test.sh (about two
# minutes on two cores). The built library is then installed the way `maturin develop`
# installs a mixed project: copied next to the sources as tessera/_native.abi3.so, with a .pth
# file putting python/ on .venv's path. PYTHON_BUILD=maturin uses `maturin develop` instead
# (the packaging path users take with `pip install ./python`).
# Needs .venv with numpy and torch (scripts/setup.sh makes it).
set -euo pipefail
cd "$(dirname "$0")/.."

MATURIN_VERSION=1.16.0
PYTEST_VERSION=8.4.2
JOBS=${JOBS:-2}
# The tests cover every input `tessera.ingest` can take: the wheel's opt-in video and tables.
FEATURES=video,tables

test -x .venv/bin/python || { echo "python.sh: .venv is missing; run scripts/setup.sh first" >&2; exit 1; }
if ! .venv/bin/maturin --version 2>/dev/null | grep -qx "maturin $MATURIN_VERSION"; then
  .venv/bin/pip install --quiet --disable-pip-version-check "maturin==$MATURIN_VERSION"
fi
if ! .venv/bin/python -c "import pytest, sys; sys.exit(pytest.__version__ != '$PYTEST_VERSION')" 2>/dev/null; then
  .venv/bin/pip install --quiet --disable-pip-version-check "pytest==$PYTEST_VERSION"
fi

echo "== python: build and install the tessera package"
if [ "${PYTHON_BUILD:-cargo}" = maturin ]; then
  VIRTUAL_ENV="$PWD/.venv" .venv/bin/maturin develop --quiet --profile dev -m python/Cargo.toml -j"$JOBS" --features "$FEATURES"
else
  case ${TESSERA_BUILD_PROFILE:-debug} in
    debug) profile=() ;;
    release) profile=(--release) ;;
    *) echo "python.sh: TESSERA_BUILD_PROFILE is debug or release, not $TESSERA_BUILD_PROFILE" >&2; exit 2 ;;
  esac
  cargo build --locked -j"$JOBS" "${profile[@]}" -p tessera-python --features "$FEATURES"
  TARGET_DIR=$(cargo metadata --format-version 1 --no-deps --locked |
    .venv/bin/python -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
  # Replace, never write into, the file: a running interpreter may have the old one mapped.
  cp "$TARGET_DIR/${TESSERA_BUILD_PROFILE:-debug}/lib_native.so" python/tessera/_native.tmp.so
  mv -f python/tessera/_native.tmp.so python/tessera/_native.abi3.so
  SITE=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$PWD/python" >"$SITE/tessera.pth"
fi

echo "== python: pytest python/tests"
.venv/bin/python -m pytest python/tests -q "$@"
