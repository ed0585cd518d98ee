import Foundation
import TestSupport
import VipsCore
import VipsLoad
import VipsSynthesis
import XCTest

@testable import VipsServe

/// What a result is encoded as, end to end on a real server on 127.0.0.1:
/// every format imgproxy writes, the source's format kept (imgproxy's
/// preferred formats), `Accept` preferences only when configured, qualities
/// (`quality`, `format_quality`, the server's defaults), `max_bytes`, grey
/// kept grey, the colour profile, and client hints with `Vary`.
final class OutputFormatServingTests: XCTestCase {
    private var root: URL!
    private var servers: [ImageServer] = []

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("vipsserve-output-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let files: [(String, Data)] = [
            ("photo.jpg", try ImageSynthesizer.data(width: 800, height: 600, seed: 1, format: .jpeg(quality: 90))),
            ("alpha.png", try ImageSynthesizer.data(width: 300, height: 200, seed: 2, alpha: true, format: .png())),
            ("opaque.png", try ImageSynthesizer.data(width: 300, height: 200, seed: 3, format: .png())),
            ("photo.webp", try ImageSynthesizer.data(width: 300, height: 200, seed: 4, format: .webp())),
            ("alpha.webp", try ImageSynthesizer.data(width: 300, height: 200, seed: 5, alpha: true, format: .webp())),
            ("still.gif", try ImageSynthesizer.data(width: 120, height: 80, seed: 6, format: .gif)),
            ("scan.tif", try ImageSynthesizer.data(width: 300, height: 200, seed: 7, format: .tiff)),
            ("grey.png", try ImageSynthesizer.data(width: 300, height: 200, seed: 8, format: .png(grey: true))),
            (
                "greyalpha.png",
                try ImageSynthesizer.data(
                    width: 300, height: 200, seed: 9, alpha: true, format: .png(grey: true))
            ),
            ("p3.jpg", try ImageSynthesizer.data(width: 300, height: 200, seed: 10, iccProfile: "p3", format: .jpeg()))
        ]
        for (name, data) in files { try data.write(to: root.appendingPathComponent(name)) }
    }

    override func tearDown() async throws {
        for server in servers { await server.shutdown() }
        servers = []
        if let root { try? FileManager.default.removeItem(at: root) }
    }

    private func makeServer(_ configure: (inout ImageServer.Configuration) -> Void = { _ in }) throws -> ImageServer {
        var configuration = ImageServer.Configuration()
        configuration.port = 0
        configuration.urls = ProcessingURLParser(sources: try SourcePolicy(localRoot: root.path, allowedSources: []))
        configure(&configuration)
        let pipeline = ImagePipeline(configuration: ImagePipeline.Configuration(decodeConcurrency: 1))
        let server = try ImageServer(pipeline: pipeline, configuration: configuration)
        servers.append(server)
        return server
    }

    private func get(
        _ server: ImageServer, _ target: String, headers: [String: String] = [:]
    ) throws -> TestConnection.Response {
        try TestConnection(port: server.port).request(target, method: "GET", headers: headers)
    }

    /// The response's body format, checked against its `Content-Type`.
    private func format(
        _ response: TestConnection.Response, file: StaticString = #filePath, line: UInt = #line
    ) -> ImageFormat? {
        let sniffed = ImageFormat.sniff(response.body.prefix(64))
        XCTAssertEqual(
            response.header("Content-Type"), sniffed.map(RenderJob.contentType), "the type names the bytes",
            file: file, line: line)
        return sniffed
    }

    private func decoded(_ response: TestConnection.Response) throws -> Bitmap {
        try ImageDecoder(options: DecodeOptions(allowedFormats: ImageFormat.defaultAllowed.union([.jxl])))
            .decode(.data(response.body))
    }

    // MARK: - Formats

    func testEveryFormatImgproxyWritesIsServed() throws {
        // The JPEG XL loader is untrusted (blocked): reading the answers back needs it.
        try VipsRuntime.setUntrustedLoadersAllowed(true)
        defer { try? VipsRuntime.setUntrustedLoadersAllowed(false) }
        let server = try makeServer()
        let cases: [(String, ImageFormat, String)] = [
            ("jpg", .jpeg, "image/jpeg"), ("png", .png, "image/png"), ("webp", .webp, "image/webp"),
            ("avif", .avif, "image/avif"), ("gif", .gif, "image/gif"), ("jxl", .jxl, "image/jxl"),
            ("heic", .heif, "image/heif"), ("tiff", .tiff, "image/tiff"), ("bmp", .bmp, "image/bmp"),
            ("ico", .ico, "image/x-icon")
        ]
        var tags: Set<String> = []
        for (name, expected, type) in cases {
            for target in [
                "/insecure/rs:fit:64:64/plain/local:///photo.jpg@\(name)",
                "/insecure/rs:fit:64:64/f:\(name)/plain/local:///photo.jpg"
            ] {
                let response = try get(server, target)
                XCTAssertEqual(response.status, 200, "\(target): \(response.text)")
                XCTAssertEqual(response.header("Content-Type"), type, target)
                XCTAssertEqual(format(response), expected, target)
                let bitmap = try decoded(response)
                XCTAssertEqual([bitmap.width, bitmap.height], [64, 48], target)
                XCTAssertNil(response.header("Vary"), "\(target): nothing but the URL decides")
                tags.insert(response.header("ETag") ?? "")
            }
        }
        XCTAssertEqual(tags.count, cases.count, "one tag per format; the spellings share it")
        // An ICO holds 256×256 at most; SVG and imgproxy Pro's `best` are refused.
        XCTAssertEqual(try get(server, "/insecure/rs:fit:300:300/plain/local:///photo.jpg@ico").status, 422)
        XCTAssertEqual(try get(server, "/insecure/rs:fit:64:64/plain/local:///photo.jpg@svg").status, 422)
        XCTAssertEqual(try get(server, "/insecure/rs:fit:64:64/plain/local:///photo.jpg@best").status, 422)
    }

    func testWithoutAFormatTheSourcesFormatIsKeptWhenPreferred() throws {
        let server = try makeServer()
        let cases: [(String, ImageFormat)] = [
            ("photo.jpg", .jpeg), ("alpha.png", .png), ("opaque.png", .png), ("still.gif", .gif),
            // Not preferred by default (imgproxy's jpeg, png, gif): the first that holds the result.
            ("photo.webp", .jpeg), ("alpha.webp", .png), ("scan.tif", .jpeg)
        ]
        for (file, expected) in cases {
            let response = try get(
                server, "/insecure/rs:fit:64:64/plain/local:///\(file)", headers: ["Accept": "image/webp,image/avif"])
            XCTAssertEqual(response.status, 200, "\(file): \(response.text)")
            XCTAssertEqual(format(response), expected, file)
            XCTAssertNil(response.header("Vary"), "\(file): Accept is read only when configured")
        }
        // Transparency added by padding cannot go to JPEG: a WebP source falls to PNG.
        let padded = try get(server, "/insecure/rs:fit:64:64/pd:4/plain/local:///photo.webp")
        XCTAssertEqual(format(padded), .png)
        // A preferred list of its own keeps WebP and TIFF.
        let keeping = try makeServer { $0.output.preferredFormats = [.webp, .tiff, .png] }
        XCTAssertEqual(format(try get(keeping, "/insecure/rs:fit:64:64/plain/local:///photo.webp")), .webp)
        XCTAssertEqual(format(try get(keeping, "/insecure/rs:fit:64:64/plain/local:///scan.tif")), .tiff)
        XCTAssertEqual(format(try get(keeping, "/insecure/rs:fit:64:64/plain/local:///photo.jpg")), .webp)
        XCTAssertNotEqual(
            try get(keeping, "/insecure/rs:fit:64:64/plain/local:///photo.jpg").header("ETag"),
            try get(server, "/insecure/rs:fit:64:64/plain/local:///photo.jpg").header("ETag"),
            "the preferred formats are part of the key")
    }

    // MARK: - Accept

    func testAcceptPreferencesAndEnforcementWithVary() throws {
        let photo = "/insecure/rs:fit:64:64/plain/local:///photo.jpg"
        let auto = try makeServer {
            $0.output.autoWebP = true
            $0.output.autoAVIF = true
            $0.output.autoJXL = true
        }
        let cases: [(String, String?, ImageFormat, String?)] = [
            (photo, "image/jxl,image/avif,image/webp", .jxl, "Accept"),
            (photo, "image/avif,image/webp", .avif, "Accept"), (photo, "image/webp", .webp, "Accept"),
            (photo, "image/jxl;q=0,image/webp", .webp, "Accept"), (photo, "*/*", .jpeg, "Accept"),
            (photo, nil, .jpeg, "Accept"),
            // The URL's format wins over a preference, and then Accept changes nothing.
            (photo + "@png", "image/avif,image/webp", .png, nil)
        ]
        try VipsRuntime.setUntrustedLoadersAllowed(true)
        defer { try? VipsRuntime.setUntrustedLoadersAllowed(false) }
        for (target, accept, expected, vary) in cases {
            let response = try get(auto, target, headers: accept.map { ["Accept": $0] } ?? [:])
            XCTAssertEqual(response.status, 200, target)
            XCTAssertEqual(format(response), expected, "\(target) Accept: \(accept ?? "none")")
            XCTAssertEqual(response.header("Vary"), vary, target)
        }
        let enforcing = try makeServer { $0.output.enforceWebP = true }
        let enforced = try get(enforcing, photo + "@png", headers: ["Accept": "image/webp"])
        XCTAssertEqual(format(enforced), .webp, "enforced over the URL's format")
        XCTAssertEqual(enforced.header("Vary"), "Accept")
        let notAccepted = try get(enforcing, photo + "@png", headers: ["Accept": "image/avif"])
        XCTAssertEqual(format(notAccepted), .png)
        XCTAssertEqual(notAccepted.header("Vary"), "Accept")
        XCTAssertNotEqual(enforced.header("ETag"), notAccepted.header("ETag"))
    }

    // MARK: - Quality

    func testQualityComesFromTheURLThenFormatQualityThenTheServer() throws {
        let server = try makeServer()
        let base = "/insecure/rs:fit:200:200/%@/plain/local:///photo.jpg@jpg"
        func body(_ server: ImageServer, _ options: String) throws -> Data {
            let response = try get(server, String(format: base, options))
            XCTAssertEqual(response.status, 200, response.text)
            return response.body
        }
        let encoder = ImageEncoder()
        let pixels = try decoded(try get(server, "/insecure/rs:fit:200:200/plain/local:///photo.jpg@png"))
        func jpeg(_ quality: Int) throws -> Data { try encoder.encode(pixels, as: .jpeg(quality: quality)).data }
        XCTAssertEqual(try body(server, "cb:1"), try jpeg(80), "imgproxy's default quality: 80")
        XCTAssertEqual(try body(server, "q:35"), try jpeg(35))
        XCTAssertEqual(try body(server, "fq:jpg:30:webp:90"), try jpeg(30))
        XCTAssertEqual(try body(server, "fq:jpeg:30/q:45"), try jpeg(45), "quality wins over format_quality")
        XCTAssertEqual(try body(server, "fq:webp:30"), try jpeg(80), "another format's quality")
        let configured = try makeServer {
            $0.output.quality = 60
            $0.output.formatQuality[.jpeg] = 40
        }
        XCTAssertEqual(try body(configured, "cb:1"), try jpeg(40))
        XCTAssertEqual(try body(configured, "fq:jpg:25"), try jpeg(25))
        XCTAssertNotEqual(
            try get(configured, String(format: base, "cb:1")).header("ETag"),
            try get(server, String(format: base, "cb:1")).header("ETag"), "the server's qualities are in the key")
        // Refused: an odd argument count, an unknown format, a quality out of range.
        for options in ["fq:jpg", "fq:foo:10", "fq:jpg:101", "mb:-1"] {
            XCTAssertEqual(try get(server, String(format: base, options)).status, 404, options)
        }
    }

    func testMaxBytesLowersTheQualityUntilTheResultFits() throws {
        let server = try makeServer()
        let full = try get(server, "/insecure/rs:fit:400:400/plain/local:///photo.jpg@jpg")
        let limit = full.body.count / 2
        let fitted = try get(server, "/insecure/rs:fit:400:400/mb:\(limit)/plain/local:///photo.jpg@jpg")
        XCTAssertEqual(fitted.status, 200)
        XCTAssertLessThanOrEqual(fitted.body.count, limit)
        XCTAssertEqual(format(fitted), .jpeg)
        // imgproxy's saveImageToFitBytes over the same pixels, from the default 80.
        let pixels = try decoded(try get(server, "/insecure/rs:fit:400:400/plain/local:///photo.jpg@png"))
        var quality = 80
        var expected = Data()
        while true {
            expected = try ImageEncoder().encode(pixels, as: .jpeg(quality: quality)).data
            if expected.count <= limit || quality <= 10 { break }
            let excess = Double(expected.count) / Double(limit)
            let lowered = Int((Double(quality) * (excess > 3 ? 0.25 : excess > 1.5 ? 0.5 : 0.75)).rounded())
            quality = max(1, min(quality - 1, lowered))
        }
        XCTAssertLessThan(quality, 80)
        XCTAssertEqual(fitted.body, expected, "saved again at imgproxy's lowered quality \(quality)")
        // Out of reach: the answer at quality 10 or below, still a 200.
        let tiny = try get(server, "/insecure/rs:fit:400:400/mb:100/plain/local:///photo.jpg@webp")
        XCTAssertEqual(tiny.status, 200)
        XCTAssertEqual(format(tiny), .webp)
        // PNG has no quality: max_bytes changes nothing.
        XCTAssertEqual(
            try get(server, "/insecure/rs:fit:100:100/mb:100/plain/local:///photo.jpg@png").body,
            try get(server, "/insecure/rs:fit:100:100/plain/local:///photo.jpg@png").body)
    }

    // MARK: - Colour

    func testAGreySourceStaysGrey() throws {
        let server = try makeServer()
        for (file, colourType) in [("grey.png", 0), ("greyalpha.png", 4), ("opaque.png", 2), ("alpha.png", 6)] {
            let response = try get(server, "/insecure/rs:fit:100:100/plain/local:///\(file)@png")
            XCTAssertEqual(response.status, 200)
            XCTAssertEqual(Int(response.body[25]), colourType, "\(file): the PNG's colour type")
        }
        let jpeg = try get(server, "/insecure/rs:fit:100:100/plain/local:///grey.png@jpg")
        XCTAssertEqual(JPEGSegments.components(jpeg.body), 1, "one component: grey")
        XCTAssertEqual(
            JPEGSegments.components(try get(server, "/insecure/rs:fit:100:100/plain/local:///photo.jpg@jpg").body), 3)
    }

    func testStripColorProfile() throws {
        let server = try makeServer()
        let target = "/insecure/rs:fit:100:100/%@plain/local:///p3.jpg@jpg"
        let stripped = try get(server, String(format: target, ""))
        XCTAssertFalse(JPEGSegments.contains(stripped.body, marker: 0xE2), "imgproxy's default: no profile")
        let kept = try get(server, String(format: target, "scp:0/"))
        XCTAssertTrue(JPEGSegments.contains(kept.body, marker: 0xE2), "the sRGB profile the pixels are in")
        XCTAssertNotEqual(kept.header("ETag"), stripped.header("ETag"))
        let keeping = try makeServer { $0.output.stripColorProfile = false }
        XCTAssertTrue(JPEGSegments.contains(try get(keeping, String(format: target, "")).body, marker: 0xE2))
        XCTAssertFalse(JPEGSegments.contains(try get(keeping, String(format: target, "scp:1/")).body, marker: 0xE2))
        // A source without a profile gets none.
        XCTAssertFalse(
            JPEGSegments.contains(
                try get(keeping, "/insecure/rs:fit:100:100/plain/local:///photo.jpg@jpg").body, marker: 0xE2))
        // keep_copyright and preserve_hdr are read (serve strips all metadata and writes 8 bits).
        for options in ["kcr:0", "kcr:1", "ph:1", "ph:0"] {
            XCTAssertEqual(try get(server, String(format: target, options + "/")).status, 200, options)
        }
    }

    // MARK: - Client hints

    func testClientHintsSetTheDefaultWidthAndDPRWithVary() throws {
        let plain = try makeServer()
        let hints = try makeServer { $0.output.enableClientHints = true }
        let target = "/insecure/plain/local:///photo.jpg@png"
        let ignored = try get(plain, target, headers: ["Width": "200"])
        XCTAssertEqual(try decoded(ignored).width, 800, "hints are off by default")
        XCTAssertNil(ignored.header("Vary"))
        let cases: [([String: String], Int)] = [
            (["Width": "200"], 200), (["Sec-CH-Width": "300", "Width": "200"], 300),
            // Width is in physical pixels: 100 points at dpr 2, 200 pixels.
            (["DPR": "2", "Width": "200"], 200), (["Sec-CH-DPR": "2", "DPR": "3", "Width": "300"], 300),
            // A DPR out of (0, 8] is ignored.
            (["DPR": "9", "Width": "200"], 200), ([:], 800)
        ]
        var tags: [String: [String: String]] = [:]
        for (headers, width) in cases {
            let response = try get(hints, target, headers: headers)
            XCTAssertEqual(response.status, 200, "\(headers): \(response.text)")
            XCTAssertEqual(try decoded(response).width, width, "\(headers)")
            XCTAssertEqual(response.header("Vary"), "Sec-CH-DPR, DPR, Sec-CH-Width, Width")
            tags[response.header("ETag") ?? ""] = headers
        }
        XCTAssertEqual(tags.count, 5, "hints are part of the key (dpr 1 width 200 twice: one tag)")
        // A width past the result limit is held to it (a header never makes a 400).
        let huge = try get(hints, target, headers: ["Width": "99999", "DPR": "3"])
        XCTAssertEqual(huge.status, 200, huge.text)
        XCTAssertEqual(try decoded(huge).width, 800, "not enlarged")
        // The URL's options override the hints.
        let overridden = try get(hints, "/insecure/w:120/plain/local:///photo.jpg@png", headers: ["Width": "400"])
        XCTAssertEqual(try decoded(overridden).width, 120)
        let dpr = try get(hints, "/insecure/dpr:1/plain/local:///photo.jpg@png", headers: ["DPR": "2", "Width": "400"])
        XCTAssertEqual(try decoded(dpr).width, 200, "200 points at the URL's dpr 1")
    }
}
