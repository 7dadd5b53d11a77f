#!/usr/bin/env bash
# Ingest rate of `tessera ingest` per media input kind: files/s and MB/s of decoded output
# (the raw bytes the dataset stores before compression), from the command's own --json summary.
#
#   benches/media_ingest.sh [--small] [--jobs N]
#
# Inputs are made once by ffmpeg (scripts/setup.d/20-media.sh installs it) under
# target/bench-media/: 5-second stereo 44.1 kHz clips as WAV, FLAC, MP3 and Ogg/Vorbis, and
# 4-second 320x240 25 fps videos as H.264 MP4 and VP9 WebM. Each kind is ingested into a fresh
# dataset by the release binary (`cargo build --release -p tessera-cli --bin tessera`), plus
# two variants of the work a training set asks for: audio resampled to 16 kHz mono, and video
# sampled at 5 fps and resized to 112x112. --small (for CI) makes 8 clips and 2 videos.
set -euo pipefail
cd "$(dirname "$0")/.."

clips=200 videos=20 jobs=$(nproc)
while [ $# -gt 0 ]; do
  case $1 in
    --small) clips=8 videos=2 ;;
    --jobs) jobs=$2; shift ;;
    *) echo "usage: $0 [--small] [--jobs N]" >&2; exit 2 ;;
  esac
  shift
done
bin=target/release/tessera
[ -x "$bin" ] || { echo "build first: cargo build --release -p tessera-cli --bin tessera" >&2; exit 1; }
command -v ffmpeg >/dev/null || { echo "ffmpeg is missing: scripts/setup.d/20-media.sh" >&2; exit 1; }

root=target/bench-media/$clips-$videos
ff=(ffmpeg -nostdin -v error -y)
if [ ! -e "$root/.done" ]; then
  rm -rf "$root"
  mkdir -p "$root"/{wav,flac,mp3,ogg,mp4,webm}
  for i in $(seq -w 1 "$clips"); do
    f=$((200 + 10#$i * 7))
    "${ff[@]}" -f lavfi -i "sine=frequency=$f:sample_rate=44100:duration=5" \
      -f lavfi -i "anoisesrc=color=pink:sample_rate=44100:duration=5:amplitude=0.1:seed=$((10#$i))" \
      -filter_complex amerge -c:a pcm_s16le "$root/wav/$i.wav"
    "${ff[@]}" -i "$root/wav/$i.wav" "$root/flac/$i.flac"
    "${ff[@]}" -i "$root/wav/$i.wav" -b:a 128k "$root/mp3/$i.mp3"
    "${ff[@]}" -i "$root/wav/$i.wav" -c:a libvorbis "$root/ogg/$i.ogg"
  done
  for i in $(seq -w 1 "$videos"); do
    src=(-f lavfi -i "testsrc2=size=320x240:rate=25:duration=4,hue=h=$((10#$i * 17))")
    "${ff[@]}" "${src[@]}" -c:v libx264 -pix_fmt yuv420p "$root/mp4/$i.mp4"
    "${ff[@]}" "${src[@]}" -c:v libvpx-vp9 -deadline realtime -cpu-used 8 "$root/webm/$i.webm"
  done
  touch "$root/.done"
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-22s %6s %9s %9s %12s %11s\n' input files seconds files/s "decoded MB" "MB/s out"
run() { # name folder flags...
  local name=$1 dir=$2; shift 2
  local ds="$out/$name"
  "$bin" --json ingest "$ds" "$root/$dir" -q --jobs "$jobs" "$@" > "$out/$name.json"
  python3 - "$name" "$out/$name.json" <<'PY'
import json, sys
name, path = sys.argv[1], sys.argv[2]
s = json.load(open(path))
mb = s["bytes_raw"] / 1e6
print(f'{name:<22} {s["rows"]:>6} {s["seconds"]:>9.2f} {s["rows"] / s["seconds"]:>9.1f} {mb:>12.1f} {mb / s["seconds"]:>11.1f}')
PY
}
for kind in wav flac mp3 ogg; do run "$kind" "$kind"; done
run "wav 16k mono" wav --sample-rate 16000 --mono
run "mp3 16k mono" mp3 --sample-rate 16000 --mono
for kind in mp4 webm; do run "$kind" "$kind"; done
run "mp4 5fps 112" mp4 --fps 5 --size 112
echo "($(nproc) CPUs, --jobs $jobs; $clips clips of 5 s stereo 44.1 kHz, $videos videos of 4 s 320x240 25 fps)"
