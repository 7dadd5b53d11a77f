#!/usr/bin/env bash
# Local object-storage servers for the storage tests, on loopback only:
#   moto (S3)      -> 127.0.0.1:${TESSERA_S3_PORT:-5555},    bucket    ${TESSERA_S3_BUCKET:-tessera-test}
#   Azurite (blob) -> 127.0.0.1:${TESSERA_AZURE_PORT:-10000}, container ${TESSERA_AZURE_CONTAINER:-tessera-test}
#
#   scripts/servers.sh install   # moto[server] into .venv (pip), azurite into .tools/azurite (npm); idempotent
#   scripts/servers.sh start     # start both, wait until they answer, create bucket and container
#   scripts/servers.sh stop      # stop what `start` started (PIDs in target/servers/*.pid)
#   scripts/servers.sh env       # print the export lines the tests need: eval "$(scripts/servers.sh env)"
#   scripts/servers.sh status    # say what is running
#
# Both servers pass object_store 0.14's conformance functions. Bare moto checks a conditional
# write and then applies it with no lock between, and in CI once let two creates of one key both
# win; moto therefore runs through scripts/moto_server.py, which makes each write one step. The
# storage suite's `create_race` checks the servers' create-if-absent directly. s3s-fs loses such
# races and must not be used for commits.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

MOTO_VERSION=5.2.5
AZURITE_VERSION=3.35.0

HOST=127.0.0.1
S3_PORT=${TESSERA_S3_PORT:-5555}
AZ_PORT=${TESSERA_AZURE_PORT:-10000}
BUCKET=${TESSERA_S3_BUCKET:-tessera-test}
CONTAINER=${TESSERA_AZURE_CONTAINER:-tessera-test}
WAIT_S=${TESSERA_SERVERS_WAIT_S:-60}
PY=${PYTHON:-python3}

RUN=target/servers
VENV=.venv
AZ_DIR=.tools/azurite
MOTO_BIN=$VENV/bin/moto_server
AZ_BIN=$AZ_DIR/node_modules/.bin/azurite-blob

# The well-known Azurite development account (public, documented by Microsoft).
AZ_ACCOUNT=devstoreaccount1
AZ_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

say() { echo "servers: $*" >&2; }
die() { say "$*"; exit 1; }

install() {
  local did=0
  command -v "$PY" >/dev/null || die "$PY is required to install moto"
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV"
    "$PY" -m venv "$VENV"
  fi
  if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(0 if m.version('moto') == '$MOTO_VERSION' else 1)" 2>/dev/null \
     || [ ! -x "$MOTO_BIN" ]; then
    say "installing moto[server]==$MOTO_VERSION into $VENV (about 30 s)"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "moto[server]==$MOTO_VERSION"
    did=1
  fi
  if [ ! -x "$AZ_BIN" ] || ! grep -q "\"version\": \"$AZURITE_VERSION\"" "$AZ_DIR/node_modules/azurite/package.json" 2>/dev/null; then
    command -v npm >/dev/null || die "npm (node >= 18) is required to install azurite"
    say "installing azurite@$AZURITE_VERSION into $AZ_DIR (about 20 s)"
    mkdir -p "$AZ_DIR"
    (cd "$AZ_DIR" && npm install --silent --no-audit --no-fund --no-save --prefix . "azurite@$AZURITE_VERSION" >/dev/null)
    did=1
  fi
  [ -x "$MOTO_BIN" ] || die "moto_server missing after install ($MOTO_BIN)"
  [ -x "$AZ_BIN" ] || die "azurite-blob missing after install ($AZ_BIN)"
  [ "$did" = 0 ] || say "installed moto $MOTO_VERSION and azurite $AZURITE_VERSION"
}

# Is something answering HTTP on the port? (any status code counts)
answers() { curl -s -o /dev/null --max-time 2 "http://$HOST:$1/" ; }

alive() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

wait_for() { # name port
  local name=$1 port=$2 deadline=$((SECONDS + WAIT_S))
  until answers "$port"; do
    if ! alive "$name"; then
      say "$name exited during start-up; last lines of $RUN/$name.log:"
      tail -n 20 "$RUN/$name.log" >&2 || true
      return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      say "$name did not answer on $HOST:$port within ${WAIT_S}s; see $RUN/$name.log"
      return 1
    fi
    sleep 0.2
  done
}

