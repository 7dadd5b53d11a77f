#!/usr/bin/env bash
# Runs the cargo-fuzz targets of fuzz/ on the stable toolchain.
#
#   scripts/fuzz.sh [seconds-per-target] [target...]      (default: 60 s, every target)
#
# Installs cargo-fuzz into .tools/ if missing, builds every target (RUSTC_BOOTSTRAP=1 lets
# stable rustc accept the -Z flags cargo-fuzz passes), runs each target in turn for the given
# time with bounded memory, prints executions, time and crashes per target, and exits non-zero
# if any target crashed, timed out or ran out of memory. Findings land in fuzz/artifacts/<t>/.
#
# Environment:
#   FUZZ_SANITIZER  address (default; needed for -malloc_limit_mb) or none (about 2x faster)
#   FUZZ_JOBS       cargo build jobs (default 2)
#   FUZZ_TIMEOUT    seconds one input may run (default 10)
#   FUZZ_RSS_MB     -rss_limit_mb (default 2048)     FUZZ_MALLOC_MB  -malloc_limit_mb (default 512)
#   FUZZ_MERGE=1    afterwards merge new coverage into fuzz/corpus/<t> and minimize it (cmin)
#   FUZZ_ARGS       extra libFuzzer arguments
#   FUZZ_BUILD_ARGS extra `cargo fuzz build/run` flags, e.g. --no-trace-compares (about 2.3x
#                   faster on `roundtrip`, whose structured input gains little from compare tracing)
#
# New inputs found during a run go to fuzz/target/fuzz-corpus/<t>/ (not committed); the
# committed seed corpus fuzz/corpus/<t>/ and fuzz/regressions/<t>/ are read-only inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SECS=${1:-60}
shift || true
JOBS=${FUZZ_JOBS:-2}
SAN=${FUZZ_SANITIZER:-address}
TIMEOUT=${FUZZ_TIMEOUT:-10}
RSS=${FUZZ_RSS_MB:-2048}
MALLOC=${FUZZ_MALLOC_MB:-512}

export PATH="$ROOT/.tools/bin:$PATH"
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz into .tools/"
  cargo install cargo-fuzz --locked --root "$ROOT/.tools" -j"$JOBS"
fi
export RUSTC_BOOTSTRAP=1 CARGO_BUILD_JOBS=$JOBS
# cc-rs instruments C code (libzstd) with -fsanitize=address too; GCC's use-after-scope
# instrumentation mixed with rustc's LLVM ASan runtime reports a false "stack-use-after-scope"
# on a function-local static table of zstd_opt.c (zstd levels >= 16). Keep ASan on the C code
# but without that check. (Must stay the same between runs, or everything is rebuilt.)
export CFLAGS="-fno-sanitize-address-use-after-scope"

cd fuzz
echo "fuzz: building targets (sanitizer: $SAN)"
# shellcheck disable=SC2086
cargo fuzz build -s "$SAN" ${FUZZ_BUILD_ARGS:-} >/dev/null
if [ $# -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(cargo fuzz list); fi

mkdir -p target/fuzz-logs
failed=0
summary=()
for t in "${targets[@]}"; do
  work="target/fuzz-corpus/$t"
  mkdir -p "$work" "corpus/$t" "artifacts/$t"
  dirs=("$work" "corpus/$t")
  [ -d "regressions/$t" ] && dirs+=("regressions/$t")
  log="target/fuzz-logs/$t.log"
  before=$(find "artifacts/$t" -type f | wc -l)
  echo "fuzz: $t for ${SECS}s"
  set +e
  # shellcheck disable=SC2086
  cargo fuzz run -s "$SAN" ${FUZZ_BUILD_ARGS:-} "$t" "${dirs[@]}" -- \
    -max_total_time="$SECS" -rss_limit_mb="$RSS" -malloc_limit_mb="$MALLOC" -timeout="$TIMEOUT" \
    -print_final_stats=1 -close_fd_mask=1 ${FUZZ_ARGS:-} >"$log" 2>&1
  rc=$?
  set -e
  after=$(find "artifacts/$t" -type f | wc -l)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  [ -n "$runs" ] || runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  crashes=$((after - before))
  kind=$(grep -oE "ERROR: libFuzzer: [a-z-]+|deadly signal|panicked at" "$log" | head -1 || true)
  if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    failed=1
    summary+=("$(printf '%-16s runs=%-10s secs=%-5s exec/s=%-7s crashes=%s rc=%s %s (see fuzz/%s)' \
      "$t" "${runs:-?}" "${took:-?}" "${speed:-?}" "$crashes" "$rc" "$kind" "$log")")
  else
    summary+=("$(printf '%-16s runs=%-10s secs=%-5s exec/s=%-7s crashes=0' "$t" "${runs:-?}" "${took:-?}" "${speed:-?}")")
  fi
  if [ "${FUZZ_MERGE:-0}" = 1 ] && [ "$rc" -eq 0 ]; then
    cargo fuzz run -s "$SAN" ${FUZZ_BUILD_ARGS:-} "$t" "corpus/$t" "$work" -- -merge=1 -rss_limit_mb="$RSS" \
      -malloc_limit_mb="$MALLOC" -timeout="$TIMEOUT" >>"$log" 2>&1
    cargo fuzz cmin -s "$SAN" "$t" "corpus/$t" -- -rss_limit_mb="$RSS" -malloc_limit_mb="$MALLOC" \
      -timeout="$TIMEOUT" >>"$log" 2>&1
  fi
done

echo
echo "fuzz summary (${SECS}s per target, sanitizer $SAN):"
printf '  %s\n' "${summary[@]}"
if [ "$failed" -ne 0 ]; then
  echo "fuzz: FAILED (crash, timeout or out-of-memory; inputs in fuzz/artifacts/)" >&2
  exit 1
fi
