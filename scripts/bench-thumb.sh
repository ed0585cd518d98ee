#!/usr/bin/env bash
# Usage: A=old-binary B=new-binary [RUNS=7] [EXTRA="--size 128"] scripts/bench-thumb.sh
# Alternates two vipsload binaries on the default corpus; prints each run's images/s and the medians.
corpus=$(${A:-/tmp/vipsload-direct} corpus)
runs=${RUNS:-7}
a=${A:-/tmp/vipsload-direct}; b=${B:-/tmp/vipsload-pipeline}
ra=(); rb=()
for i in $(seq 1 $runs); do
  for which in a b; do
    bin=${!which}
    rm -rf /tmp/tb/$which
    r=$($bin thumb ${EXTRA:-} --out /tmp/tb/$which "$corpus" 2>&1 | grep -o '[0-9.]* images/s' | cut -d' ' -f1)
    if [ $which = a ]; then ra+=($r); else rb+=($r); fi
  done
done
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "A ${ra[*]}"; echo "B ${rb[*]}"
ma=$(med "${ra[@]}"); mb=$(med "${rb[@]}")
echo "median A $ma  B $mb  ratio B/A $(echo "$mb / $ma" | bc -l | cut -c1-5)"
