#!/usr/bin/env bash
# needed by: bench test
# Encoded image columns: Pillow, pinned, into the project virtualenv .venv. The independent
# Python reader (conformance/python) decodes image pages with it (SPEC.md CMP-07), and
# benches/encoded/pil_loader.py times PIL decoding in a PyTorch DataLoader against the loader.
# Idempotent: a second run only checks the installed version.
set -euo pipefail
cd "$(dirname "$0")/../.."

PILLOW_VERSION=11.3.0

if [ ! -x .venv/bin/python ]; then
  echo "setup.d/30-encoded: .venv is missing; run scripts/setup.sh" >&2
  exit 1
fi
if ! .venv/bin/python -c "import PIL, sys; sys.exit(0 if PIL.__version__ == '$PILLOW_VERSION' else 1)" 2>/dev/null; then
  echo "setup.d/30-encoded: installing pillow==$PILLOW_VERSION"
  .venv/bin/pip install --quiet --disable-pip-version-check "pillow==$PILLOW_VERSION"
fi
