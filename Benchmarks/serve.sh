#!/usr/bin/env bash
# Benchmarks `vipsload serve` against thumbor with wrk, in one run: cold (every URL distinct, per
# corpus class), remote sources (the corpus from nginx on 127.0.0.1 against the same files on
# disk) and warm (one URL from the memory cache, keep-alive); or a soak per allocator setting.
#
# Installs what is missing (idempotently: apt-get only when a package is absent, pip only when the
# venv lacks thumbor), builds `vipsload` in release, generates the corpus (`vipsload corpus`),
# then hands every argument to serve.py, which starts and stops every server, nginx and wrk
# itself (each in its own process group, killed on exit, on error and on SIGINT/SIGTERM), picks
# free ports, and prints a markdown table with the commands it ran. See `serve.sh --help`.
#
#   Benchmarks/serve.sh                    # cold, remote, warm (about 5 minutes)
#   Benchmarks/serve.sh --quick            # the same with 5 s rows, for development
#   Benchmarks/serve.sh --vipsload-urls fit,client   # also rs:auto URLs as the PyPI imgproxy client builds them
#   Benchmarks/serve.sh soak [MINUTES]     # MINUTES (default 10) per allocator setting, 3 settings
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"

# wrk drives the load, nginx is the remote origin, jemalloc is one of the soak's allocators.
"$root/scripts/setup.sh" wrk nginx libjemalloc2 python3-venv

# thumbor (pinned, so reruns compare the same peer) in a venv under the user's cache.
thumbor_version=7.8.0
venv="${XDG_CACHE_HOME:-$HOME/.cache}/vipsload/thumbor-venv"
if ! "$venv/bin/python" -c "import thumbor, sys; sys.exit(thumbor.__version__ != '$thumbor_version')" >/dev/null 2>&1; then
  base=python3
  [ -x /usr/bin/python3 ] && base=/usr/bin/python3
  echo "serve: preparing $venv (thumbor $thumbor_version)" >&2
  rm -rf "$venv"
  "$base" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "thumbor==$thumbor_version"
  "$venv/bin/python" -c 'import thumbor' # fail here, loudly, if the install did not take
fi

# VipsLoad in release. SwiftPM's note that it drops a -pthread flag, and the
# linker's note on mktemp in the toolchain's static Foundation (Package.swift says why), are not ours.
cd "$root"
swift build -c release --product vipsload 2>&1 | { grep -v -e "prohibited flag(s): -pthread" -e "use of .mktemp. is dangerous" || true; } >&2
bin="$(swift build -c release --show-bin-path)/vipsload"
corpus="$("$bin" corpus)"

export SERVE_INVOCATION="Benchmarks/serve.sh${*:+ $*}"
SERVE_REVISION="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
git -C "$root" diff --quiet HEAD -- Sources Package.swift CVipsShim 2>/dev/null || SERVE_REVISION+=" + local changes"
export SERVE_REVISION
# The remote sources' origin: the project's private nginx (Benchmarks/nginx.sh, which stops it on
# EXIT, INT and TERM) when it is there; else serve.py starts an nginx of its own.
origin=()
if [ -f "$root/Benchmarks/nginx.sh" ] && [ "${1:-}" != soak ]; then
  # shellcheck source=/dev/null
  source "$root/Benchmarks/nginx.sh"
  nginx_serve "$corpus"
  origin=(--origin "$NGINX_URL")
fi
# serve.py owns every process it starts (servers, wrk, its nginx), each in a process group it
# kills on exit, on errors and on SIGINT/SIGTERM.
"$venv/bin/python" "$root/Benchmarks/serve.py" --vipsload "$bin" --thumbor "$venv/bin/thumbor" \
  --corpus "$corpus" "${origin[@]}" "$@"
