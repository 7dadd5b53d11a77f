#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: set-up; the checks review would make
# (format, MSRV, a build of the libtorch-free crates without libtorch, clippy with warnings
# denied, rustdoc with warnings denied); then the Rust workspace (unit, integration and doc
# tests, the README's console and Rust blocks, conformance against the golden fixtures, and
# the storage suites against local S3 (moto) and Azure (Azurite) servers on loopback); then
# the independent Python reader and writer against every fixture (its own runner, then the
# Rust runner).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

echo "== object-storage test servers"
ci() { case ${CI:-} in ""|false|0) return 1;; *) return 0;; esac; }
status=$(bash scripts/servers.sh status)
if [[ $status == *"running"* ]]; then
  # Started by hand: use them and leave them running; start the one that is not (a server
  # that died since would otherwise fail its storage tests).
  [[ $status != *"stopped"* ]] || bash scripts/servers.sh start
  echo "test: using the servers already running (scripts/servers.sh stop stops them)"
else
  trap 'bash scripts/servers.sh stop || true' EXIT
  if ! bash scripts/servers.sh start; then
    if ci; then
      echo "test: the S3/Azure test servers failed to start (logs: target/servers/*.log)." >&2
      echo "test: start them by hand with 'scripts/servers.sh start' to see why; storage tests are never skipped in CI." >&2
      exit 1
    fi
    echo "test: WARNING: S3/Azure test servers not started; their storage tests will be skipped" >&2
  fi
fi
if [[ $(bash scripts/servers.sh status) == *"running"* ]]; then
  eval "$(bash scripts/servers.sh env)"
fi

export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
JOBS=${JOBS:-2}

echo "== disk: what the build may use"
# A cold run writes about 10.5 GB of build outputs under target/ (debug and release builds,
# test binaries, the Python extension), besides the ~6.5 GB of .venv. Incremental state (14 GB
# in one long-used checkout) buys nothing in a one-shot run, and a target/ kept between runs
# fills with stale artifacts (one CI run died of a full disk): in CI, incremental is off, and
# when space is short the build outputs (never the data under target/) are removed first.
if ci; then
  export CARGO_INCREMENTAL=0
  rm -rf target/debug/incremental target/release/incremental
  free_gib=$(df -Pk . | awk 'NR == 2 { print int($4 / 1048576) }')
  if [ "$free_gib" -lt "${TESSERA_MIN_FREE_GIB:-25}" ]; then
    echo "test: only ${free_gib} GiB free; removing the build outputs under target/ (a cold build follows)"
    rm -rf target/debug target/release target/doc
  fi
fi
df -h . | tail -n 1

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== rust-version (MSRV) declared and honoured by the locked dependencies"
bash scripts/check-msrv.sh

echo "== the crates without libtorch build without it (only loader-tch, benches and cli --features bench link it)"
LIBTORCH=/nonexistent-libtorch cargo build --locked -j"$JOBS" \
  -p tessera -p tessera-loader -p tessera-cli -p tessera-conformance -p tessera-testkit -p tessera-fuzz-harness

echo "== cargo clippy (every target, warnings denied)"
cargo clippy --workspace --all-targets --locked -j"$JOBS" -- -D warnings

echo "== cargo test (workspace)"
cargo test --workspace --locked -j"$JOBS" 2>&1 | tee target/test-output.log
# Summarise across all test binaries into one closing line.
awk '/^test result:/ { p += $4; f += $6; i += $8 } END { printf "workspace: %d passed, %d failed\n", p, f }' target/test-output.log

echo "== cargo doc (warnings denied)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked -j"$JOBS"

echo "== conformance: independent Python reader and writer (conformance/python)"
.venv/bin/python conformance/python/test_tessera_py.py
.venv/bin/python conformance/python/test_tessera_write.py
.venv/bin/python conformance/python/run_fixtures.py
# The runner with the Python implementation as reader and as writer: what it writes is read
# back, verified and linted by the reference (conformance/README.md, "Writer cases").
cargo run -q --locked -p tessera-conformance --bin tessera-conformance -- \
  --adapter "py=.venv/bin/python conformance/python/adapter.py" --writer

echo "== Python package: build into .venv, pytest (python/tests)"
bash scripts/python.sh

echo "== README: every command it shows (scripts/readme.sh; includes the main job, scripts/train.sh)"
TESSERA_IN_TEST=1 bash scripts/readme.sh

echo "== disk: after the run"
df -h . | tail -n 1
du -sh target 2>/dev/null || true
