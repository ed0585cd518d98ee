#!/usr/bin/env bash
# Runs the decode tests under AddressSanitizer (+ LeakSanitizer) and the
# pipeline tests under ThreadSanitizer. Any report fails the run.
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
  has_tests VipsLoadTests && filters+=(--filter VipsLoadTests)
  # The decoder's own concurrency (a pipeline decodes in parallel), with good and hostile input.
  if has_tests VipsCoreTests; then
    filters+=(--filter 'VipsCoreTests.ConcurrencyTests' --filter 'HostileInputTests.testHostileAndGoodInputsDecodedConcurrently')
  fi
  if ((${#filters[@]})); then
    echo "sanitize: ThreadSanitizer on ${filters[*]}" >&2
    reports=.build/sanitize-thread/reports
    rm -rf "$reports" && mkdir -p "$reports"
    # Reports go to files and do not set the exit status (exitcode=0): the filter below decides.
    # history_size=7 keeps the previous access's stack, which the filter needs.
    # NetworkMemoryTests asserts peak RSS, which TSan's shadow memory multiplies: checked in normal runs.
    TSAN_OPTIONS="suppressions=$supp/tsan.supp:log_path=$PWD/$reports/tsan:exitcode=0:history_size=7:${TSAN_OPTIONS:-}" \
      swift test --sanitize=thread --scratch-path .build/sanitize-thread "${filters[@]}" --skip NetworkMemoryTests 2>&1 |
      filter_note || status=1
    # ThreadSanitizer cannot see Synchronization.Mutex on Linux: its lock is a futex reached
    # through an uninstrumented library, so two accesses both made under the same Mutex look
    # like a race (a 15-line program with Mutex<Int> and two threads shows it; NSLock does not).
    # A report is set aside only when BOTH accesses run inside a Mutex.withLock closure
    # (mangled "zYuYTXE": a closure taking `inout sending State` and returning `sending`;
    # "z<error type>YKYTXE" when the closure has a typed `throws(E)`, e.g. "zAGYKYTXE"),
    # that is, both held a lock; anything else is a real race and fails the run.
    # (A race between accesses under two different Mutexes would be missed.)
    if compgen -G "$reports/tsan.*" >/dev/null; then
      verdict=$(awk '
        /^WARNING: ThreadSanitizer/ { open = 1; side = 1; a = 0; b = 0; text = ""; total++ }
        open { text = text $0 "\n" }
        open && /^  Previous / { side = 2 }
        open && /^  (Location is|Mutex |Thread T|Issue is caused)/ { side = 3 }
        open && /z(Yu|[A-Z0-9]+YK)YTXE/ { if (side == 1) a = 1; else if (side == 2) b = 1 }
        open && /^SUMMARY: ThreadSanitizer/ { open = 0; if (a && b) locked++; else { real++; printf "%s\n", text > "/dev/stderr" } }
        END { printf "%d %d %d\n", total, locked, real }
      ' "$reports"/tsan.*)
      read -r total locked real <<<"$verdict"
      echo "sanitize: ThreadSanitizer: $total reports, $locked with both sides under Mutex.withLock (set aside), $real real" >&2
      [ "$real" -eq 0 ] || status=1
    else
      echo "sanitize: ThreadSanitizer: no reports" >&2
    fi
  else
    echo "sanitize: no pipeline tests (Tests/VipsLoadTests) yet, ThreadSanitizer skipped" >&2
  fi
fi

if [ "$status" -ne 0 ]; then echo "sanitize: FAILED" >&2; else echo "sanitize: clean" >&2; fi
exit "$status"
