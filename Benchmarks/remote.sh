#!/usr/bin/env bash
# Remote sources against local files: `vipsload thumb` over the corpus's large JPEGs as
# files on disk, and as URLs of the same files served by a private nginx on 127.0.0.1,
# run alternately in one session so both see the same machine load.
#
# The input set is 48 files (each of the 24 large JPEGs twice, under two names, so nothing is
# coalesced), about 92 MB. For each run it prints the wall time, CPU seconds (user + sys)
# and peak RSS; then the medians and the ratio remote rate / local rate (local wall / remote
# wall), which the target puts at >= 0.9, and the CPU the remote run costs over the local one.
#
#   Benchmarks/remote.sh [RUNS]              (default 7)
#   VIPSLOAD=path/to/vipsload Benchmarks/remote.sh   (default: a release build of this tree)
#   VIPSLOAD='old new' Benchmarks/remote.sh  (several binaries, alternated within each run:
#                                             before/after on the same machine load)
#   STRACE=1 Benchmarks/remote.sh            (then one `strace -c -f` run of each: recvfrom,
#                                             read, write and futex counts)
#   EXTRA='--jobs 2' Benchmarks/remote.sh    (extra `thumb` arguments for every run)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
runs=${1:-7}
packages=(nginx time curl)
[ -n "${STRACE:-}" ] && packages+=(strace)
"$root/scripts/setup.sh" "${packages[@]}"
# shellcheck source=Benchmarks/nginx.sh
source "$root/Benchmarks/nginx.sh"

read -r -a bins <<<"${VIPSLOAD:-}"
if [ ${#bins[@]} -eq 0 ]; then
  (cd "$root" && swift build -c release --product vipsload 2>&1 | { grep -v -e "prohibited flag(s): -pthread" -e "use of .mktemp. is dangerous" || true; } >&2)
  bins=("$(cd "$root" && swift build -c release --show-bin-path)/vipsload")
fi
corpus=$("${bins[0]}" corpus | tail -1)/jpeg-large

work=$(mktemp -d "${TMPDIR:-/tmp}/vipsload-remote.XXXXXX")
on_exit "rm -rf '$work'"
mkdir -p "$work/files"
for file in "$corpus"/*.jpg; do
  for copy in a b; do
    # A hard link when the corpus shares the file system, a copy otherwise.
    ln -f "$file" "$work/files/$copy-$(basename "$file")" 2>/dev/null || cp "$file" "$work/files/$copy-$(basename "$file")"
  done
done
nginx_serve "$work/files"
: >"$work/local.txt"
: >"$work/remote.txt"
for file in "$work"/files/*.jpg; do
  echo "$file" >>"$work/local.txt"
  echo "$NGINX_URL/$(basename "$file")" >>"$work/remote.txt"
done
count=$(wc -l <"$work/local.txt")
bytes=$(cat "$work"/files/*.jpg | wc -c)
# Warm the page cache and nginx's open files, so the first measured run is like the rest.
cat "$work"/files/*.jpg >/dev/null
while read -r url; do curl -s -o /dev/null "$url"; done <"$work/remote.txt"
echo "remote: $count files, $((bytes / 1000000)) MB, nginx on $NGINX_URL, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# run BIN MODE: one `thumb` run; prints "wall cpu rss_mb".
run() {
  rm -rf "$work/out"
  /usr/bin/time -f "%e %U %S %M" -o "$work/time" \
    "$1" thumb ${EXTRA:-} --quiet --out "$work/out" -i "$work/$2.txt" 2>"$work/err" ||
    { cat "$work/err" >&2; return 1; }
  local made
  made=$(find "$work/out" -type f -name "*.jpg" | wc -l)
  [ "$made" -eq "$count" ] || { echo "remote: $2 made $made of $count thumbnails" >&2; cat "$work/err" >&2; return 1; }
  awk '{printf "%s %.2f %.0f\n", $1, $2 + $3, $4 / 1024}' "$work/time"
}

declare -A wall cpu rss
for i in $(seq 1 "$runs"); do
  for b in "${!bins[@]}"; do
    for mode in local remote; do
      read -r w c m < <(run "${bins[b]}" "$mode")
      wall[$b,$mode]+="$w "; cpu[$b,$mode]+="$c "; rss[$b,$mode]+="$m "
      printf 'run %d  %-28s %-6s %6.2f s  %5.2f CPU s  %4d MB\n' "$i" "$(basename "${bins[b]}")" "$mode" "$w" "$c" "$m"
    done
  done
done

median() { printf '%s\n' $1 | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
for b in "${!bins[@]}"; do
  wl=$(median "${wall[$b,local]}"); wr=$(median "${wall[$b,remote]}")
  cl=$(median "${cpu[$b,local]}"); cr=$(median "${cpu[$b,remote]}")
  ml=$(median "${rss[$b,local]}"); mr=$(median "${rss[$b,remote]}")
  echo "${bins[b]}:"
  awk -v wl="$wl" -v wr="$wr" -v cl="$cl" -v cr="$cr" -v ml="$ml" -v mr="$mr" -v n="$count" -v b="$bytes" 'BEGIN {
    printf "  median local  %.2f s (%.1f images/s, %.0f MB/s), %.2f CPU s, peak RSS %d MB\n", wl, n / wl, b / wl / 1e6, cl, ml
    printf "  median remote %.2f s (%.1f images/s, %.0f MB/s), %.2f CPU s, peak RSS %d MB\n", wr, n / wr, b / wr / 1e6, cr, mr
    printf "  remote/local rate %.3f (target >= 0.9); remote CPU %+.2f s\n", wl / wr, cr - cl }'
done

if [ -n "${STRACE:-}" ]; then
  for b in "${!bins[@]}"; do
    for mode in local remote; do
      rm -rf "$work/out"
      strace -c -f -o "$work/strace" "${bins[b]}" thumb ${EXTRA:-} --quiet --out "$work/out" -i "$work/$mode.txt" 2>/dev/null
      printf 'strace %-28s %-6s' "$(basename "${bins[b]}")" "$mode"
      for call in recvfrom read write futex; do
        printf '  %s %s' "$call" "$(awk -v c="$call" '$NF == c {print $4}' "$work/strace" | head -1)"
      done
      echo
    done
  done
fi
