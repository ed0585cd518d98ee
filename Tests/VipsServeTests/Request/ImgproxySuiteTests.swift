import Foundation
import TestSupport
import VipsCore
import VipsLoad
import VipsSynthesis
import XCTest

@testable import VipsServe

/// imgproxy's own tests as data (Tests/Imgproxy/*.tsv, one file per Go test file), each case
/// run through the real parser or a real `ImageServer` on 127.0.0.1, and checked against its
/// mark in the data: `pass` must pass; `refused` (an option or setting `serve` lacks) must be
/// refused, and fails once it passes, so the marks stay true; `differs: reason` is a
/// deliberate difference (docs/serve-url.md gives it) whose expectations are serve's answer.
///
/// `IMGPROXY_TALLY=1` prints a line per file (ported, passed, failed, refused), `IMGPROXY_TALLY=cases`
/// each case's outcome too;
/// `IMGPROXY_REMARK=1` rewrites the `pass`/`refused` marks from the outcomes (a case that
/// fails is marked `pass`, so it shows as a failure). scripts/imgproxy-tally.sh runs both runners.
/// Beyond the files issue 29 names, clientfeatures/detector_test.go (AUTO_, ENFORCE_, client hints) and
/// handlers/stream/handler_test.go (raw:1 streaming) and options/parser/presets_test.go are ported too.
final class ImgproxySuiteTests: XCTestCase {
    private var root: URL!
    private var servers: [String: ImageServer] = [:]
    private var origins: [TestHTTPServer] = []

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("vipsserve-imgproxy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    override func tearDown() async throws {
        for server in servers.values { await server.shutdown() }
        servers = [:]
        for origin in origins { origin.stop() }
        origins = []
        if let root { try? FileManager.default.removeItem(at: root) }
    }

    func testOptionsParser() async throws {
        try writeHandlerFiles()
        try await run("options-parser", goFile: "options/parser/processing_options_test.go")
    }

    func testHandlersPath() async throws {
        try await run("handlers-path", goFile: "handlers/path_test.go")
    }

    func testSecuritySignature() async throws {
        try await run("security-signature", goFile: "security/signature_test.go")
    }

    func testIntegrationProcessingHandler() async throws {
        try writeHandlerFiles()
        try await run("integration-processing-handler", goFile: "integration_test/processing_handler_test.go")
    }

    func testClientFeaturesDetector() async throws {
        try writeHandlerFiles()
        try ImageSynthesizer.data(width: 1600, height: 1200, seed: 6, format: .jpeg(quality: 85))
            .write(to: file("test-images/jpg/large.jpg"))
        try await run("clientfeatures-detector", goFile: "clientfeatures/detector_test.go")
    }

    func testStreamHandler() async throws {
        try writeHandlerFiles()
        try await run("handlers-stream", goFile: "handlers/stream/handler_test.go")
    }

    func testPresets() async throws {
        try writeHandlerFiles()
        try await run("options-presets", goFile: "options/parser/presets_test.go")
    }

    func testIntegrationMatrix() async throws {
        try writeMatrixFiles()
        try await run("integration-matrix", goFile: "integration_test/matrix_test.go")
    }

    // MARK: - Test files

    /// test1.png (10×10, as imgproxy's), test1.svg, geometry.png (200×100) and a JPEG photo.
    private func writeHandlerFiles() throws {
        try ImageSynthesizer.data(width: 10, height: 10, seed: 3, format: .png()).write(to: file("test1.png"))
        try ImageSynthesizer.data(width: 200, height: 100, seed: 7, format: .png()).write(to: file("geometry.png"))
        try Data(
            #"<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40"><rect width="40" height="20" fill="red"/></svg>"#
                .utf8
        ).write(to: file("test1.svg"))
        try Self.bmpWithBitDepth40().write(to: file("bmp-invalid-bpp.bmp"))
        let jpeg = file("test-images/jpg/jpg.jpg")
        try FileManager.default.createDirectory(
            at: jpeg.deletingLastPathComponent(), withIntermediateDirectories: true)
        try ImageSynthesizer.data(width: 400, height: 300, seed: 5, format: .jpeg(quality: 95)).write(to: jpeg)
    }

