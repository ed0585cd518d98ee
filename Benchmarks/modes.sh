#!/usr/bin/env bash
# Resize modes on the large JPEGs: CPU seconds of `vipsload thumb` (one job)
# for fit (inside), cover, contain and stretch (fill) into 256×256, and fit
# into 512×512 as the control that decodes at 1/4 instead of 1/8. Every
# 256×256 mode shrinks 4000×3000 on load by 8, so their CPU times match; the
# 512 control costs visibly more. CPU time (user+sys) rather than wall time:
# it is steadier on a shared machine.
#
#   Benchmarks/modes.sh [ROUNDS]     (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
rounds=${1:-3}
swift build -c release --product vipsload 2>&1 | { grep -v "prohibited flag" || true; } >/dev/null
bin=.build/release/vipsload
corpus=$("$bin" corpus | tail -1)/jpeg-large
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT INT TERM
for round in $(seq "$rounds"); do
  for args in "256x256 inside" "256x256 cover" "256x256 contain" "256x256 fill" "512x512 inside"; do
    set -- $args
    /usr/bin/time -f "round $round  --size $1 --fit $2: %U s user + %S s sys" \
      "$bin" thumb --size "$1" --fit "$2" --jobs 1 --out "$out/$2-$1" "$corpus" 2>&1 | tail -1
  done
done
