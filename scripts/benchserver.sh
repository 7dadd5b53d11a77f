#!/usr/bin/env bash
# The benchmark's storage server: nginx (Debian's nginx-light) serving a local folder over
# HTTP on loopback, read-only, with WebDAV PROPFIND (libnginx-mod-http-dav-ext) so that
# object_store's HTTP store can list it. Tessera opens it as `http://127.0.0.1:PORT/<dataset>`.
#
#   scripts/benchserver.sh start [DIR]  # serve DIR (default: target/) on 127.0.0.1:${TESSERA_BENCH_PORT:-8089}
#   scripts/benchserver.sh stop         # stop what `start` started (PID in target/benchserver/nginx.pid)
#   scripts/benchserver.sh env          # the export line benchmarks and tests read:
#                                       #   eval "$(scripts/benchserver.sh env)"
#   scripts/benchserver.sh status
#
# TESSERA_BENCH_PORT and TESSERA_BENCH_RUN (where config, pid and logs go) let a test run its
# own instance beside the benchmark's (benches/tests/http_server.rs does).
#
# Why nginx: moto (the S3 correctness server) serves range GETs of large objects at about
# 8 MB/s, so it cannot tell the loader's speed from its own. nginx is a Debian package (3 s to
# install, starts in milliseconds, 2 workers here) that answers range GETs from the page cache
# with sendfile, at loopback line rate, and it is what many teams put in front of a dataset
# folder. It speaks plain HTTP + WebDAV, not the S3 API, so what it measures is the loader's
# object-store read path (object_store's reqwest client, range GETs, retries), not S3 request
# signing. S3 servers from crates.io were the alternative: s3s-fs takes about 5 minutes to build
# here; rustfs and garage much longer. Installation: scripts/setup.d/60-benchserver.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

HOST=127.0.0.1
PORT=${TESSERA_BENCH_PORT:-8089}
RUN=${TESSERA_BENCH_RUN:-$ROOT/target/benchserver}   # config, pid and logs (absolute)
WAIT_S=${TESSERA_SERVERS_WAIT_S:-20}
MODULE=/usr/lib/nginx/modules/ngx_http_dav_ext_module.so

say() { echo "benchserver: $*" >&2; }
die() { say "$*"; exit 1; }

alive() { [ -f "$RUN/nginx.pid" ] && kill -0 "$(cat "$RUN/nginx.pid")" 2>/dev/null; }
answers() { curl -s -o /dev/null --max-time 2 "http://$HOST:$PORT/" ; }

config() { # served directory
  cat <<EOF
# Written by scripts/benchserver.sh; serves $1 read-only.
load_module $MODULE;
daemon on;
pid $RUN/nginx.pid;
error_log $RUN/error.log warn;
worker_processes 2;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_requests 100000;
  keepalive_timeout 120s;
  client_body_temp_path $RUN/tmp/body;
  proxy_temp_path $RUN/tmp/proxy;
  fastcgi_temp_path $RUN/tmp/fastcgi;
  uwsgi_temp_path $RUN/tmp/uwsgi;
  scgi_temp_path $RUN/tmp/scgi;
  types { }
  default_type application/octet-stream;
  server {
    listen $HOST:$PORT;
    root $1;
    location / {
      # GET, HEAD (ranges) and PROPFIND (listing, Depth 0 and 1); nothing writes.
      dav_ext_methods PROPFIND OPTIONS;
      limit_except GET HEAD PROPFIND OPTIONS { deny all; }
    }
  }
}
EOF
}

start() {
  local dir=${1:-target}
  command -v nginx >/dev/null && [ -f "$MODULE" ] || bash scripts/setup.d/60-benchserver.sh
  [ -d "$dir" ] || die "no directory $dir to serve"
  dir=$(cd "$dir" && pwd)
  if alive; then
    say "already running (pid $(cat "$RUN/nginx.pid")); stop it to serve another folder"
    return 0
  fi
  answers && die "port $HOST:$PORT is taken by another process; set TESSERA_BENCH_PORT"
  mkdir -p "$RUN/tmp"
  config "$dir" >"$RUN/nginx.conf"
  # The workers run as nginx's default unprivileged user when started as root: they need
  # read access to the served tree (datasets written with the default umask have it).
  nginx -q -p "$RUN" -c "$RUN/nginx.conf" -g "user $(id -un) $(id -gn);" 2>"$RUN/start.log" \
    || nginx -q -p "$RUN" -c "$RUN/nginx.conf" 2>"$RUN/start.log" \
    || { cat "$RUN/start.log" >&2; die "nginx did not start"; }
  local deadline=$((SECONDS + WAIT_S))
  until answers; do
    [ "$SECONDS" -lt "$deadline" ] || { stop; die "nginx did not answer on $HOST:$PORT within ${WAIT_S}s"; }
    sleep 0.1
  done
  say "nginx on http://$HOST:$PORT/ serving $dir"
}

stop() {
  [ -f "$RUN/nginx.pid" ] || return 0
  local pid
  pid=$(cat "$RUN/nginx.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill -QUIT "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -TERM "$pid" 2>/dev/null || true
  fi
  rm -f "$RUN/nginx.pid"
}

status() {
  if alive; then echo "nginx: running (pid $(cat "$RUN/nginx.pid")) on http://$HOST:$PORT/"; else echo "nginx: stopped"; fi
}

mkdir -p "$RUN"
case ${1:-} in
  start) start "${2:-}" ;;
  stop) stop ;;
  env) echo "export TESSERA_BENCH_HTTP=http://$HOST:$PORT" ;;
  status) status ;;
  *) echo "usage: $0 {start [DIR]|stop|env|status}" >&2; exit 2 ;;
esac