    /// An uncompressed (BI_RGB) BMP, 512×1, declaring 40 bits per pixel, with a 2560-byte row:
    /// the file of imgproxy's TestBMPUnsupportedBitDepthRejected, as its comment describes it.
    private static func bmpWithBitDepth40() -> Data {
        func le(_ value: Int, _ count: Int) -> [UInt8] {
            (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
        }
        let row = 512 * 5
        var bytes: [UInt8] = Array("BM".utf8) + le(54 + row, 4) + le(0, 4) + le(54, 4)
        bytes += le(40, 4) + le(512, 4) + le(1, 4) + le(1, 2) + le(40, 2) + le(0, 4) + le(0, 4)
        bytes += le(0, 4) + le(0, 4) + le(0, 4) + le(0, 4)
        bytes += (0..<row).map { UInt8(truncatingIfNeeded: $0) }
        return Data(bytes)
    }

    /// matrix/base.png and a sample of it in each of imgproxy's matrix formats, written by the vips CLI
    /// (the SVG embeds the PNG, so it rasterises to the same pixels).
    private func writeMatrixFiles() throws {
        let base = file("matrix/base.png")
        try FileManager.default.createDirectory(at: base.deletingLastPathComponent(), withIntermediateDirectories: true)
        let png = try ImageSynthesizer.data(width: 64, height: 48, seed: 9, format: .png())
        try png.write(to: base)
        for (folder, ext, arguments) in [
            ("gif", "gif", ["copy"]), ("jpg", "jpg", ["copy"]), ("heif", "heic", ["heifsave"]),
            ("jxl", "jxl", ["copy"]), ("tiff", "tiff", ["copy"]), ("webp", "webp", ["copy"]),
            ("bmp", "bmp", ["magicksave"]), ("ico", "ico", ["magicksave"])
        ] {
            let sample = file("matrix/\(folder)/sample.\(ext)")
            try FileManager.default.createDirectory(
                at: sample.deletingLastPathComponent(), withIntermediateDirectories: true)
            var command = arguments + [base.path, sample.path]
            if arguments == ["magicksave"] { command += ["--format", ext] }
            if arguments == ["heifsave"] { command += ["--compression", "hevc"] }
            try runVips(command)
        }
        let svg = file("matrix/svg/sample.svg")
        try FileManager.default.createDirectory(at: svg.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(
            (#"<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="64" height="48">"#
                + #"<image width="64" height="48" xlink:href="data:image/png;base64,\#(png.base64EncodedString())"/></svg>"#)
                .utf8
        ).write(to: svg)
    }

    private func runVips(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["vips"] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "vips \(arguments) failed"])
        }
    }

    private func file(_ path: String) -> URL { root.appendingPathComponent(path) }

    // MARK: - Cases and marks

    private struct Case {
        let line: Int
        let test: String
        let mark: String
        let config: [(String, String)]
        let input: String
        let expect: [(String, String)]

        var isDifference: Bool { mark.hasPrefix("differs:") }
    }

    private enum Outcome {
        case pass
        case fail(String)
        case refused(String)

        var name: String {
            switch self {
            case .pass: return "pass"
            case .fail: return "fail"
            case .refused: return "refused"
            }
        }
    }

