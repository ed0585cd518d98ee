#!/usr/bin/env bash
# The main job: installs what is missing, builds vipsload (release) and runs
# `vipsload bench --compare` on the built-in corpus, which it generates once
# into ~/.cache/vipsload (or $VIPSLOAD_CACHE_DIR). Extra arguments go to
# `vipsload bench` (for example a folder of your own images, or --json).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
scripts/setup.sh
# Release links the Swift runtime statically: the linker's note on mktemp in the toolchain's
# static Foundation is not ours (Package.swift says why), nor SwiftPM's on a -pthread flag.
swift build -c release --product vipsload 2>&1 | { grep -v -e "prohibited flag(s): -pthread" -e "use of .mktemp. is dangerous" || true; }
exec .build/release/vipsload bench --compare "$@"
