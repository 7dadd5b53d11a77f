#!/usr/bin/env bash
# needed by: bench test
# The benchmark's storage server (scripts/benchserver.sh): nginx-light and its WebDAV
# PROPFIND module from Debian 12, which serve a dataset folder to object_store's HTTP store at
# loopback line rate (moto, the S3 correctness server, serves large ranges at about 8 MB/s).
# About 3 s to install. Idempotent: a second run only checks.
set -euo pipefail

packages=(nginx-light libnginx-mod-http-dav-ext)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null; then
  echo "setup.d/60-benchserver: install ${missing[*]} (Debian names) for the benchmark's HTTP server" >&2
  exit 1
fi
SUDO=()
[ "$(id -u)" -eq 0 ] || SUDO=(sudo)
echo "setup.d/60-benchserver: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
# The package's own service is not started (policy-rc.d or no init in containers); the
# project starts its own instance on loopback with its own configuration.
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