create_container() {
  # Create the container with a SharedKey-signed PUT (Python standard library only).
  "$PY" - "$HOST" "$AZ_PORT" "$AZ_ACCOUNT" "$AZ_KEY" "$CONTAINER" <<'EOF'
import base64, hmac, hashlib, sys, http.client
from email.utils import formatdate
host, port, account, key, container = sys.argv[1:6]
date = formatdate(usegmt=True)
version = "2021-08-06"
# String-to-sign for Blob service SharedKey: verb, 11 standard headers, canonical headers, resource.
canon_headers = f"x-ms-date:{date}\nx-ms-version:{version}\n"
canon_resource = f"/{account}/{account}/{container}\nrestype:container"
sts = "PUT\n" + "\n" * 11 + canon_headers + canon_resource
sig = base64.b64encode(hmac.new(base64.b64decode(key), sts.encode(), hashlib.sha256).digest()).decode()
c = http.client.HTTPConnection(host, int(port), timeout=10)
c.request("PUT", f"/{account}/{container}?restype=container", headers={
    "x-ms-date": date, "x-ms-version": version, "Content-Length": "0",
    "Authorization": f"SharedKey {account}:{sig}"})
r = c.getresponse(); body = r.read()
if r.status not in (201, 409):  # 409: ContainerAlreadyExists
    sys.exit(f"creating container {container!r}: HTTP {r.status} {body[:300]!r}")
EOF
}

start_one() { # name port port-variable command...
  local name=$1 port=$2 var=$3; shift 3
  if alive "$name"; then
    say "$name already running (pid $(cat "$RUN/$name.pid"))"
    return 0
  fi
  if answers "$port"; then
    die "port $HOST:$port is taken by another process; set $var to another port (or stop it)"
  fi
  setsid "$@" >"$RUN/$name.log" 2>&1 < /dev/null &
  echo $! >"$RUN/$name.pid"
}

start() {
  [ -x "$MOTO_BIN" ] && [ -x "$AZ_BIN" ] || install
  mkdir -p "$RUN/azurite-data"
  # moto through scripts/moto_server.py: the same server, with its conditional writes made
  # atomic as S3's are (bare moto checks and then writes, and can let two creates both win).
  start_one moto "$S3_PORT" TESSERA_S3_PORT "$VENV/bin/python" scripts/moto_server.py -H "$HOST" -p "$S3_PORT"
  start_one azurite "$AZ_PORT" TESSERA_AZURE_PORT "$AZ_BIN" --blobHost "$HOST" --blobPort "$AZ_PORT" \
    --location "$RUN/azurite-data" --silent --skipApiVersionCheck --loose
  wait_for moto "$S3_PORT" || { stop; die "moto (S3) failed to start"; }
  wait_for azurite "$AZ_PORT" || { stop; die "azurite (Azure) failed to start"; }
  # Bucket: moto accepts an unsigned PUT. 200 on create, 409 if it exists.
  local code
  code=$(curl -s -o "$RUN/bucket.out" -w '%{http_code}' -X PUT "http://$HOST:$S3_PORT/$BUCKET")
  case $code in 200|409) ;; *) stop; die "creating bucket $BUCKET: HTTP $code $(head -c 300 "$RUN/bucket.out")";; esac
  create_container || { stop; die "creating Azure container $CONTAINER failed"; }
  say "moto on $HOST:$S3_PORT (bucket $BUCKET), azurite on $HOST:$AZ_PORT (container $CONTAINER)"
}

stop_one() {
  local name=$1 pid
  [ -f "$RUN/$name.pid" ] || return 0
  pid=$(cat "$RUN/$name.pid")
  if kill -0 "$pid" 2>/dev/null; then
    # setsid made the server its own process group: end the group (node/python children too).
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; }
  fi
  rm -f "$RUN/$name.pid"
}

stop() {
  stop_one moto
  stop_one azurite
  # Azurite keeps its blobs on disk; a fresh start gets a fresh store.
  rm -rf "$RUN/azurite-data"
}

env_lines() {
  cat <<EOF
export AWS_ENDPOINT=http://$HOST:$S3_PORT
export AWS_ALLOW_HTTP=true
export AWS_ACCESS_KEY_ID=test
export AWS_SECRET_ACCESS_KEY=test
export AWS_REGION=us-east-1
export AWS_DEFAULT_REGION=us-east-1
export TESSERA_TEST_S3=s3://$BUCKET
export AZURE_STORAGE_USE_EMULATOR=true
export AZURITE_BLOB_STORAGE_URL=http://$HOST:$AZ_PORT
export TESSERA_TEST_AZURE=az://$CONTAINER
EOF
}

status() {
  for n in moto azurite; do
    if alive "$n"; then echo "$n: running (pid $(cat "$RUN/$n.pid"))"; else echo "$n: stopped"; fi
  done
}

mkdir -p "$RUN"
case ${1:-} in
  install) install ;;
  start) start ;;
  stop) stop ;;
  env) env_lines ;;
  status) status ;;
  *) echo "usage: $0 {install|start|stop|env|status}" >&2; exit 2 ;;
esac
