#!/usr/bin/env bash
# Type-checks every ```swift block of the DocC articles (Sources/<Module>/<Module>.docc/*.md)
# against the modules as built, so an example that no longer compiles fails the docs build.
#
# Each block is checked as it is written, inside an `async throws` function of its own (so
# `try` and `await` work as at a program's top level), with its `import` lines (and `#if
# canImport` groups of imports) moved above the function. A block that imports anything is a
# whole program and gets only its own imports (so `import VipsServe` alone must be enough for
# the VipsServe example); a fragment gets Foundation and its article's module. What a block
# leaves to the reader (`pipeline`, `url`, `bitmap`, `show`, `report`, `progressBar`, ...) is
# declared in a context file of its module's (`context` below); a block's own declarations
# shadow it. Package.swift fragments (`.package(`, `.executableTarget(`) are not Swift of these
# modules and are skipped. Only type-checked (swiftc -typecheck), never linked or run: a few
# seconds a module.
#
# Usage: scripts/check-doc-snippets.sh [MODULES_DIR]
#   MODULES_DIR: where the built modules are (default .build/docs/debug/Modules, which
#   scripts/docs.sh builds; it runs this check). Prints "docs: N examples ... type-check".
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
modules_dir=${1:-.build/docs/debug/Modules}
work=.build/doc-snippets
rm -rf "$work"
mkdir -p "$work"

# The C modules' maps and the system headers they include, for the modules' Clang dependencies.
clang_flags=()
while IFS= read -r map; do clang_flags+=(-Xcc "-fmodule-map-file=$PWD/$map"); done \
  < <(find . -name module.modulemap -not -path './.build/*' -not -path './.fuzz/*' | sed 's|^\./||' | sort)
packages=$(sed -n 's/.*pkgConfig: "\([^"]*\)".*/\1/p' Package.swift | tr '\n' ' ')
# shellcheck disable=SC2086
for flag in $(pkg-config --cflags-only-I $packages); do clang_flags+=(-Xcc "$flag"); done

python3 - "$work" <<'PY'
import glob, os, re, sys
work = sys.argv[1]
modules = ["VipsCore", "VipsLoad", "VipsServe"]
# What the articles leave to the reader, by module (each module's context sees its own types).
context = {
    "VipsCore": """
let bitmap = try! Bitmap(width: 1, height: 1, channels: 3, scale: 1, pixels: Data(count: 3))
let square = bitmap
""",
    "VipsLoad": """
let pipeline = ImagePipeline()
let url = URL(string: "https://example.com/photo.jpg")!
let bitmap = try! Bitmap(width: 1, height: 1, channels: 3, scale: 1, pixels: Data(count: 3))
let requests: [ImageRequest] = []
func show(_ bitmap: Bitmap, at index: Int = 0) {}
func report(_ error: VipsError, for request: ImageRequest? = nil) {}
func log(_ message: String) {}
func showOfflinePlaceholder() {}
func onLowMemory(_ body: @escaping @Sendable () -> Void) {}
struct ProgressBar { func show(_ completed: Int, of total: Int?) {} }
let progressBar = ProgressBar()
struct Row { var imageURL: URL }
let upcomingRows: [Row] = []
let rowsNoLongerAhead: [Row] = []
""",
    "VipsServe": """
let pipeline = ImagePipeline()
let url = URL(string: "https://example.com/photo.jpg")!
""",
}
checked = skipped = 0
for module in modules:
    folder = os.path.join(work, module)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "Context.swift"), "w") as out:
        out.write("import Foundation\nimport %s\n%s" % (module, context[module]))
    for article in sorted(glob.glob("Sources/%s/%s.docc/*.md" % (module, module))):
        lines = open(article).read().split("\n")
        index = 0
        while index < len(lines):
            if lines[index].strip() != "```swift":
                index += 1
                continue
            start = index + 1
            end = start
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            block = lines[start:end]
            index = end + 1
            text = "\n".join(block)
            if ".package(" in text or ".executableTarget(" in text:
                skipped += 1
                continue
            imports, body, group = [], [], []
            for line in block:
                if group:
                    group.append(line)
                    if line.strip() == "#endif":
                        imports += group
                        group = []
                elif line.startswith("#if canImport"):
                    group = [line]
                elif line.startswith("import "):
                    imports.append(line)
                else:
                    body.append(line)
            name = "%s_L%d" % (re.sub(r"\W", "_", os.path.basename(article)[:-3]), start)
            with open(os.path.join(folder, name + ".swift"), "w") as out:
                out.write("// %s, line %d\n" % (article, start + 1))
                # A block with imports of its own is a whole program: it gets only those.
                out.write("\n".join(imports or ["import Foundation", "import " + module]) + "\n\n")
                out.write("func snippet_%s() async throws {\n" % name)
                out.write("\n".join("    " + line if line else "" for line in body))
                out.write("\n}\n")
            checked += 1
open(os.path.join(work, "counts"), "w").write("%d %d\n" % (checked, skipped))
PY

status=0
for module in VipsCore VipsLoad VipsServe; do
  files=("$work/$module"/*.swift)
  [ "${#files[@]}" -gt 1 ] || continue
  # Warnings (a variable the example never reads again) are not failures: only errors are.
  if ! swiftc -typecheck -parse-as-library -swift-version 6 -I "$modules_dir" "${clang_flags[@]}" "${files[@]}" \
    >"$work/$module.log" 2>&1; then
    echo "doc snippets: the $module articles' examples do not compile:" >&2
    grep -E "error:" -A3 "$work/$module.log" >&2 || cat "$work/$module.log" >&2
    status=1
  fi
done
read -r checked skipped <"$work/counts"
[ "$status" = 0 ] || exit 1
echo "docs: $checked examples of the DocC articles type-check ($skipped Package.swift fragment(s) skipped)"
