#!/usr/bin/env bash
# The benchmarks' S3 bucket: bench-s3 (benches/s3serve: an S3 endpoint over a local folder,
# each sub-folder a bucket) on loopback, optionally behind a delay of RTT_MS milliseconds per
# round trip, so that the loader and its peers all read one bucket through their own S3
# clients (object_store, boto3) and all see the same network delay.
#
#   scripts/benchbucket.sh start [DIR] [RTT_MS]  # serve DIR (default: target/) on 127.0.0.1:${TESSERA_BUCKET_PORT:-9100}
#   scripts/benchbucket.sh stop
#   scripts/benchbucket.sh env     # the settings every client reads: eval "$(bash scripts/benchbucket.sh env)"
#   scripts/benchbucket.sh status
#
# TESSERA_BUCKET_PORT (the server's; the proxy takes the next) and TESSERA_BUCKET_RUN (where
# pids and logs go) let a test run its own instance beside the benchmark's
# (benches/tests/servers.rs does).
#
# The delay: where the kernel has `sch_netem`, a private network namespace whose loopback
# carries `tc netem delay` is the right tool, but every client would have to run inside it.
# This script checks for netem in a scratch namespace and, where it is missing (as on the
# Firecracker kernels here, which have neither netem nor fq), puts a delay proxy process
# (benches/src/bin/delay_proxy.rs) between the clients and the server instead, and says so.
# The proxy holds each direction's bytes for half the round trip; it costs a copy each way on
# the same cores as the clients, the same for every system measured.
#
# Why not an S3 server from the registries: moto serves large ranges at ~8 MB/s, s3rver (npm)
# at ~0.5 GB/s, s3s-fs (crates.io) at ~0.15 GB/s (4 KiB reads, an MD5 of the whole file per
# GET); bench-s3 is s3s-fs with its own reads, 1.0–1.7 GB/s here (`server_rate s3 …`).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

HOST=127.0.0.1
PORT=${TESSERA_BUCKET_PORT:-9100}
PROXY_PORT=$((PORT + 1))
RUN=${TESSERA_BUCKET_RUN:-$ROOT/target/benchbucket}
WAIT_S=${TESSERA_SERVERS_WAIT_S:-60}
KEY=tessera
SECRET=tessera-bench
SERVER=$ROOT/target/s3serve/release/bench-s3
# A test passes the proxy it built (a cargo build of the workspace inside `cargo test` would
# wait on the test run's own lock of target/).
PROXY=${TESSERA_BUCKET_PROXY:-}

say() { echo "benchbucket: $*" >&2; }
die() { say "$*"; exit 1; }

alive() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }
answers() { curl -s -o /dev/null --max-time 2 "http://$HOST:$1/"; }

# Whether `tc netem` works here (in a scratch namespace, removed again).
has_netem() {
  command -v ip >/dev/null && command -v tc >/dev/null || return 1
  local ns=tessera-probe-$$
  ip netns add "$ns" 2>/dev/null || return 1
  local ok=1
  ip netns exec "$ns" tc qdisc add dev lo root netem delay 1ms 2>/dev/null && ok=0
  ip netns del "$ns" 2>/dev/null || true
  return $ok
}

launch() { # name port command...
  local name=$1 port=$2
  shift 2
  answers "$port" && die "port $HOST:$port is taken by another process; set TESSERA_BUCKET_PORT"
  nohup "$@" >"$RUN/$name.log" 2>&1 &
  echo $! >"$RUN/$name.pid"
  local deadline=$((SECONDS + WAIT_S))
  until answers "$port"; do
    alive "$name" || { cat "$RUN/$name.log" >&2; die "$name exited"; }
    [ "$SECONDS" -lt "$deadline" ] || { stop; die "$name did not answer on $HOST:$port within ${WAIT_S}s"; }
    sleep 0.1
  done
}

start() {
  local dir=${1:-target} rtt=${2:-0}
  [[ $rtt =~ ^[0-9]+$ ]] || die "RTT_MS must be a whole number of milliseconds, not $rtt"
  [ -d "$dir" ] || die "no directory $dir to serve"
  dir=$(cd "$dir" && pwd)
  if alive server; then
    say "already running (pid $(cat "$RUN/server.pid")); stop it to serve another folder or delay"
    return 0
  fi
  say "building bench-s3 and the delay proxy (once)"
  CARGO_TARGET_DIR=$ROOT/target/s3serve cargo build --release --locked -q --manifest-path benches/s3serve/Cargo.toml
  if [ -z "$PROXY" ]; then
    cargo build --release --locked -q -p tessera-benches --bin delay_proxy
    PROXY=$ROOT/target/release/delay_proxy
  fi
  launch server "$PORT" "$SERVER" "$dir" "$HOST:$PORT" "$KEY" "$SECRET"
  local endpoint=$PORT how="no delay"
  if [ "$rtt" -gt 0 ]; then
    if has_netem; then
      say "note: this kernel has tc netem, but the clients run outside a namespace here; using the proxy"
    else
      say "note: no tc netem in this kernel (nor fq): the delay is a proxy process, not the kernel"
    fi
    launch proxy "$PROXY_PORT" "$PROXY" "$HOST:$PROXY_PORT" "$HOST:$PORT" "$rtt"
    endpoint=$PROXY_PORT how="+${rtt} ms per round trip (delay proxy on $HOST:$PROXY_PORT)"
  fi
  echo "$endpoint" >"$RUN/endpoint"
  say "bench-s3 serving $dir on http://$HOST:$PORT/ (buckets: its folders); clients use port $endpoint, $how"
}

stop() {
  for name in proxy server; do
    if alive "$name"; then
      local pid
      pid=$(cat "$RUN/$name.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$RUN/$name.pid"
  done
  rm -f "$RUN/endpoint"
}

status() {
  if alive server; then
    echo "bench-s3: running (pid $(cat "$RUN/server.pid")) on http://$HOST:$PORT/; clients use port $(cat "$RUN/endpoint" 2>/dev/null || echo "$PORT")"
  else
    echo "bench-s3: stopped"
  fi
}

env_lines() {
  local endpoint
  endpoint=http://$HOST:$(cat "$RUN/endpoint" 2>/dev/null || echo "$PORT")
  # object_store (Tessera, Lance): AWS_ENDPOINT, AWS_ALLOW_HTTP; boto3 (LitData, WebDataset's
  # pipe): AWS_ENDPOINT_URL; MosaicML Streaming: S3_ENDPOINT_URL.
  echo "export AWS_ENDPOINT=$endpoint AWS_ENDPOINT_URL=$endpoint S3_ENDPOINT_URL=$endpoint AWS_ALLOW_HTTP=true" \
    "AWS_ACCESS_KEY_ID=$KEY AWS_SECRET_ACCESS_KEY=$SECRET AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1" \
    "AWS_EC2_METADATA_DISABLED=true"
}

mkdir -p "$RUN"
case ${1:-} in
  start) start "${2:-}" "${3:-}" ;;
  stop) stop ;;
  env) env_lines ;;
  status) status ;;
  *) echo "usage: $0 {start [DIR] [RTT_MS]|stop|env|status}" >&2; exit 2 ;;
esac
