#!/usr/bin/env bash
# needed by: test
# The LZ4 codec of the independent Python implementation (conformance/python): the standard
# `lz4` package (liblz4's block API), pinned, into the project virtualenv .venv.
# Idempotent: a second run only checks the installed version.
set -euo pipefail
cd "$(dirname "$0")/../.."

LZ4_VERSION=4.4.5

if [ ! -x .venv/bin/python ]; then
  echo "setup.d/10-pyconf: .venv is missing; run scripts/setup.sh" >&2
  exit 1
fi
if ! .venv/bin/python -c "import lz4, lz4.block, sys; sys.exit(0 if lz4.__version__ == '$LZ4_VERSION' else 1)" 2>/dev/null; then
  echo "setup.d/10-pyconf: installing lz4==$LZ4_VERSION"
  .venv/bin/pip install --quiet --disable-pip-version-check "lz4==$LZ4_VERSION"
fi
