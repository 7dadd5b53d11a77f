#!/usr/bin/env bash
# needed by: cli bench test
# Media decoding for `tessera ingest`: the FFmpeg development libraries that the cli's video
# input (the `video` feature, on by default) links through ffmpeg-next, pkg-config and libclang
# for its bindings, and the `ffmpeg` and `sox` tools that cli/tests/media.rs and the README use
# to make test media and independent reference decodes. Audio decoding is pure Rust (symphonia)
# and needs nothing here. Debian 12 packages; idempotent: a second run only checks.
set -euo pipefail

packages=(
  pkg-config clang libclang-dev
  libavformat-dev libavcodec-dev libavutil-dev libswscale-dev libswresample-dev
  ffmpeg sox
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null; then
  echo "setup.d/20-media: install ${missing[*]} (Debian names) for video ingest and the media tests" >&2
  exit 1
fi
SUDO=()
[ "$(id -u)" -eq 0 ] || SUDO=(sudo)
echo "setup.d/20-media: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
