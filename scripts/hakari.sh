#!/usr/bin/env bash
# Keeps workspace-hack/ (the feature-unification package every member depends on) current:
#   scripts/hakari.sh           regenerate it and its dependency lines (after changing any
#                               member's dependencies or features)
#   scripts/hakari.sh verify    only check that it is current (exit 1 when regenerating it
#                               would change it)
# (`cargo hakari verify` itself reports libc's Linux-only `extra_traits` feature as not
# unified when it simulates "any platform"; on the platform configured in
# .config/hakari.toml it is, so the check here is that generating changes nothing.)
# Installs the pinned cargo-hakari into .tools/ on first use (about 3 minutes on 2 cores).
# scripts/test.sh does not run it; its report of crates built twice shows a stale hack.
set -euo pipefail
cd "$(dirname "$0")/.."
HAKARI_VERSION=0.9.39
ROOT=$PWD/.tools/hakari
if ! "$ROOT/bin/cargo-hakari" hakari --version 2>/dev/null | grep -qx "cargo-hakari $HAKARI_VERSION"; then
  cargo install cargo-hakari --version "$HAKARI_VERSION" --locked --root "$ROOT" -j"${JOBS:-2}"
fi
export PATH=$ROOT/bin:$PATH
if [ "${1:-}" = verify ]; then
  cargo hakari generate --diff
  cargo hakari manage-deps --dry-run
else
  cargo hakari generate
  cargo hakari manage-deps --yes
fi
