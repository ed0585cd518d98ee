#!/usr/bin/env bash
# Checks that the README's "Depend on it" manifest really resolves and builds: a throwaway
# package (.build/package-use/App) whose Package.swift is that code block, verbatim, depends
# on this checkout by path as the README says (../VipsLoad: a symlink named VipsLoad, since a
# path dependency's identity is its folder's name), builds offline (path dependencies only, and
# --disable-automatic-resolution, so nothing can be fetched), and thumbnails an image.
#
# Usage: scripts/check-package-use.sh     (scripts/test.sh runs it; VIPSLOAD_PACKAGE_USE=0 skips it there)
# The build folder (.build/package-use/scratch) is kept between runs, so later runs are incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
scripts/setup.sh
root=$PWD
work=.build/package-use
app=$work/App
mkdir -p "$app/Sources/App"
ln -sfn "$root" "$work/VipsLoad"

# The first ```swift block of the README that declares a path dependency, as it is written.
awk '
  /^```swift$/ { inside = 1; block = ""; next }
  /^```$/ && inside { inside = 0; if (block ~ /\.package\(path:/) { printf "%s", block; exit } ; next }
  inside { block = block $0 "\n" }
' README.md > "$app/Package.swift.new"
grep -q '\.package(path: "\.\./VipsLoad")' "$app/Package.swift.new" \
  || { echo "check-package-use: README.md has no manifest with .package(path: \"../VipsLoad\")" >&2; exit 1; }
grep -q '\.product(name: "VipsLoad", package: "VipsLoad")' "$app/Package.swift.new" \
  || { echo "check-package-use: README.md's manifest lacks .product(name: \"VipsLoad\", package: \"VipsLoad\")" >&2; exit 1; }
# Rewritten only when changed, so an unchanged manifest does not make SwiftPM reload everything.
cmp -s "$app/Package.swift.new" "$app/Package.swift" || mv "$app/Package.swift.new" "$app/Package.swift"
rm -f "$app/Package.swift.new"

cat > "$app/Sources/App/main.swift.new" <<'EOF'
import VipsLoad

// The README's first call: one thumbnail through a default pipeline.
let pipeline = ImagePipeline()
let bitmap = try await pipeline.image(for: ImageRequest(path: CommandLine.arguments[1], size: .maxPixelSize(64)))
print("\(bitmap.width)x\(bitmap.height), libvips \(VipsRuntime.libraryVersion)")
EOF
cmp -s "$app/Sources/App/main.swift.new" "$app/Sources/App/main.swift" \
  || mv "$app/Sources/App/main.swift.new" "$app/Sources/App/main.swift"
rm -f "$app/Sources/App/main.swift.new"

swift build --package-path "$app" --scratch-path "$work/scratch" --disable-automatic-resolution 2>&1 \
  | { grep -v "prohibited flag(s): -pthread" || true; } | tail -n 1
# A path dependency is never pinned, so there is nothing a later build could fetch.
if [ -f "$app/Package.resolved" ] && grep -q '"location"' "$app/Package.resolved"; then
  echo "check-package-use: the package pinned a remote dependency:" >&2
  cat "$app/Package.resolved" >&2
  exit 1
fi
vips black "$work/black.png" 320 240
output=$("$work/scratch/debug/App" "$work/black.png")
[ "${output%%,*}" = "64x48" ] || { echo "check-package-use: unexpected output: $output" >&2; exit 1; }
echo "package use: README manifest built against this checkout by path; App printed: $output"
