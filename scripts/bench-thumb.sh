#!/usr/bin/env bash
# Compares `vipsload thumb` of two binaries on the default corpus (72 images), run alternately
# in one session so that both see the same machine load; prints each run's images/s, its CPU
# seconds (user + sys, less sensitive to a loaded machine than wall time) and the medians.
# Usage: A=old-vipsload B=new-vipsload [RUNS=7] [EXTRA_A=...] [EXTRA_B=...] scripts/bench-thumb.sh
set -euo pipefail
a=${A:?A=path of the first vipsload binary}; b=${B:?B=path of the second vipsload binary}
corpus=$("$a" corpus)
runs=${RUNS:-7}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rates_a=(); rates_b=(); cpu_a=(); cpu_b=()
for _ in $(seq 1 "$runs"); do
  for which in a b; do
    bin=${!which}
    extra_name="EXTRA_${which^^}"
    rm -rf "$work/out"
    cpu=$( { TIMEFORMAT='%U %S'; time "$bin" thumb ${!extra_name:-} --out "$work/out" "$corpus" 2> "$work/err"; } 2>&1 | awk '{print $1 + $2}')
    rate=$(grep -o '[0-9.]* images/s' "$work/err" | tail -n 1 | cut -d' ' -f1)
    if [ "$which" = a ]; then rates_a+=("$rate"); cpu_a+=("$cpu"); else rates_b+=("$rate"); cpu_b+=("$cpu"); fi
  done
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
echo "A images/s: ${rates_a[*]}   CPU s: ${cpu_a[*]}"
echo "B images/s: ${rates_b[*]}   CPU s: ${cpu_b[*]}"
ra=$(median "${rates_a[@]}"); rb=$(median "${rates_b[@]}"); ca=$(median "${cpu_a[@]}"); cb=$(median "${cpu_b[@]}")
awk -v ra="$ra" -v rb="$rb" -v ca="$ca" -v cb="$cb" 'BEGIN {
  printf "median images/s A %s B %s (B/A %.3f); median CPU s A %s B %s (B/A %.3f)\n", ra, rb, rb / ra, ca, cb, cb / ca }'
