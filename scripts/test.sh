#!/usr/bin/env bash
# The test command: installs what is missing, lints, builds, checks the README's package manifest, fuzzes 10,000 inputs (about a minute), builds the DocC archives, runs the whole XCTest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
# GNU parallel: the shard test runs four shards with it, as docs/scale-out.md does (else background processes).
# Chromium, its driver and selenium (all Debian's): the browser test against `vipsload serve`.
# nginx and python3-yaml: the serve scale-out check (docs/serve.md's replicas behind nginx).
scripts/setup.sh parallel chromium chromium-driver python3-selenium nginx python3-yaml
# The tree is formatted by the toolchain's swift-format (.swift-format); a finding fails the run.
swift-format lint --strict --parallel -r Sources Tests Fuzz Benchmarks Package.swift
# Warnings are errors. SwiftPM's own note that it drops the -pthread flag from
# libvips' pkg-config output is not a compiler warning and is filtered out.
swift build --build-tests -Xswiftc -warnings-as-errors 2>&1 | { grep -v "prohibited flag(s): -pthread" || true; }
# The README's "Depend on it" manifest, verbatim, builds against this checkout by path, offline,
# and runs (its own build folder, .build/package-use: about 3 minutes on a fresh machine, seconds
# later); VIPSLOAD_PACKAGE_USE=0 skips it.
if [ "${VIPSLOAD_PACKAGE_USE:-1}" != 0 ]; then
  scripts/check-package-use.sh
fi
# About a minute of fuzzing first, so the libFuzzer harness (Fuzz/) keeps building and
# the seed corpus keeps passing; VIPSLOAD_FUZZ_RUNS=0 skips it.
fuzz_runs=${VIPSLOAD_FUZZ_RUNS:-10000}
if [ "$fuzz_runs" -gt 0 ]; then
  mkdir -p .build && touch .build/fuzz-smoke.start
  # A fixed seed and a fixed number of inputs (not a time budget, which a faster or
  # slower machine would turn into a different run) keep this smoke run repeatable;
  # the time is only a cap. Long runs (scripts/fuzz.sh SECONDS) explore freely.
  # Quiet when it passes (its last line: the figures). When it finds something: all of what it said,
  # the finding's report and each crasher in base64 (a CI log is enough to reproduce it), then each
  # crasher replayed alone three times. A finding that reproduces fails the run. One that never
  # reproduces (a hang or a release that depended on thread timing, on this machine, this once) is
  # reported as such and does not, since it cannot be told from the machine's own noise here; long
  # runs (scripts/fuzz.sh SECONDS) fail on every finding.
  if ! scripts/fuzz.sh 600 -seed=1 -runs="$fuzz_runs" >.build/fuzz-smoke.log 2>&1; then
    grep -v -e '^\[[0-9]*/[0-9]*\]' -e '^Build' -e '^Building' .build/fuzz-smoke.log | tail -n 120
    crashers=$(find .fuzz/crashes -type f ! -name '*slow-unit-*' -newer .build/fuzz-smoke.start)
    [ -n "$crashers" ] || { echo "fuzz smoke: failed without a crasher"; exit 1; }
    reproduced=0
    for crasher in $crashers; do
      echo "crasher $crasher ($(wc -c <"$crasher") bytes), base64 (at most 16 KiB):"
      head -c 16384 "$crasher" | base64 -w 0
      echo
      for attempt in 1 2 3; do
        if ! SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
          LSAN_OPTIONS="suppressions=$PWD/scripts/sanitizers/lsan.supp:print_suppressions=0" \
          .fuzz/build/debug/FuzzDecode -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 \
          "$crasher" >.build/fuzz-replay.log 2>&1; then
          echo "fuzz smoke: $crasher reproduces (replay $attempt):"
          tail -n 60 .build/fuzz-replay.log
          reproduced=1
          break
        fi
      done
    done
    [ "$reproduced" = 0 ] || exit 1
    echo "fuzz smoke: WARNING: the finding above did not reproduce in three replays each"
  else
    tail -n 1 .build/fuzz-smoke.log
  fi
fi
# The DocC archives of the library products still build (a separate build in .build/docs,
# about a minute on a fresh machine); VIPSLOAD_DOCS=0 skips it. Doc coverage is a test below.
if [ "${VIPSLOAD_DOCS:-1}" != 0 ]; then
  mkdir -p .build
  scripts/docs.sh > .build/docs.log 2>&1 || { cat .build/docs.log; exit 1; }
  grep -E "^(docs:|warning)" .build/docs.log || true
fi
# XCTest only: Swift Testing would close the log with a "0 tests" line of its own.
# A hung test must fail the run, not eat CI's 90 minutes.
timeout 45m swift test --skip-build --disable-swift-testing "$@"
