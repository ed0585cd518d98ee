#!/usr/bin/env bash
# Fuzzes VipsCore's probe + decode + thumbnail for SECONDS (default 60) with
# libFuzzer and AddressSanitizer, single process on one core; with `url` first,
# fuzzes VipsServe's processing-URL parser (options, signatures, sources) instead.
#
#   scripts/fuzz.sh [url|bmp|tga|tiff|png] [SECONDS] [extra libFuzzer flags...]
#
# With a decoder named first, fuzzes that decoder alone (VIPSLOAD_FUZZ_FORMAT, see
# Fuzz/Sources/FuzzDecode/FuzzTarget.swift): `bmp` VipsCore's BMP and ICO/CUR decoders, `tga` its
# TGA decoder, `tiff` the libtiff RGBA fallback for TIFFs libvips refuses, `png` the direct
# libspng PNG path (and the rest of the decode surface on PNGs). Such a run seeds from the
# seeds of its formats only and keeps a corpus (.fuzz/corpus-NAME), crashers (named NAME-*) and
# history (.fuzz/history-NAME.tsv) of its own, so runs of several decoders can go at once.
#
# Installs what is missing (scripts/setup.sh: Swift's -sanitize=fuzzer brings
# its own libFuzzer runtime, no clang package is needed), builds the harness in
# Fuzz/ (a separate package, so the root build never sees it) into .fuzz/build,
# writes the generated seed corpus to .fuzz/seeds, fuzzes into the growing
# corpus .fuzz/corpus, keeps crashers in .fuzz/crashes and appends one line of
# figures per run to .fuzz/history.tsv. Exits non-zero when the fuzzer found a
# crash, a leak, a timeout or an out-of-memory input.
#
# Reproduce a crasher: .fuzz/build/debug/FuzzDecode .fuzz/crashes/<file>
# (a URL crasher, named url-*: .fuzz/build/debug/FuzzURL .fuzz/crashes/url-<file>).
# The URL target is its own executable (FuzzURL: it builds VipsLoad and VipsServe,
# which the decode target does not), with its own seeds (.fuzz/url-seeds), corpus
# (.fuzz/url-corpus), dictionary (Fuzz/url.dict) and history (.fuzz/url-history.tsv).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"

mode=decode
only=
case "${1:-}" in
  url) mode=url; shift ;;
  bmp | tga | tiff | png) only=$1; shift ;;
esac
seconds=${1:-60}
shift || true
case $seconds in '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [url|bmp|tga|tiff|png] [SECONDS] [libFuzzer flags...]" >&2; exit 2 ;; esac

scripts/setup.sh

root=.fuzz
if [ "$mode" = url ]; then
  corpus=$root/url-corpus seeds=$root/url-seeds dict=Fuzz/url.dict history=$root/url-history.tsv
  product=FuzzURL prefix=url- max_len=4096
else
  corpus=$root/corpus seeds=$root/seeds dict=Fuzz/image.dict history=$root/history.tsv
  product=FuzzDecode prefix= max_len=65536
  if [ -n "$only" ]; then
    corpus=$root/corpus-$only history=$root/history-$only.tsv prefix=$only-
  fi
fi
mkdir -p "$corpus" "$root/crashes" "$root/logs"

# Instrument VipsCore (the URL target: VipsLoad and VipsServe too) and the harness for
# coverage (fuzzer) and memory errors (address).
# -parse-as-library: the harness has no Swift entry point (see Fuzz/Sources/CLibFuzzer).
# VIPSLOAD_FUZZ_BUILD: another build folder, so that a rebuilt harness can run beside one still running.
build=${VIPSLOAD_FUZZ_BUILD:-$root/build}
swift build --package-path Fuzz --scratch-path "$build" --product "$product" -c debug \
  -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library 2>&1 |
  { grep -v -e "prohibited flag(s): -pthread" -e "Cannot export local symbol" || true; }
bin="$build/debug/$product"

# Seeds: regenerated every run (deterministic). The URL target writes its own (`FuzzURL
# --write-seeds`). The image seeds come from `vipsload corpus --fuzz-seeds` (VipsBench's
# FuzzSeedCorpus: the image synthesiser is a target of the root package, not a product this
# harness could import), built as scripts/test.sh builds it so that its build is reused; plus
# HEIF/AVIF made with the vips CLI when its HEIF saver is available (VipsCore does not encode HEIF).
if [ "$mode" = url ]; then
  "$bin" --write-seeds "$seeds" >/dev/null
