#!/usr/bin/env bash
# The test command: installs what is missing, builds, fuzzes for a minute, runs the whole XCTest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
scripts/setup.sh
# Warnings are errors. SwiftPM's own note that it drops the -pthread flag from
# libvips' pkg-config output is not a compiler warning and is filtered out.
swift build --build-tests -Xswiftc -warnings-as-errors 2>&1 | { grep -v "prohibited flag(s): -pthread" || true; }
# One minute of fuzzing first, so the libFuzzer harness (Fuzz/) keeps building and
# the seed corpus keeps passing; VIPSLOAD_FUZZ_SECONDS=0 skips it.
fuzz_seconds=${VIPSLOAD_FUZZ_SECONDS:-60}
if [ "$fuzz_seconds" -gt 0 ]; then
  # A fixed seed keeps this smoke run repeatable; long runs (scripts/fuzz.sh) explore freely.
  scripts/fuzz.sh "$fuzz_seconds" -seed=1 2>&1 | tail -n 5
fi
# XCTest only: Swift Testing would close the log with a "0 tests" line of its own.
# A hung test must fail the run, not eat CI's 90 minutes.
timeout 45m swift test --skip-build --disable-swift-testing "$@"
