#!/usr/bin/env bash
# Tries docs/serve.md's scale-out section as far as one machine allows: checks the Kubernetes
# Deployment (replicas, readiness on /health, terminationGracePeriodSeconds above the drain
# timeout, CPU and memory requests, a per-pod disk cache), runs its container command as 2–3
# replicas on 127.0.0.1 behind the doc's nginx load balancer, drains one with a request in flight
# (SIGTERM: /health 503, new requests 503, the request completes, exit 0, nginx keeps answering
# from the others) and restarts it on its disk cache. scripts/check-serve-scale-out.py does the work.
# Usage: scripts/check-serve-scale-out.sh [VIPSLOAD_BINARY] [--doc FILE]
#        (default: builds and uses .build/debug/vipsload; docs/serve.md)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
scripts/setup.sh nginx python3-yaml
binary=""
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then binary=$1; shift; fi
if [ -z "$binary" ]; then
  swift build --product vipsload 2>&1 | { grep -v "prohibited flag(s): -pthread" || true; } | tail -n 1
  binary=$(swift build --show-bin-path)/vipsload
fi
exec /usr/bin/python3 scripts/check-serve-scale-out.py --vipsload "$(realpath "$binary")" "$@"
