#!/usr/bin/env bash
# Formats the tree with the toolchain's swift-format (.swift-format), as scripts/test.sh lints it.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
exec swift-format format -i --parallel -r Sources Tests Fuzz Benchmarks Package.swift
