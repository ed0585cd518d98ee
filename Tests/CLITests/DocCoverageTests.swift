import Foundation
import XCTest

/// Every public declaration of the library products has a doc comment.
///
/// The symbol graphs are extracted with the toolchain's
/// `swift-symbolgraph-extract` from the modules this test build made (so no
/// second build), as DocC sees them: a member that implements a protocol
/// requirement of another module without a comment of its own inherits the
/// requirement's documentation, and compiler-synthesised members (no source
/// location) are not counted. Any undocumented declaration fails the test,
/// listed in its message as `file:line: Module.Symbol (kind)`.
final class DocCoverageTests: XCTestCase {
    static let modules = ["VipsCore", "VipsLoad", "VipsServe"]

    /// A public declaration and whether it is documented.
    struct Declaration: Equatable {
        let module: String
        let name: String
        let kind: String
        let file: String
        let line: Int
        let documented: Bool
        var location: String { "\(file):\(line)" }
    }

    /// The public declarations written in `module`'s own sources, from one symbol graph.
    static func declarations(inSymbolGraph data: Data, module: String) throws -> [Declaration] {
        let graph = try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any])
        let symbols = try XCTUnwrap(graph["symbols"] as? [[String: Any]])
        return symbols.compactMap { symbol in
            guard let access = symbol["accessLevel"] as? String, access == "public" || access == "open",
                let location = symbol["location"] as? [String: Any], let uri = location["uri"] as? String,
                let range = uri.range(of: "/Sources/\(module)/")
            else { return nil }
            let path = (symbol["pathComponents"] as? [String] ?? []).joined(separator: ".")
            let kind = (symbol["kind"] as? [String: Any])?["identifier"] as? String ?? "?"
            let line = ((location["position"] as? [String: Any])?["line"] as? Int ?? 0) + 1
            let lines = (symbol["docComment"] as? [String: Any])?["lines"] as? [[String: Any]] ?? []
            let text = lines.compactMap { $0["text"] as? String }.joined().trimmingCharacters(in: .whitespaces)
            return Declaration(
                module: module, name: path, kind: kind, file: "Sources/\(module)/" + uri[range.upperBound...],
                line: line, documented: !text.isEmpty)
        }
    }

    private static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    private static func toolchainTool(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for folder in path.split(separator: ":").map(String.init) + ["/opt/swift/usr/bin", "/usr/bin"] {
            let candidate = folder + "/" + name
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// The folders at the package's root or in `Sources` that hold a module map: the system-library targets.
    private static func systemLibraryFolders() throws -> [URL] {
        let sources = packageRoot.appendingPathComponent("Sources")
        let candidates =
            try FileManager.default.contentsOfDirectory(at: packageRoot, includingPropertiesForKeys: nil)
            + FileManager.default.contentsOfDirectory(at: sources, includingPropertiesForKeys: nil)
        return
            candidates
            .filter { FileManager.default.fileExists(atPath: $0.appendingPathComponent("module.modulemap").path) }
            .sorted { $0.path < $1.path }
    }

    private static func run(_ tool: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    func testEveryPublicDeclarationOfTheLibrariesHasADocComment() throws {
        let extractor = try XCTUnwrap(
            Self.toolchainTool("swift-symbolgraph-extract"), "the toolchain's swift-symbolgraph-extract")
        let pkgConfig = try XCTUnwrap(Self.toolchainTool("pkg-config"), "pkg-config (scripts/setup.sh installs it)")
        let includes = try Self.run(pkgConfig, ["--cflags-only-I", "vips", "libmicrohttpd"]).output
            .split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { !$0.isEmpty }
        let modules = CLIHarness.binary.deletingLastPathComponent().appendingPathComponent("Modules")
        let output = try CLIHarness.temporaryFolder(for: self)
        var all: [Declaration] = []
        for module in Self.modules {
            var arguments = ["-module-name", module, "-I", modules.path]
            // Every system-library target's folder (its module map), however many the package has.
            for folder in try Self.systemLibraryFolders() { arguments += ["-I", folder.path] }
            arguments += [
                "-target", "x86_64-unknown-linux-gnu", "-minimum-access-level", "public", "-output-dir", output.path
            ]
            #if arch(arm64)
                arguments[arguments.firstIndex(of: "x86_64-unknown-linux-gnu")!] = "aarch64-unknown-linux-gnu"
            #endif
            for include in includes { arguments += ["-Xcc", include] }
            let result = try Self.run(extractor, arguments)
            XCTAssertEqual(result.status, 0, result.output)
            let graph = try Data(contentsOf: output.appendingPathComponent("\(module).symbols.json"))
            all += try Self.declarations(inSymbolGraph: graph, module: module)
        }
        XCTAssertGreaterThan(all.count, 200, "the symbol graphs hold the libraries' public API")

        let undocumented = all.filter { !$0.documented }
        let documentedCount = all.count - undocumented.count
        print(
            String(
                format: "doc coverage: %d of %d public declarations documented (%.1f%%)", documentedCount, all.count,
                100 * Double(documentedCount) / Double(all.count)))
        let sorted = undocumented.sorted { ($0.file, $0.line) < ($1.file, $1.line) }
        XCTAssertTrue(
            sorted.isEmpty,
            "public declarations without a doc comment:\n"
                + sorted.map { "\($0.location): \($0.module).\($0.name) (\($0.kind))" }.joined(separator: "\n"))
    }

    /// The checker itself, on a symbol graph with one of each case.
    func testTheCheckerCountsOnlyPublicDeclarationsOfTheModuleAndSeesMissingComments() throws {
        func symbol(
            _ name: String, access: String = "public", file: String? = "/p/Sources/M/A.swift", doc: String? = nil
        ) -> [String: Any] {
            var symbol: [String: Any] = [
                "accessLevel": access, "pathComponents": ["T", name], "kind": ["identifier": "swift.property"]
            ]
            if let file { symbol["location"] = ["uri": "file://" + file, "position": ["line": 9, "character": 4]] }
            if let doc { symbol["docComment"] = ["lines": [["text": doc]]] }
            return symbol
        }
        let graph: [String: Any] = [
            "symbols": [
                symbol("documented", doc: "Says what it is."), symbol("bare"), symbol("blank", doc: "  "),
                symbol("hidden", access: "internal"), symbol("synthesised", file: nil),
                symbol("reexported", file: "/p/Sources/N/B.swift")
            ]
        ]
        let found = try Self.declarations(inSymbolGraph: JSONSerialization.data(withJSONObject: graph), module: "M")
        XCTAssertEqual(found.map(\.name), ["T.documented", "T.bare", "T.blank"])
        XCTAssertEqual(found.map(\.documented), [true, false, false])
        XCTAssertEqual(found[1].location, "Sources/M/A.swift:10")
    }
}
