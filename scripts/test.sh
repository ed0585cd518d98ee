#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs the whole XCTest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
scripts/setup.sh
# Warnings are errors. SwiftPM's own note that it drops the -pthread flag from
# libvips' pkg-config output is not a compiler warning and is filtered out.
swift build --build-tests -Xswiftc -warnings-as-errors 2>&1 | { grep -v "prohibited flag(s): -pthread" || true; }
# XCTest only: Swift Testing would close the log with a "0 tests" line of its own.
swift test --skip-build --disable-swift-testing "$@"