else
  swift build --product vipsload -Xswiftc -warnings-as-errors 2>&1 |
    { grep -v -e "prohibited flag(s): -pthread" || true; } >&2
  "$(swift build --show-bin-path)/vipsload" corpus --fuzz-seeds "$seeds" >/dev/null
  if command -v vips >/dev/null 2>&1; then
    vips copy "$seeds/rgba.png" "$seeds/rgba.avif" 2>/dev/null || true
    vips copy "$seeds/rgb.png" "$seeds/rgb.heic[compression=hevc]" 2>/dev/null || true
  fi
  # TIFF layouts libvips refuses, for the libtiff fallback: tiled separate planes (tiffcp, when there).
  if command -v tiffcp >/dev/null 2>&1; then
    tiffcp -p separate -t -w 16 -l 16 "$seeds/deflate.tif" "$seeds/tiled-separate.tif" 2>/dev/null || true
    tiffcp -p separate -c lzw "$seeds/deflate.tif" "$seeds/strips-separate.tif" 2>/dev/null || true
  fi
  if [ -n "$only" ]; then
    # This decoder's seeds only.
    case $only in bmp) pattern='*.bmp *.ico *.cur' ;; tga) pattern='*.tga' ;; tiff) pattern='*.tif' ;; png) pattern='*.png' ;; esac
    own=$root/seeds-$only
    rm -rf "$own" && mkdir -p "$own"
    for glob in $pattern; do find "$seeds" -maxdepth 1 -name "$glob" -exec cp {} "$own/" \; ; done
    seeds=$own
    export VIPSLOAD_FUZZ_FORMAT=$only
  fi
fi

# A broken invariant is a Swift fatalError: let it reach libFuzzer's signal handler directly
# (Swift's own backtracer reads foreign memory, which ASan would report instead).
export SWIFT_BACKTRACE=enable=no
# Leak checking stays on; LSan suppressions are commented in scripts/sanitizers/lsan.supp.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$PWD/scripts/sanitizers/lsan.supp:print_suppressions=0}"

marker=$(mktemp)
trap 'rm -f "$marker"' EXIT
# Findings are crash-, leak-, timeout- and oom- files. A slow-unit- file (an input that took
# 10 s or more but less than the timeout, usually because the machine was busy) is kept and
# counted in the figures, not taken for a finding.
findings() { find "$root/crashes" -type f ! -name '*slow-unit-*' | wc -l; }
before=$(findings)
log="$root/logs/fuzz-${prefix}$(date -u +%Y%m%dT%H%M%SZ).log"
echo "fuzz${prefix:+ (${only:-$mode})}: ${seconds}s, log in $log" >&2
status=0
# -rss_limit_mb: an input that makes the process grow past 2 GB counts as a finding (a bomb the limits missed).
# -timeout: one input taking over 10 s is a finding too. -max_len: 64 KiB covers every image seed, 4 KiB every URL.
"$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 \
  -max_len="$max_len" -use_value_profile=1 -dict="$dict" -print_final_stats=1 -artifact_prefix="$root/crashes/$prefix" \
  "$@" "$corpus" "$seeds" >"$log" 2>&1 || status=$?
after=$(findings)
slow=$(find "$root/crashes" -type f -name '*slow-unit-*' -newer "$marker" | wc -l)

# Figures: libFuzzer's final stats and last coverage line.
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
entries=$(find "$corpus" -type f | wc -l)
[ -f "$history" ] || printf 'date\tseconds\texecs\texec_per_s\tcov\tft\tcorpus\tpeak_rss_mb\tnew_crashes\tstatus\n' >"$history"
printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$seconds" "${execs:-?}" "${rate:-?}" \
  "${cov:-?}" "${ft:-?}" "$entries" "${rss:-?}" "$((after - before))" "$status" >>"$history"
echo "fuzz${prefix:+ (${only:-$mode})}: ${execs:-?} executions, ${rate:-?}/s, cov ${cov:-?}, ft ${ft:-?}, corpus $entries, peak RSS ${rss:-?} MB, slow units $slow" >&2

if [ "$status" -ne 0 ] || [ "$after" -gt "$before" ]; then
  echo "fuzz: FOUND A PROBLEM (status $status); crashers in $root/crashes:" >&2
  find "$root/crashes" -type f ! -name '*slow-unit-*' -newer "$marker" >&2 || true
  grep -E -A40 '^==[0-9]+==ERROR|^(=+ )?(SUMMARY|INFO: Fatal|ERROR: libFuzzer)|invariant broken|Fatal error' "$log" | head -80 >&2 || tail -60 "$log" >&2
  exit 1
fi
