#!/usr/bin/env bash
# Compares VipsLoad with Pillow on Pillow's own test images (its sdist's Tests/images, about
# 1,060 files): per-format figures for BMP, ICO, CUR, TGA and TIFF (files Pillow decodes, files
# VipsLoad decodes right, wrong, refused), and one batch of every file, which must survive them all.
# See scripts/check-pillow-suite.py for how images are compared.
#
#   scripts/check-pillow-suite.sh [PILLOW_VERSION]     (default 13.0.0)
#
# Fetches the sdist from PyPI with pip (the only network use) into ~/.cache/vipsload/pillow-suite
# and unpacks Tests/images there; Pillow and numpy run in a venv under ~/.cache/vipsload. Nothing
# fetched is written into the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
version=${1:-13.0.0}
cache=${VIPSLOAD_CACHE:-$HOME/.cache/vipsload}
suite=$cache/pillow-suite
venv=$cache/pillow-venv
mkdir -p "$suite"

if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv"; fi
"$venv/bin/pip" install -q "pillow==$version" numpy
if [ ! -f "$suite/pillow-$version.tar.gz" ]; then
  # --no-binary for pillow only: its build requirements may come as wheels (pip builds the sdist's
  # metadata, which needs them).
  "$venv/bin/pip" download -q --no-binary pillow --no-deps "pillow==$version" -d "$suite"
fi
if [ ! -d "$suite/pillow-$version/Tests/images" ]; then
  tar -xzf "$suite/pillow-$version.tar.gz" -C "$suite" --wildcards "pillow-$version/Tests/images/*"
fi

swift build -c release --product vipsload -Xswiftc -warnings-as-errors 2>&1 |
  { grep -v -e "prohibited flag(s): -pthread" -e "use of .mktemp. is dangerous" || true; } >&2
bin="$(swift build -c release --show-bin-path)/vipsload"
"$venv/bin/python" scripts/check-pillow-suite.py "$suite/pillow-$version/Tests/images" "$bin"
