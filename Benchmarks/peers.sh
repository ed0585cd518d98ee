#!/usr/bin/env bash
# Benchmarks VipsLoad against the tools a user would otherwise pick (vipsthumbnail, pyvips,
# Pillow, OpenCV, ImageMagick, and djpeg as the JPEG decode floor) on the same corpus and thumbnail size.
#
# Installs what is missing (idempotently: apt-get runs only when a package is absent, pip only
# when the venv lacks a module), builds `vipsload` in release, then hands every argument to
# peers.py, which does the measuring and prints a markdown table. See `peers.sh --help`.
#
#   Benchmarks/peers.sh                      # the default corpus (`vipsload corpus`), 256 px, 3 repeats
#   Benchmarks/peers.sh ~/photos --size 512  # any folder of images, grouped by format
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"

# System packages: libvips (scripts/setup.sh installs it and the libvips CLI) plus ImageMagick,
# djpeg and venv, installed the same idempotent way.
"$root/scripts/setup.sh" imagemagick libjpeg-turbo-progs python3-venv

# Python peers live in a venv under the user's cache so the system Python stays clean.
# The venv is made from Debian's python3 (the one python3-venv serves) when there is one.
venv="${XDG_CACHE_HOME:-$HOME/.cache}/vipsload/bench-venv"
if ! "$venv/bin/python" -c 'import pyvips, PIL, cv2' >/dev/null 2>&1; then
  base=python3
  [ -x /usr/bin/python3 ] && base=/usr/bin/python3
  echo "peers: preparing $venv (pyvips, Pillow, OpenCV)" >&2
  rm -rf "$venv"
  "$base" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check pyvips Pillow opencv-python-headless
  "$venv/bin/python" -c 'import pyvips, PIL, cv2' # fail here, loudly, if the install did not take
fi

# VipsLoad itself, in release. SwiftPM's note that it drops a -pthread flag, and the
# linker's note on mktemp in the toolchain's static Foundation (Package.swift says why), are not ours.
cd "$root"
swift build -c release --product vipsload 2>&1 | { grep -v -e "prohibited flag(s): -pthread" -e "use of .mktemp. is dangerous" || true; } >&2
bin="$(swift build -c release --show-bin-path)/vipsload"

# The command as typed and the sources' revision, for the report.
export PEERS_INVOCATION="Benchmarks/peers.sh${*:+ $*}"
PEERS_REVISION="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
git -C "$root" diff --quiet HEAD -- Sources Package.swift CVipsShim 2>/dev/null || PEERS_REVISION+=" + local changes"
export PEERS_REVISION
# The chart goes next to RESULTS.md unless the arguments name another file (the last --svg wins).
exec "$venv/bin/python" "$root/Benchmarks/peers.py" --vipsload "$bin" --svg "$root/Benchmarks/peers.svg" "$@"
