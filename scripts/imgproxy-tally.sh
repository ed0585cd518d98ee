#!/usr/bin/env bash
# imgproxy's own tests as ported (Tests/Imgproxy/*.tsv): runs their runners (ImgproxySuiteTests and
# the geometry cases of ImgproxyGeometryCaseTests) and prints passed / failed / refused per Go test file.
#   scripts/imgproxy-tally.sh            build the tests, run the runners, print the table
#   scripts/imgproxy-tally.sh --remark   the same, after rewriting the `refused` marks from the outcomes
#   scripts/imgproxy-tally.sh --cases    the table and each case's outcome (with the reason of a refusal or failure)
#   --skip-build (with any of these)     run what is built
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
tally=1 build=1
for argument in "$@"; do
  case "$argument" in
    --remark) export IMGPROXY_REMARK=1 ;;
    --cases) tally=cases ;;
    --skip-build) build=0 ;;
    *) echo "usage: $0 [--remark] [--cases] [--skip-build]" >&2; exit 2 ;;
  esac
done
if [ "$build" = 1 ]; then
  if ! built=$(swift build --build-tests -Xswiftc -warnings-as-errors 2>&1); then
    grep -v "prohibited flag(s): -pthread" <<<"$built" >&2
    exit 1
  fi
fi
output=$(IMGPROXY_TALLY=$tally swift test --skip-build --disable-swift-testing \
  --filter 'ImgproxySuiteTests|ImgproxyGeometryCaseTests/testImgproxysGeometryCases' 2>&1 || true)
if [ "$tally" = cases ]; then
  grep '^imgproxy case: ' <<<"$output" | sed 's/^imgproxy case: //'
  echo
fi
{
  printf 'Go test file\tported\tpassed\tfailed\trefused\tdiffers\n'
  # "imgproxy geometry cases: P passed, F failed, R refused" (processing/processing_test.go).
  sed -n 's/^imgproxy geometry cases: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) refused.*/\1 \2 \3/p' <<<"$output" |
    awk '{ printf "processing/processing_test.go\t%d\t%d\t%d\t%d\t0\n", $1 + $2 + $3, $1, $2, $3 }'
  # "imgproxy tally: FILE<TAB>N ported<TAB>P passed<TAB>F failed<TAB>R refused<TAB>(D deliberate …)":
  # differs counts the passed cases marked `differs` (passed includes them).
  grep '^imgproxy tally: ' <<<"$output" | sed 's/^imgproxy tally: //' |
    awk -F'\t' '{ sub(/^\(/, "", $6); d = $6 + 0
      printf "%s\t%d\t%d\t%d\t%d\t%d\n", $1, $2, $3, $4, $5, d }'
} | awk -F'\t' 'NR == 1 { print; next } { print; n += $2; p += $3; f += $4; r += $5; d += $6 }
  END { printf "total\t%d\t%d\t%d\t%d\t%d\n", n, p, f, r, d }' | column -t -s $'\t'
if grep -q 'error: Imgproxy' <<<"$output"; then
  echo
  echo "Cases whose outcome is not their mark (a failure, or a mark to update):"
  grep 'error: Imgproxy' <<<"$output" | sed 's/.*failed - //'
fi
