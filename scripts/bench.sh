#!/usr/bin/env bash
# The main job: installs what is missing, builds vipsload (release) and runs it
# on the built-in corpus, which it generates once into ~/.cache/vipsload.
# Extra arguments go to the command.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
scripts/setup.sh
swift build -c release --product vipsload 2>&1 | { grep -v "prohibited flag(s): -pthread" || true; }
bin=.build/release/vipsload
corpus=$("$bin" corpus)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$bin" thumb --out "$out" "$@" "$corpus"