    private static func dataFile(_ name: String) -> URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Imgproxy/\(name).tsv")
    }

    /// `key=value` tokens (split at the first `=`; a `dist<N` token has none), values percent-decoded.
    private static func tokens(_ text: String) -> [(String, String)] {
        guard text != "-" else { return [] }
        return text.split(separator: " ").map { token in
            if !token.contains("="), let index = token.firstIndex(where: { $0 == "<" || $0 == ">" }) {
                return (String(token[...index]), String(token[token.index(after: index)...]))
            }
            let parts = token.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let value = parts.count > 1 ? String(parts[1]) : ""
            return (String(parts[0]), value.removingPercentEncoding ?? value)
        }
    }

    private static func cases(_ name: String) throws -> (lines: [String], cases: [Case]) {
        let lines = try String(contentsOf: dataFile(name), encoding: .utf8).components(separatedBy: "\n")
        var cases: [Case] = []
        for (index, line) in lines.enumerated() where !line.hasPrefix("#") && !line.isEmpty {
            let fields = line.components(separatedBy: "\t")
            guard fields.count == 5 else {
                throw CocoaError(
                    .fileReadCorruptFile, userInfo: [NSLocalizedDescriptionKey: "\(name).tsv:\(index + 1): 5 columns"])
            }
            cases.append(
                Case(
                    line: index, test: fields[0], mark: fields[1], config: tokens(fields[2]), input: fields[3],
                    expect: tokens(fields[4])))
        }
        return (lines, cases)
    }

    private func run(_ name: String, goFile: String) async throws {
        let (lines, cases) = try Self.cases(name)
        var counts: [String: Int] = ["pass": 0, "fail": 0, "refused": 0]
        var differences = 0
        var remarked = lines
        for item in cases {
            let outcome = await evaluate(item)
            counts[outcome.name, default: 0] += 1
            if item.isDifference, case .pass = outcome { differences += 1 }
            if ProcessInfo.processInfo.environment["IMGPROXY_TALLY"] == "cases" {
                switch outcome {
                case .pass: print("imgproxy case: \(name) \(item.test): pass")
                case .fail(let why), .refused(let why):
                    print("imgproxy case: \(name) \(item.test): \(outcome.name): \(why)")
                }
            }
            let label = "\(name).tsv:\(item.line + 1) \(item.test)"
            switch (item.mark, outcome) {
            case (_, .pass) where item.mark == "pass" || item.isDifference: break
            case ("refused", .refused): break
            case ("refused", .pass):
                XCTFail("\(label): marked refused, but it passes now: mark it pass (IMGPROXY_REMARK=1)")
            case (_, .refused(let why)):
                XCTFail("\(label): refused (\(why)), but marked \(item.mark)")
            case (_, .fail(let why)):
                XCTFail("\(label): FAILS: \(why)")
            default:
                XCTFail("\(label): unknown mark \(item.mark)")
            }
            if !item.isDifference {
                var fields = lines[item.line].components(separatedBy: "\t")
                if case .refused = outcome { fields[1] = "refused" } else { fields[1] = "pass" }
                remarked[item.line] = fields.joined(separator: "\t")
            }
        }
        let environment = ProcessInfo.processInfo.environment
        if environment["IMGPROXY_TALLY"] != nil {
            print(
                "imgproxy tally: \(goFile)\t\(cases.count) ported\t\(counts["pass"] ?? 0) passed"
                    + "\t\(counts["fail"] ?? 0) failed\t\(counts["refused"] ?? 0) refused"
                    + "\t(\(differences) deliberate differences among the passed)")
        }
        if environment["IMGPROXY_REMARK"] == "1", remarked != lines {
            try remarked.joined(separator: "\n").write(to: Self.dataFile(name), atomically: true, encoding: .utf8)
        }
    }

    // MARK: - Running a case

    private func evaluate(_ item: Case) async -> Outcome {
        let parts = item.input.split(separator: " ", maxSplits: 1).map(String.init)
        do {
            switch parts.first {
            case "GET": return try await serve(item, target: parts.count > 1 ? parts[1] : "")
            case "redenormalize": return redenormalize(item, path: parts.count > 1 ? parts[1] : "")
            case "resolve": return try parse(item, target: parts.count > 1 ? parts[1] : "", resolving: true)
            case "start": return start(item)
            default: return try parse(item, target: item.input, resolving: false)
            }
        } catch {
            return .fail("the runner could not run the case: \(error)")
        }
    }

    /// Settings this runner cannot give `serve`, and the keys and the patterns it can.
    private struct Settings {
        var keys: [URLSigningKey] = []
        var patterns: [SourcePattern] = []
        var loopback = true
        var maxSourceBytes: Int?
        /// The server's encoding settings (IMGPROXY_QUALITY, AUTO_/ENFORCE_, client hints and the rest).
        var output = ImageServer.OutputSettings()
        var maxAge: Int?
        var usesLastModified = true
        var forwardsEntityTagConditions = true
        var pathPrefix = ""
        var presets: [String] = []
        var onlyPresets = false
        var allowedOptions: Set<String>?
        var allowsSecurityOptions = false
        /// A setting serve refuses to start with (its message), as `vipsload serve` would.
        var startError: String?
        /// Settings with no counterpart in serve.
        var unsupported: [String] = []
        var origin: [(String, String)] = []
        var headers: [String: String] = [:]
        /// What makes a server (its cache key).
        var serverKey = ""
    }

    /// Settings serve has as its fixed behaviour (so they need no mapping).
    private static let builtInSettings: Set<String> = [
        "IMGPROXY_USE_ETAG=true", "IMGPROXY_CACHE_CONTROL_PASSTHROUGH=false"
    ]

    /// imgproxy's booleans as Go's `strconv.ParseBool` reads them (as serve's settings do).
    private static func bool(_ text: String) -> Bool { ["1", "t", "T", "TRUE", "true", "True"].contains(text) }

    private func settings(_ item: Case) throws -> Settings {
        var settings = Settings()
        var keys: [String] = [], salts: [String] = [], size = 32
        for (name, value) in item.config {
            if name.hasPrefix("origin.") {
                settings.origin.append((name, value))
                continue
            }
            if name.hasPrefix("req:") {
                settings.headers[String(name.dropFirst(4))] = value
                continue
            }
            if Self.builtInSettings.contains("\(name)=\(value)") { continue }
            switch name {
            case "IMGPROXY_KEY": keys = value.components(separatedBy: ",")
            case "IMGPROXY_SALT": salts = value.components(separatedBy: ",")
            case "IMGPROXY_SIGNATURE_SIZE": size = Int(value) ?? 0
            case "IMGPROXY_ALLOWED_SOURCES":
                for source in value.components(separatedBy: ",") where source != "local://" {
                    var host = source
                    if host.hasSuffix("/") { host.removeLast() }
                    settings.patterns.append(try SourcePattern(host))
                }
            case "IMGPROXY_ALLOW_LOOPBACK_SOURCE_ADDRESSES": settings.loopback = value == "true"
            case "IMGPROXY_MAX_SRC_FILE_SIZE": settings.maxSourceBytes = Int(value)
            // As Sources/vipsload/Serve/ServeSettings+Imgproxy.swift maps them.
            case "IMGPROXY_TTL": settings.maxAge = Int(value)
            case "IMGPROXY_USE_ETAG": settings.forwardsEntityTagConditions = Self.bool(value)
            case "IMGPROXY_USE_LAST_MODIFIED": settings.usesLastModified = Self.bool(value)
            case "IMGPROXY_PATH_PREFIX": settings.pathPrefix = value.hasSuffix("/") ? String(value.dropLast()) : value
            case "IMGPROXY_PRESETS":
                settings.presets = value.components(separatedBy: ",").filter {
                    !$0.trimmingCharacters(in: .whitespaces).isEmpty
                }
            case "IMGPROXY_ONLY_PRESETS": settings.onlyPresets = Self.bool(value)
            case "IMGPROXY_ALLOWED_PROCESSING_OPTIONS":
                settings.allowedOptions = Set(
                    value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
            case "IMGPROXY_ALLOW_SECURITY_OPTIONS": settings.allowsSecurityOptions = Self.bool(value)
            case "IMGPROXY_QUALITY": settings.output.quality = Int(value) ?? settings.output.quality
            case "IMGPROXY_AUTO_WEBP": settings.output.autoWebP = Self.bool(value)
            case "IMGPROXY_ENFORCE_WEBP": settings.output.enforceWebP = Self.bool(value)
            case "IMGPROXY_AUTO_AVIF": settings.output.autoAVIF = Self.bool(value)
            case "IMGPROXY_ENFORCE_AVIF": settings.output.enforceAVIF = Self.bool(value)
            case "IMGPROXY_AUTO_JXL": settings.output.autoJXL = Self.bool(value)
            case "IMGPROXY_ENFORCE_JXL": settings.output.enforceJXL = Self.bool(value)
            case "IMGPROXY_ENABLE_CLIENT_HINTS": settings.output.enableClientHints = Self.bool(value)
            case "IMGPROXY_STRIP_COLOR_PROFILE": settings.output.stripColorProfile = Self.bool(value)
            case "IMGPROXY_KEEP_COPYRIGHT": settings.output.keepCopyright = Self.bool(value)
            case "IMGPROXY_ARGUMENTS_SEPARATOR" where value != ":":
                settings.startError = "IMGPROXY_ARGUMENTS_SEPARATOR: serve's separator is ':', not '\(value)'"
            default:
                settings.unsupported.append("\(name)=\(value)")
                continue
            }
            settings.serverKey += "\(name)=\(value) "
        }
        settings.keys = try zip(keys, salts).map { try URLSigningKey(hexKey: $0, hexSalt: $1, signatureSize: size) }
        return settings
    }

    private func parser(_ settings: Settings) throws -> ProcessingURLParser {
        if let why = settings.startError {
            throw CocoaError(.featureUnsupported, userInfo: [NSLocalizedDescriptionKey: why])
        }
        var parser = ProcessingURLParser(
            signingKeys: settings.keys,
            sources: try SourcePolicy(localRoot: root.path, allowedSources: settings.patterns))
        parser.pathPrefix = settings.pathPrefix
        parser.onlyPresets = settings.onlyPresets
        parser.allowedOptions = settings.allowedOptions
        parser.allowsSecurityOptions = settings.allowsSecurityOptions
        parser.presets = try ProcessingPresets(definitions: settings.presets)
        try parser.presets.validated(allowsSecurityOptions: settings.allowsSecurityOptions)
        if let bytes = settings.maxSourceBytes { parser.security.maxSourceFileSize = bytes }
        return parser
    }

    /// The answer when expectations fail: refused when serve lacks a setting the case needs, else a failure.
    private func failed(_ failures: [String], _ settings: Settings, answer: String) -> Outcome {
        if !settings.unsupported.isEmpty {
            return .refused("serve has no setting \(settings.unsupported.joined(separator: ", "))")
        }
        return .fail("\(failures.joined(separator: "; ")) — serve answered \(answer)")
    }

    private func parse(_ item: Case, target: String, resolving: Bool) throws -> Outcome {
        let settings = try settings(item)
        if let why = settings.startError { return .refused("serve does not start: \(why)") }
        var parser = try parser(settings)
        var target = target
        var failures: [String] = []
        if let signed = item.expect.first(where: { $0.0 == "signs" })?.1 {
            // A signature over exactly `signed` must verify.
            let key = try URLSigningKey(hexKey: "6b6579", hexSalt: "73616c74")
            parser.signingKeys = [key]
            var segments = target.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            if segments.count == 2, segments[0].isEmpty {
                let rest = segments[1].split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
                segments = [""] + [Substring(key.signature(forPath: "/" + signed))] + rest.dropFirst()
                target = segments.joined(separator: "/")
            }
        }
        let url: ProcessingURL
        do throws(ProcessingURLError) {
            url = try resolving ? parser.parse(target).url : parser.parseURL(target)
        } catch {
            let lacking = error.reason == .unsupportedOption || error.reason == .unsupportedFormat
            for (key, value) in item.expect {
                switch key {
                case "error" where !lacking: break
                case "status" where Int(value) == error.status: break
                case "rejected" where error.reason == .badSignature: break
                case "verified" where error.reason != .badSignature: break
                // Re-signed: the signature must verify, unless a status is what is expected.
                case "signs" where error.reason != .badSignature || item.expect.contains { $0.0 == "status" }: break
                default: failures.append("expected \(key)\(value.isEmpty ? "" : "=" + value)")
                }
            }
            if failures.isEmpty { return .pass }
            if lacking { return .refused("\(error)") }
            return failed(failures, settings, answer: "\(error)")
        }
        let fields = Self.fields(url)
        for (key, value) in item.expect {
            switch key {
            case "ok", "verified", "signs": break
            case "error", "status", "rejected": failures.append("expected \(key)\(value.isEmpty ? "" : "=" + value)")
            default:
                guard let actual = fields[key] else {
                    failures.append("\(key): no such field in serve's options (the runner cannot check it)")
                    continue
                }
                if actual != value { failures.append("\(key)=\(actual), expected \(value)") }
            }
        }
        return failures.isEmpty
            ? .pass : failed(failures, settings, answer: "/" + url.options.canonicalSegments.joined(separator: "/"))
    }

    /// imgproxy's fields as serve's `ProcessingOptions` hold them (numbers without a `.0`).
    private static func fields(_ url: ProcessingURL) -> [String: String] {
        let options = url.options
        func number(_ value: Double) -> String {
            value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : "\(value)"
        }
        func gravity(_ value: ProcessingOptions.Gravity) -> String {
            value.kind == .smart ? "sm" : "\(value.kind.rawValue):\(number(value.x)):\(number(value.y))"
        }
        let padding = options.padding
        return [
            "source": url.source, "rt": options.resizingType.rawValue, "w": "\(options.width)",
            "h": "\(options.height)", "el": options.enlarge ? "1" : "0", "ex": options.extend ? "1" : "0",
            "exg": gravity(options.extendGravity), "g": gravity(options.gravity),
            "c": "\(number(options.cropWidth)):\(number(options.cropHeight))",
            "cg": options.cropGravity.map(gravity) ?? "none",
            "pd": "\(padding.top):\(padding.right):\(padding.bottom):\(padding.left)",
            "bg": options.background.map { colour in
                [colour.red, colour.green, colour.blue].map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
            } ?? "none",
            "q": "\(options.quality)", "f": options.format?.rawValue ?? "none", "bl": number(options.blur),
            "sh": number(options.sharpen), "rot": "\(options.rotate)", "sm": options.stripMetadata ? "1" : "0",
            "dpr": number(options.dpr), "cb": options.cacheBuster ?? "none",
            "wm": options.watermark.opacity == 0
                ? "none"
                : [
                    number(options.watermark.opacity), options.watermark.position.rawValue,
                    number(options.watermark.x), number(options.watermark.y), number(options.watermark.scale)
                ].joined(separator: ":"),
            "skp": options.skipProcessing.map(ProcessingOptions.skipProcessingName).sorted().joined(separator: ","),
            "exp": options.expires.map { "\($0)" } ?? "none", "fn": options.filename ?? "none",
            "att": options.returnAttachment ? "1" : "0", "raw": options.raw ? "1" : "0",
            "fq": options.formatQuality.map { "\($0.key.rawValue)=\($0.value)" }.sorted().joined(separator: ","),
            "mb": "\(options.maxBytes)", "scp": options.stripColorProfile.map { $0 ? "1" : "0" } ?? "none",
            "kcr": options.keepCopyright.map { $0 ? "1" : "0" } ?? "none",
            "ph": options.preserveHDR.map { $0 ? "1" : "0" } ?? "none", "mw": "\(options.minWidth)",
            "mh": "\(options.minHeight)", "z": "\(number(options.zoomWidth)):\(number(options.zoomHeight))",
            "exar": options.extendAspectRatio ? "1" : "0",
            "t": options.trimThreshold.map(number) ?? "none",
            "fl": "\(options.flipHorizontal ? "1" : "0"):\(options.flipVertical ? "1" : "0")",
            "pix": "\(options.pixelate)", "ar": options.autoRotate ? "1" : "0",
            "presets": url.usedPresets.joined(separator: ","),
            "msr": options.security.maxSourceResolution.map(number) ?? "none",
            "msfs": options.security.maxSourceFileSize.map { "\($0)" } ?? "none",
            "maf": options.security.maxAnimationFrames.map { "\($0)" } ?? "none",
            "mafr": options.security.maxAnimationFrameResolution.map(number) ?? "none"
        ]
    }

    /// Whether a server starts with the case's settings (`starts`) or refuses them (`start-error`).
    private func start(_ item: Case) -> Outcome {
        let expectsError = item.expect.contains { $0.0 == "start-error" }
        let started: Bool
        do {
            let settings = try settings(item)
            guard settings.unsupported.isEmpty else {
                return .refused("serve has no setting \(settings.unsupported.joined(separator: ", "))")
            }
            _ = try server(settings)
            started = true
        } catch {
            started = false
        }
        if started != expectsError { return .pass }
        return .fail(started ? "the server started" : "the server did not start")
    }

    private func redenormalize(_ item: Case, path: String) -> Outcome {
        var bytes = Array((path == "<empty>" ? "" : path).utf8)[...]
        if bytes.first == UInt8(ascii: "/") { bytes = bytes.dropFirst() }
        let result = ProcessingURLParser.text(ProcessingURLParser.undoingProxyNormalisation(bytes)[...])
        let expected = item.expect.first { $0.0 == "path" }?.1 ?? ""
        return result == expected ? .pass : .fail("\(result), expected \(expected)")
    }

    // MARK: - Through a server

    private func server(_ settings: Settings) throws -> ImageServer {
        if let server = servers[settings.serverKey] { return server }
        var pipeline = ImagePipeline.Configuration(decodeConcurrency: 2)
        pipeline.http.addressPolicy = settings.loopback ? .unrestricted : .publicOnly
        var configuration = ImageServer.Configuration()
        configuration.port = 0
        configuration.output = settings.output
        configuration.maxAge = settings.maxAge
        configuration.usesLastModified = settings.usesLastModified
        configuration.forwardsEntityTagConditions = settings.forwardsEntityTagConditions
        var sources = settings
        // imgproxy admits every source unless told otherwise: here the root and the origins on 127.0.0.1.
        if sources.patterns.isEmpty { sources.patterns = [try SourcePattern("127.0.0.1:*")] }
        configuration.urls = try parser(sources)
        let server = try ImageServer(pipeline: ImagePipeline(configuration: pipeline), configuration: configuration)
        servers[settings.serverKey] = server
        return server
    }

    private static func httpDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }

    /// `{origin}`, `{now+N}` (an HTTP date), `{unix+N}` (a Unix time), `{half:F}` and `{size:F}` filled in.
    private func substitute(_ text: String, origin: TestHTTPServer?) throws -> String {
        var result = text
        if let origin { result = result.replacingOccurrences(of: "{origin}", with: "http://127.0.0.1:\(origin.port)") }
        while let start = result.range(of: "{"),
            let end = result.range(of: "}", range: start.upperBound..<result.endIndex)
        {
            let name = String(result[start.upperBound..<end.lowerBound])
            let value: String
            if name.hasPrefix("now+"), let seconds = Double(name.dropFirst(4)) {
                value = Self.httpDate(Date().addingTimeInterval(seconds))
            } else if name.hasPrefix("half:") {
                value = "\(try Data(contentsOf: file(String(name.dropFirst(5)))).count / 2)"
            } else if name.hasPrefix("size:") {
                value = "\(try Data(contentsOf: file(String(name.dropFirst(5)))).count)"
            } else if name.hasPrefix("unix+"), let seconds = Double(name.dropFirst(5)) {
                value = "\(Int(Date().timeIntervalSince1970 + seconds))"
            } else {
                break
            }
            result.replaceSubrange(start.lowerBound..<end.upperBound, with: value)
        }
        return result
    }

    private func makeOrigin(_ settings: Settings) throws -> TestHTTPServer? {
        guard !settings.origin.isEmpty else { return nil }
        var response = TestHTTPServer.Response()
        for (name, value) in settings.origin {
            if name == "origin.body" {
                response.body = .data(try Data(contentsOf: file(value)))
                response.headers.append(("Content-Type", "image/png"))
            } else if name == "origin.status" {
                response.status = Int(value) ?? 500
            } else if name == "origin.path" {
                continue
            } else if name.hasPrefix("origin.header:") {
                response.headers.append(
                    (String(name.dropFirst("origin.header:".count)), try substitute(value, origin: nil)))
            }
        }
        let origin = try TestHTTPServer()
        origins.append(origin)
        origin.route("/", response)
        origin.route("/test1.png", response)
        for (name, path) in settings.origin where name == "origin.path" { origin.route(path, response) }
        return origin
    }

    private func serve(_ item: Case, target: String) async throws -> Outcome {
        let settings = try settings(item)
        if let why = settings.startError { return .refused("serve does not start: \(why)") }
        let server = try server(settings)
        let origin = try makeOrigin(settings)
        let target = try substitute(target, origin: origin)
        let response = try TestConnection(port: server.port).request(target, headers: settings.headers)
        var failures: [String] = []
        for (key, rawValue) in item.expect {
            let value = try substitute(rawValue, origin: origin)
            switch key {
            case "status":
                if "\(response.status)" != value { failures.append("status \(response.status), expected \(value)") }
            case "ctype":
                if response.header("Content-Type") != value {
                    failures.append("Content-Type \(response.header("Content-Type") ?? "none"), expected \(value)")
                }
            case _ where key.hasPrefix("header:"):
                let actual = response.header(String(key.dropFirst(7))) ?? ""
                // Vary lists field names, which are case-insensitive (RFC 9110 §5.1).
                let same = key == "header:Vary" ? actual.lowercased() == value.lowercased() : actual == value
                if !same { failures.append("\(key.dropFirst(7)): \(actual), expected \(value)") }
            case _ where key.hasPrefix("header!:"):
                let actual = response.header(String(key.dropFirst(8))) ?? ""
                if actual == value { failures.append("\(key.dropFirst(8)): \(actual), expected another value") }
            case _ where key.hasPrefix("header~:"):
                let actual = response.header(String(key.dropFirst(8))) ?? ""
                if (try? Regex(value).wholeMatch(in: actual)) == nil {
                    failures.append("\(key.dropFirst(8)): \(actual), expected /\(value)/")
                }
            case _ where key.hasPrefix("origin-got:") || key.hasPrefix("origin-got!:"):
                let name = String(key.drop { $0 != ":" }.dropFirst())
                // The request to whichever path the origin was asked for (one per case).
                let paths = ["/", "/test1.png"] + settings.origin.filter { $0.0 == "origin.path" }.map(\.1)
                let got = paths.compactMap { origin?.requests($0).last }.last?.header(name) ?? ""
                if key.hasPrefix("origin-got!:") ? got.isEmpty : got != value {
                    failures.append("the origin got \(name): \(got.isEmpty ? "none" : got)")
                }
            case "body", "body!":
                let same = (try? Data(contentsOf: file(value))) == response.body
                if same != (key == "body") {
                    failures.append(same ? "the body is \(value)'s" : "the body is not \(value)'s")
                }
            case "max-age", "max-age~":
                // The Cache-Control field's max-age, exactly or within a minute (a time that passes).
                let field = response.header("Cache-Control") ?? ""
                let age = field.firstMatch(of: /max-age=(\d+)/).flatMap { Int($0.1) }
                let expected = Int(value) ?? -1
                if age.map({ key == "max-age" ? $0 != expected : abs($0 - expected) > 60 }) ?? true {
                    failures.append(
                        "Cache-Control: \(field), expected max-age \(key == "max-age" ? "" : "about ")\(value)")
                }
            case "maxbytes":
                if response.body.count > Int(value) ?? 0 {
                    failures.append("\(response.body.count) bytes, over \(value)")
                }
            case "same-as":
                let other = try TestConnection(port: server.port).request(value, headers: settings.headers)
                if other.body != response.body || other.status != 200 { failures.append("not the bytes of \(value)") }
            case "size", "like", "dist<", "dist>":
                if let failure = compare(key, value, response.body, target: target) { failures.append(failure) }
            default:
                failures.append("the runner has no check \(key)")
            }
        }
        if failures.isEmpty { return .pass }
        let text = String(decoding: response.body.prefix(200), as: UTF8.self)
        let refusal = (400..<500).contains(response.status) && text.contains("not supported")
        let expectedStatus = item.expect.first { $0.0 == "status" }?.1
        if refusal, expectedStatus != "\(response.status)" { return .refused("\(response.status) \(text)") }
        let answer = "\(response.status)" + (response.status >= 300 ? " \(text)" : "")
        return failed(failures, settings, answer: answer)
    }

    /// Size, likeness and distance checks of an image body.
    private func compare(_ key: String, _ value: String, _ body: Data, target: String) -> String? {
        guard let image = (try? ImageDecoder().decode(.data(body))) ?? (try? readBack(body)) ?? nil else {
            return "the body is not an image serve reads"
        }
        switch key {
        case "size":
            return "\(image.width)x\(image.height)" == value ? nil : "\(image.width)x\(image.height), expected \(value)"
        case "like":
            guard let reference = try? ImageDecoder().decode(.file(file(value).path)) else { return "no \(value)" }
            guard image.width == reference.width, image.height == reference.height else {
                return "\(image.width)x\(image.height), expected \(reference.width)x\(reference.height)"
            }
            // As a DCT hash does, the low frequencies: the means of 8×8 blocks.
            let distance = difference(blockMeans(image), blockMeans(reference))
            return distance <= 6 ? nil : "a mean difference of \(distance) from \(value) in 8x8 block means"
        default:
            let source = target.components(separatedBy: "local:///").last?.components(separatedBy: "@").first ?? ""
            guard let reference = try? ImageDecoder().decode(.file(file(source).path)),
                reference.width == image.width, reference.height == image.height, let limit = Double(value)
            else { return "no source of the same size to compare with" }
            let distance = difference(image, reference)
            let holds = key == "dist<" ? distance < limit : distance > limit
            return holds ? nil : "a mean difference of \(distance) from the source, expected \(key.last!)\(value)"
        }
    }

    /// A JPEG XL body (VipsCore keeps libjxl's loader blocked in-process), read through the vips CLI as a PNG.
    private func readBack(_ body: Data) throws -> Bitmap? {
        let isJXL = body.starts(with: [0xFF, 0x0A]) || body.starts(with: [0, 0, 0, 0x0C, 0x4A, 0x58, 0x4C, 0x20])
        guard isJXL else { return nil }
        let name = UUID().uuidString
        try body.write(to: file("\(name).jxl"))
        try runVips(["copy", file("\(name).jxl").path, file("\(name).png").path])
        return try ImageDecoder().decode(.file(file("\(name).png").path))
    }

    /// The mean of each colour channel over each 8×8 block (the last row and column of blocks may be smaller).
    private func blockMeans(_ bitmap: Bitmap) -> [[Double]] {
        var blocks: [[Double]] = []
        for top in stride(from: 0, to: bitmap.height, by: 8) {
            for left in stride(from: 0, to: bitmap.width, by: 8) {
                var sums = [0.0, 0.0, 0.0], count = 0.0
                for y in top..<min(top + 8, bitmap.height) {
                    for x in left..<min(left + 8, bitmap.width) {
                        guard let pixel = bitmap.pixel(x: x, y: y) else { continue }
                        for channel in 0..<3 { sums[channel] += Double(pixel[min(channel, pixel.count - 1)]) }
                        count += 1
                    }
                }
                blocks.append(sums.map { $0 / max(1, count) })
            }
        }
        return blocks
    }

    private func difference(_ a: [[Double]], _ b: [[Double]]) -> Double {
        zip(a, b).reduce(0) { total, pair in total + zip(pair.0, pair.1).reduce(0) { $0 + abs($1.0 - $1.1) } }
            / Double(max(1, a.count * 3))
    }

    /// The mean absolute difference per colour channel between two bitmaps of one size.
    private func difference(_ a: Bitmap, _ b: Bitmap) -> Double {
        var total = 0
        for y in 0..<a.height {
            for x in 0..<a.width {
                guard let p = a.pixel(x: x, y: y), let q = b.pixel(x: x, y: y) else { continue }
                for channel in 0..<min(3, p.count, q.count) { total += abs(Int(p[channel]) - Int(q[channel])) }
            }
        }
        return Double(total) / Double(max(1, a.width * a.height * 3))
    }
}
