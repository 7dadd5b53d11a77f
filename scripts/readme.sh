#!/usr/bin/env bash
# Runs every command README.md shows, as a new user would, so that the README cannot drift
# from the code: per `## ` section, one bash process started at the repository root runs the
# section's ```sh blocks and the `$ ` lines of its ```console blocks, in order, stopping at
# the first failing command. (cli/tests/readme.rs checks the console blocks' output too; the
# README's Rust blocks compile as doc tests of tessera-loader-tch.)
#
# Inside scripts/test.sh (TESSERA_IN_TEST=1) the line `scripts/test.sh` is skipped: that run
# is the one executing it, and the README's `--release` builds use the test run's own build
# (scripts/test-profile.sh: unoptimised, with debug assertions, the artifacts the suites were
# built with): the test runs them for what they do, not for their speed, and optimising
# DataFusion, FFmpeg's bindings, tch and the rest a second time was the longest part of a
# cold test run (a 15.5 min build for scripts/train.sh alone). `scripts/readme.sh --list`
# prints the commands without running them.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python3; [ -x .venv/bin/python ] && PY=.venv/bin/python
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$PY" - README.md "$work" <<'PYTHON'
import os, re, sys
readme, out = sys.argv[1], sys.argv[2]
sections, name, block, lang = [], "preamble", None, None
cur = []
for line in open(readme, encoding="utf-8"):
    line = line.rstrip("\n")
    if block is None and line.startswith("## "):
        sections.append((name, cur))
        name, cur = line[3:].strip(), []
        continue
    fence = re.match(r"^```(\S*)", line)
    if fence and block is None:
        block, lang = [], fence.group(1)
        continue
    if line.startswith("```") and block is not None:
        if lang == "sh":
            cur.extend(block)
        elif lang == "console":
            cur.extend(l[2:] for l in block if l.startswith("$ "))
        block = None
        continue
    if block is not None:
        block.append(line)
sections.append((name, cur))
for i, (name, cmds) in enumerate(s for s in sections if any(c.strip() for c in s[1])):
    with open(os.path.join(out, f"{i:02}.sh"), "w", encoding="utf-8") as f:
        f.write(f"# README section: {name}\n")
        for c in cmds:
            if re.match(r"^\s*scripts/test\.sh\b", c) and os.environ.get("TESSERA_IN_TEST") == "1":
                c = ": skipped: scripts/test.sh is the run executing this  # " + c
            f.write(c + "\n")
PYTHON

if [ "${1:-}" = --list ]; then
  cat "$work"/*.sh
  exit 0
fi
root=$PWD
if [ "${TESSERA_IN_TEST:-}" = 1 ]; then
  . scripts/test-profile.sh
fi
rm -rf target/tour
for section in "$work"/*.sh; do
  echo "== README: $(head -1 "$section" | sed 's/^# README section: //')"
  (cd "$root" && bash -euo pipefail -x "$section")
done
echo "readme: every command of README.md ran"
