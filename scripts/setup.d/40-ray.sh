#!/usr/bin/env bash
# needed by: test
# Ray Data for `tessera.ray` (python/tessera/ray.py) and its tests (python/tests/test_ray.py,
# the README's "When one machine is not enough"), and JAX on CPU for `ds.jax()`'s test:
# pinned versions that work with .venv's Python 3.11, numpy 2.4 and torch 2.11 (neither is
# changed). Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/../.."

RAY_VERSION=2.60.0
JAX_VERSION=0.10.2  # the last jax for Python 3.11

test -x .venv/bin/python || { echo "setup.d/40-ray: .venv is missing (scripts/setup.sh makes it first)" >&2; exit 1; }
if ! .venv/bin/python - <<PY 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(version("ray") != "$RAY_VERSION" or version("jax") != "$JAX_VERSION" or not version("pyarrow"))
PY
then
  echo "setup.d/40-ray: installing ray[data]==$RAY_VERSION and jax[cpu]==$JAX_VERSION (about a minute)"
  .venv/bin/pip install --quiet --disable-pip-version-check "ray[data]==$RAY_VERSION" "jax[cpu]==$JAX_VERSION"
fi
