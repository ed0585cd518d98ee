#!/usr/bin/env bash
# Builds the DocC archives of the library products (VipsCore, VipsLoad, VipsServe) with the toolchain's
# own `docc`: no plugin package is fetched. Symbol graphs come from the compiler during a build
# in its own scratch folder (.build/docs, so the normal build is not invalidated), then
# `docc convert` joins each module's graphs with its catalog (Sources/<Module>/<Module>.docc).
# A DocC warning (a broken link, an undocumented parameter) fails the script: docc runs with
# --warnings-as-errors, and the warnings are printed. So does an article's ```swift example that
# no longer compiles (scripts/check-doc-snippets.sh, run between the build and docc).
#
# Usage: scripts/docs.sh [OUTPUT_DIR]      (default: .build/docs/archives)
# Writes OUTPUT_DIR/<Module>.doccarchive for each of them, for static
# hosting (open OUTPUT_DIR/<Module>.doccarchive/index.html through any web server). The doc
# coverage check (every public declaration documented) is the DocCoverageTests test, run by
# scripts/test.sh; `swift test --filter DocCoverageTests` runs it alone.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
scripts/setup.sh
output=${1:-.build/docs/archives}
scratch=.build/docs
graphs=$scratch/symbol-graphs
modules=(VipsCore VipsLoad VipsServe)

# The compiler writes a module's graphs when it compiles the module, so the folder is kept between
# runs (an unchanged module is not recompiled and keeps its graphs).
mkdir -p "$graphs" "$output"
previous=
for module in "${modules[@]}"; do
  # Each module re-exports the one before it (VipsLoad VipsCore, VipsServe VipsLoad), so its graphs
  # hold that module's symbols and doc comments too; when those changed, the module is compiled
  # again (its objects and module in this scratch folder are dropped), or it would keep their old text.
  if [ -n "$previous" ] && [ "$graphs/$previous.symbols.json" -nt "$graphs/$module.symbols.json" ]; then
    rm -f "$scratch/debug/$module.build/"*.o "$scratch/debug/$module.build/"*.swiftdeps "$scratch/debug/Modules/$module.swiftmodule"
  fi
  previous=$module
  swift build --scratch-path "$scratch" --target "$module" \
    -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$PWD/$graphs" \
    2>&1 | { grep -v "prohibited flag(s): -pthread" || true; } | tail -n 1
done
# Every ```swift example of the articles type-checks against the modules just built.
scripts/check-doc-snippets.sh "$scratch/debug/Modules"

for module in "${modules[@]}"; do
  # The module's own graphs: its symbols and its extensions of other modules (Module@Other).
  rm -rf "${graphs:?}/$module"
  mkdir -p "$graphs/$module"
  cp "$graphs/$module.symbols.json" "$graphs/$module"/
  compgen -G "$graphs/$module@*.symbols.json" >/dev/null && cp "$graphs/$module"@*.symbols.json "$graphs/$module"/
  rm -rf "$output/$module.doccarchive"
  docc convert "Sources/$module/$module.docc" \
    --additional-symbol-graph-dir "$graphs/$module" \
    --fallback-display-name "$module" \
    --fallback-bundle-identifier "org.vipsload.$module" \
    --transform-for-static-hosting --hosting-base-path "$module" \
    --warnings-as-errors \
    --output-path "$output/$module.doccarchive"
  echo "docs: $output/$module.doccarchive"
done
