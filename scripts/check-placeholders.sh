#!/usr/bin/env bash
# Checks VipsLoad's placeholders (BlurHash, ThumbHash) against the reference encoders on PyPI
# (`blurhash` and `thumbhash`, and `thumbhash-rs` for images with alpha, in venvs under the
# user's cache; never used at run time).
#
#   scripts/check-placeholders.sh            # images the script generates (gradients, noise,
#                                            # shapes, alpha, wide and tall), with Pillow
#   scripts/check-placeholders.sh DIR...     # also every image in DIR (searched recursively)
#
# Each image goes through `vipsload thumb --size 100 -f png --json --placeholder`; the reference
# encoders then read the very thumbnail VipsLoad encoded (a lossless PNG, so both see the same
# pixels) and the strings are compared. Prints one line per image and a summary; exits 1 on any
# mismatch. The temporary folder is removed at exit, also on SIGINT/SIGTERM.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"

"$root/scripts/setup.sh" python3-venv

# Two venvs: `thumbhash` (pure Python) and `thumbhash-rs` (the Rust port) both install a module
# named `thumbhash`. Versions are pinned so the references do not move under the check.
cache="${XDG_CACHE_HOME:-$HOME/.cache}/vipsload"
base=python3
[ -x /usr/bin/python3 ] && base=/usr/bin/python3
prepare() { # VENV CHECK PACKAGES...
  local venv=$1 check=$2
  shift 2
  if ! "$venv/bin/python" -c "$check" >/dev/null 2>&1; then
    echo "check-placeholders: preparing $venv ($*)" >&2
    rm -rf "$venv"
    "$base" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "$@"
    "$venv/bin/python" -c "$check"
  fi
}
venv="$cache/placeholder-venv"
rust_venv="$cache/placeholder-rs-venv"
prepare "$venv" 'import blurhash, thumbhash, PIL' blurhash==1.1.5 thumbhash==0.1.2 Pillow
prepare "$rust_venv" 'import thumbhash._thumbhash' thumbhash-rs==0.1.0

(cd "$root" && swift build -c release --product vipsload -Xswiftc -warnings-as-errors >&2)
vipsload="$root/.build/release/vipsload"

work="$(mktemp -d "${TMPDIR:-/tmp}/vipsload-placeholders.XXXXXX")"
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$work/inputs" "$work/thumbs"
"$venv/bin/python" "$root/scripts/placeholders_reference.py" generate "$work/inputs"
"$vipsload" thumb --size 100 -f png --json --placeholder --quiet --name '%h-%s' -o "$work/thumbs" \
  "$work/inputs" "$@" >"$work/thumb.jsonl" || true
"$venv/bin/python" "$root/scripts/placeholders_reference.py" compare "$work/thumb.jsonl" "$work/thumbs" \
  "$rust_venv/bin/python"
