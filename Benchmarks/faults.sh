#!/usr/bin/env bash
# Minor page faults, system and user CPU time per image and peak RSS of `vipsload thumb`, per class,
# for this tree's release build and any other builds named with --bin NAME=PATH (side by side,
# interleaved). Without a folder, the default corpus (`vipsload corpus`). See Benchmarks/faults.py.
#
#   Benchmarks/faults.sh [DIR] [--bin old=PATH] [--repeat N] [--env NAME:VAR=VALUE]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
"$root/scripts/setup.sh"
cd "$root"
swift build -c release --product vipsload 2>&1 | { grep -v -e "prohibited flag(s): -pthread" -e "use of .mktemp. is dangerous" || true; } >&2
bin="$(swift build -c release --show-bin-path)/vipsload"
dir=
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then dir=$1; shift; fi
[ -n "$dir" ] || dir=$("$bin" corpus | tail -n 1)
exec python3 "$root/Benchmarks/faults.py" "$dir" --bin "this=$bin" "$@"
