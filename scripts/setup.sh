#!/usr/bin/env bash
# Installs what VipsLoad needs to build, test and benchmark, idempotently:
# nothing is installed when it is already there. Debian/Ubuntu (apt-get), as root or with sudo.
set -euo pipefail

# libcurl4-openssl-dev: VipsLoad's HTTP transport (libcurl's multi interface, TLS through OpenSSL);
# ca-certificates: the CA store libcurl verifies https servers against.
packages=(libvips-dev libvips-tools libturbojpeg0-dev libwebp-dev libspng-dev libdeflate-dev libtiff-dev libtiff-tools libexif-dev liblcms2-dev libxxhash-dev
  libmicrohttpd-dev libcurl4-openssl-dev ca-certificates libjpeg-turbo-progs pkg-config "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}" >&2
  # A fresh machine has no package lists yet: update once before the first install.
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  echo "setup: swift is at /opt/swift/usr/bin; add it to PATH" >&2
fi
