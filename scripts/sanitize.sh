#!/usr/bin/env bash
# Runs the decode tests under AddressSanitizer (+ LeakSanitizer) and the
# pipeline and server tests under ThreadSanitizer. Any report fails the run.
#
#   scripts/sanitize.sh [address|thread|all]     (default all)
#
# Each sanitizer builds in its own scratch folder (.build/sanitize-*), so the
# normal debug build is never clobbered. Suppressions live in scripts/sanitizers/
# and cover libvips/GLib internals only, each with its reason.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
which=${1:-all}
case $which in address | thread | all) ;; *) echo "usage: scripts/sanitize.sh [address|thread|all]" >&2; exit 2 ;; esac

scripts/setup.sh
supp="$PWD/scripts/sanitizers"
# pipefail (set above) keeps swift's status through this filter.
filter_note() { grep -v -e "prohibited flag(s): -pthread" -e "Cannot export local symbol" || true; }

# Whether a test target has any Swift sources yet (the pipeline tests may not exist on a branch).
has_tests() { [ -n "$(find "Tests/$1" -name '*.swift' 2>/dev/null | head -1)" ]; }

status=0

if [ "$which" = address ] || [ "$which" = all ]; then
  echo "sanitize: AddressSanitizer + LeakSanitizer on VipsCoreTests" >&2
  # detect_leaks: LeakSanitizer runs at exit, suppressions in lsan.supp. (The hostile suite's
  # peak-memory bounds are checked in normal runs: ASan's allocator pads and quarantines memory.)
  ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:${ASAN_OPTIONS:-}" \
  LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}" \
    swift test --sanitize=address --scratch-path .build/sanitize-address --filter VipsCoreTests 2>&1 | filter_note ||
    status=1
fi

if [ "$which" = thread ] || [ "$which" = all ]; then
  filters=()
  # The pipeline, caching and loading tests, and the decoder's own concurrency
  # (a pipeline decodes in parallel) with good and hostile input.
  has_tests VipsLoadTests && filters+=(--filter VipsLoadTests)
  # The server: libmicrohttpd's threads, the hang-up watcher and the renders meet in its locks.
  has_tests VipsServeTests && filters+=(--filter VipsServeTests)
  if has_tests VipsCoreTests; then
    filters+=(--filter 'VipsCoreTests.ConcurrencyTests' --filter 'HostileInputTests.testHostileAndGoodInputsDecodedConcurrently')
  fi
  if ((${#filters[@]})); then
    echo "sanitize: ThreadSanitizer on ${filters[*]}" >&2
    reports=.build/sanitize-thread/reports
    rm -rf "$reports" && mkdir -p "$reports"
    # No report filter: every engine, queue and cache lock is a pthread mutex
    # (VipsCore's Lock), which TSan sees, so any report is a real race and
    # fails the run. Reports go to files so each can be read in full.
    # NetworkMemoryTests asserts peak RSS, which TSan's shadow memory multiplies: checked in normal runs.
    TSAN_OPTIONS="suppressions=$supp/tsan.supp:log_path=$PWD/$reports/tsan:${TSAN_OPTIONS:-}" \
      swift test --sanitize=thread --scratch-path .build/sanitize-thread "${filters[@]}" --skip NetworkMemoryTests 2>&1 |
      filter_note || status=1
    count=0
    if compgen -G "$reports/tsan.*" >/dev/null; then
      count=$(cat "$reports"/tsan.* | grep -c '^WARNING: ThreadSanitizer' || true)
      cat "$reports"/tsan.* >&2
    fi
    echo "sanitize: ThreadSanitizer: $count reports" >&2
    [ "$count" -eq 0 ] || status=1
  else
    echo "sanitize: no pipeline tests (Tests/VipsLoadTests) yet, ThreadSanitizer skipped" >&2
  fi
fi

if [ "$status" -ne 0 ]; then echo "sanitize: FAILED" >&2; else echo "sanitize: clean" >&2; fi
exit "$status"
