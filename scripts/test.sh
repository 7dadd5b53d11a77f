#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: set-up; the checks review would make
# (format, MSRV, a build of the libtorch-free crates without libtorch, clippy with warnings
# denied, rustdoc with warnings denied); then the Rust workspace (unit, integration and doc
# tests, the README's console and Rust blocks, conformance against the golden fixtures, and
# the storage suites against local S3 (moto) and Azure (Azurite) servers on loopback); then
# the independent Python reader and writer against every fixture (its own runner, then the
# Rust runner). Set-up and the servers must succeed; after them every phase runs even when
# an earlier one failed, and the run ends with the list of failed phases.
set -euo pipefail
cd "$(dirname "$0")/.."

# Seconds per phase, printed as a table at the end of the run (and on failure), so that a
# regression of the suite's time shows in every CI log.
timings=()
run_started=$SECONDS
mark=$SECONDS
timed() { # NAME: records the seconds since the previous mark under NAME
  timings+=("$(printf '%6d s  %s' $((SECONDS - mark)) "$1")")
  mark=$SECONDS
}
time_table() {
  echo "== time per phase"
  printf '%s\n' "${timings[@]}"
  printf '%6d s  total\n' $((SECONDS - run_started))
}

ci() { case ${CI:-} in ""|false|0) return 1;; *) return 0;; esac; }

# One build profile for the whole run (see the file): the cargo commands below all pass
# `--release`, which inside the tests is an unoptimised build with debug assertions.
. scripts/test-profile.sh
release=(--release)

# Set-up is mostly downloading and unpacking (torch alone is 4.6 GB) and the first build is
# all CPU, so set-up runs in the background beside the format checks and the libtorch-free
# build, which need only the FFmpeg/clang packages (installed first, in the foreground).
# The first command that needs .venv waits for it; a failed set-up ends the run.
mkdir -p target
bash scripts/setup.d/20-media.sh
bash scripts/setup.sh test >target/setup.log 2>&1 &
setup_pid=$!
setup_done=
servers_started=
cleanup() {
  if [ -z "$setup_done" ]; then pkill -P "$setup_pid" 2>/dev/null; kill "$setup_pid" 2>/dev/null; fi || true
  [ -z "$servers_started" ] || bash scripts/servers.sh stop || true
}
trap cleanup EXIT
wait_for_setup() {
  [ -z "$setup_done" ] || return 0
  echo "== set-up (scripts/setup.sh test, in the background since the start; log: target/setup.log)"
  if ! wait "$setup_pid"; then
    cat target/setup.log >&2
    echo "test: set-up failed (scripts/setup.sh test)" >&2
    exit 1
  fi
  cat target/setup.log
  setup_done=1
}
timed "FFmpeg/clang packages (scripts/setup.d/20-media.sh); set-up started"

export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
JOBS=${JOBS:-2}

echo "== disk: what the build may use"
# A cold run writes about 10.5 GB of build outputs under target/ (one build for the tests and
# the README, test binaries, the Python extension, and the check-only metadata of clippy and
# rustdoc), besides the ~6.5 GB of .venv. Incremental state (14 GB
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

# Every phase below runs even when an earlier one failed (a failing suite must not hide the
# others); the run then exits non-zero and lists the phases that failed.
failed=()
phase() {
  local name=$1
  shift
  echo "== $name"
  mark=$SECONDS
  if ! "$@"; then
    echo "test: FAILED: $name" >&2
    failed+=("$name")
    timed "$name (FAILED)"
  else
    timed "$name"
  fi
}

phase "cargo fmt --check" cargo fmt --all -- --check

phase "rust-version (MSRV) declared and honoured by the locked dependencies" bash scripts/check-msrv.sh

phase "the crates without libtorch build without it (only loader-tch, train, benches and cli --features bench link it)" \
  env LIBTORCH=/nonexistent-libtorch cargo build --locked -j"$JOBS" "${release[@]}" \
  -p tessera -p tessera-loader -p tessera-cli -p tessera-conformance -p tessera-testkit -p tessera-fuzz-harness

mark=$SECONDS
wait_for_setup
timed "set-up: what was left of it after the build above (scripts/setup.sh test)"

echo "== object-storage test servers"
status=$(bash scripts/servers.sh status)
if [[ $status == *"running"* ]]; then
  # Started by hand: use them and leave them running; start the one that is not (a server
  # that died since would otherwise fail its storage tests).
  [[ $status != *"stopped"* ]] || bash scripts/servers.sh start
  echo "test: using the servers already running (scripts/servers.sh stop stops them)"
else
  servers_started=1
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
timed "object-storage test servers"


# clippy and rustdoc only check (metadata, no code): they share the dependencies' check-mode
# build under target/debug, whatever the profile of the builds above.
phase "cargo clippy (every target, warnings denied)" \
  cargo clippy --workspace --all-targets --locked -j"$JOBS" -- -D warnings

workspace_tests() {
  set -o pipefail
  cargo test --workspace --locked --no-fail-fast -j"$JOBS" "${release[@]}" 2>&1 | tee target/test-output.log
  local rc=$?
  # Summarise across all test binaries into one closing line.
  awk '/^test result:/ { p += $4; f += $6 } END { printf "workspace: %d passed, %d failed\n", p, f }' target/test-output.log
  return $rc
}
phase "cargo test (workspace, every suite even after a failure)" workspace_tests

# The distance kernels pick a SIMD level at run time; every level must give the same bits
# (SPEC.md §23). The reference's own tests call each level directly; here the query's top-k
# and SQL suites run again on the portable level, so both paths are exercised end to end.
portable_distances() {
  TESSERA_SIMD=portable cargo test --locked --no-fail-fast -j"$JOBS" "${release[@]}" -p tessera-query --test topk --test props &&
    TESSERA_SIMD=portable cargo test --locked --no-fail-fast -j"$JOBS" "${release[@]}" -p tessera-cli --test query
}
phase "vector distances on the portable SIMD level (TESSERA_SIMD=portable)" portable_distances

# `tessera bench` is behind a feature (it links libtorch); the workspace run above builds the
# CLI without it, so its test runs here.
phase "tessera bench (cli --features bench)" \
  cargo test --locked --no-fail-fast -j"$JOBS" "${release[@]}" -p tessera-cli --features bench --test commands bench

phase "cargo doc (warnings denied)" env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked -j"$JOBS"

phase "conformance: independent Python reader (conformance/python)" .venv/bin/python conformance/python/test_tessera_py.py
phase "conformance: independent Python writer" .venv/bin/python conformance/python/test_tessera_write.py
phase "conformance: Python reader against every fixture" .venv/bin/python conformance/python/run_fixtures.py
# The runner with the Python implementation as reader and as writer: what it writes is read
# back, verified and linted by the reference (conformance/README.md, "Writer cases").
phase "conformance: the runner with the Python implementation as reader and writer" \
  cargo run -q --locked "${release[@]}" -p tessera-conformance --bin tessera-conformance -- \
  --adapter "py=.venv/bin/python conformance/python/adapter.py" --writer

phase "Python package: build into .venv, pytest (python/tests)" bash scripts/python.sh

phase "README: every command it shows (scripts/readme.sh; includes the main job, scripts/train.sh)" \
  env TESSERA_IN_TEST=1 bash scripts/readme.sh

echo "== disk: after the run"
df -h . | tail -n 1
du -sh target 2>/dev/null || true
time_table

if [ ${#failed[@]} -gt 0 ]; then
  echo "test: ${#failed[@]} phase(s) failed:" >&2
  printf '  - %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "test: every phase passed"
