import Foundation
import TestSupport
import VipsCore
import VipsLoad
import VipsSynthesis
import XCTest

@testable import VipsServe

/// `skip_processing`, `raw`, `expires`, `filename` and `return_attachment`
/// on a real server, with the cases of imgproxy's integration tests
/// (`TestSkipProcessing…`, `TestRawOption`) and its `ContentDispositionValue` table.
final class ResponseOptionsTests: XCTestCase {
    private var root: URL!
    private var png: Data!
    private var servers: [ImageServer] = []
    private var origins: [TestHTTPServer] = []

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("vipsserve-respopt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        png = try ImageSynthesizer.data(width: 64, height: 48, seed: 4, alpha: true, format: .png())
        try png.write(to: root.appendingPathComponent("test1.png"))
    }

    override func tearDown() async throws {
        for server in servers { await server.shutdown() }
        servers = []
        for origin in origins { origin.stop() }
        origins = []
        if let root { try? FileManager.default.removeItem(at: root) }
    }

    private func makeServer() throws -> ImageServer {
        var pipeline = ImagePipeline.Configuration(decodeConcurrency: 1)
        pipeline.http.addressPolicy = .unrestricted
        var configuration = ImageServer.Configuration()
        configuration.port = 0
        configuration.urls = ProcessingURLParser(
            sources: try SourcePolicy(localRoot: root.path, allowedSources: [try SourcePattern("127.0.0.1:*")]))
        let server = try ImageServer(pipeline: ImagePipeline(configuration: pipeline), configuration: configuration)
        servers.append(server)
        return server
    }

    private func get(_ server: ImageServer, _ target: String) throws -> TestConnection.Response {
        try TestConnection(port: server.port).request(target)
    }

    private func base64URL(_ text: String) -> String {
        Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    func testSkipProcessingServesTheSourceInTheListedFormats() throws {
        let server = try makeServer()
        for target in [
            "/unsafe/rs:fill:4:4/skp:png/plain/local:///test1.png",
            "/unsafe/rs:fill:4:4/skp:jpg:png/plain/local:///test1.png@png"
        ] {
            let response = try get(server, target)
            XCTAssertEqual(response.status, 200, "\(target): \(response.text)")
            XCTAssertEqual(response.body, png, target)
            XCTAssertEqual(response.header("Content-Type"), "image/png", target)
        }
        // Another output format, or a source format not in the list: processed.
        let jpeg = try get(server, "/unsafe/rs:fill:4:4/skp:png/plain/local:///test1.png@jpg")
        XCTAssertEqual(jpeg.status, 200, jpeg.text)
        XCTAssertEqual(jpeg.header("Content-Type"), "image/jpeg")
        let other = try get(server, "/unsafe/rs:fill:4:4/skp:jpg/plain/local:///test1.png@png")
        XCTAssertEqual(other.status, 200, other.text)
        XCTAssertNotEqual(other.body, png)
        XCTAssertEqual(try get(server, "/unsafe/skp:png:bad_format/plain/local:///test1.png").status, 404)
    }

    func testRawStreamsTheSourceAsItIs() throws {
        let origin = try TestHTTPServer()
        origins.append(origin)
        origin.route(
            "/test1.png",
            .ok(png, contentType: "image/png", headers: [("Last-Modified", "Wed, 21 Oct 2015 07:28:00 GMT")]))
        let server = try makeServer()
        let local = try get(server, "/unsafe/raw:1/plain/local:///test1.png")
        XCTAssertEqual(local.status, 200, local.text)
        XCTAssertEqual(local.body, png)
        let remote = try get(server, "/unsafe/rs:fill:4:4/raw:1/plain/\(origin.url("/test1.png").absoluteString)@jpg")
        XCTAssertEqual(remote.status, 200, remote.text)
        XCTAssertEqual(remote.body, png, "no processing, whatever the options")
        XCTAssertEqual(remote.header("Content-Type"), "image/png")
        XCTAssertEqual(remote.header("Last-Modified"), "Wed, 21 Oct 2015 07:28:00 GMT")
        XCTAssertEqual(try get(server, "/unsafe/raw:1/plain/\(origin.url("/test1.png").absoluteString)").body, png)
        XCTAssertEqual(origin.requestCount("/test1.png"), 2, "the second of each URL is a memory hit")
    }

    func testAnExpiredURLIs404AndAnExpiringOneBoundsMaxAge() throws {
        let server = try makeServer()
        XCTAssertEqual(try get(server, "/unsafe/exp:1609448400/plain/local:///test1.png").status, 404)
        let soon = Int(Date().timeIntervalSince1970) + 120
        let response = try get(server, "/unsafe/exp:\(soon)/plain/local:///test1.png")
        XCTAssertEqual(response.status, 200, response.text)
        let maxAge = try XCTUnwrap(
            response.header("Cache-Control")?.split(separator: "=").last.flatMap { Int($0) })
        XCTAssertTrue((0...120).contains(maxAge), "\(maxAge)")
        XCTAssertEqual(try get(server, "/unsafe/exp:32503669200/plain/local:///test1.png").status, 200)
        XCTAssertEqual(try get(server, "/unsafe/exp:0/plain/local:///test1.png").status, 200)
    }

    func testContentDispositionNamesTheFileAsImgproxyDoes() throws {
        let server = try makeServer()
        let cases: [(String, String)] = [
            ("/unsafe/plain/local:///test1.png@png", "inline; filename=\"test1.png\""),
            ("/unsafe/plain/local:///test1.png@jpg", "inline; filename=\"test1.jpg\""),
            ("/unsafe/att:1/plain/local:///test1.png@webp", "attachment; filename=\"test1.webp\""),
            ("/unsafe/fn:face/plain/local:///test1.png@jpg", "inline; filename=\"face.jpg\""),
            (
                "/unsafe/fn:\(base64URL("my\"file\r\nX-Evil: 1")):1/att:1/plain/local:///test1.png@png",
                "attachment; filename=\"my%22file%0D%0AX-Evil: 1.png\""
            ),
            ("/unsafe/fn:\(base64URL("café")):true/plain/local:///test1.png@png", "inline; filename=\"caf%C3%A9.png\"")
        ]
        var tags: Set<String> = []
        for (target, expected) in cases {
            let response = try get(server, target)
            XCTAssertEqual(response.status, 200, "\(target): \(response.text)")
            XCTAssertEqual(response.header("Content-Disposition"), expected, target)
            XCTAssertNil(response.header("X-Evil"))
            tags.insert(response.header("ETag") ?? "")
        }
        XCTAssertEqual(tags.count, cases.count, "each disposition is its own answer")
        XCTAssertEqual(try get(server, "/unsafe/fn:%25%25:1/plain/local:///test1.png").status, 404)
    }

    func testTheOptionsParseAndHaveCanonicalSegmentsThatParseBack() throws {
        let parser = ProcessingURLParser(sources: .none)
        let url = try parser.parseURL(
            "/unsafe/skp:png:jpeg:jpg/raw:t/exp:32503669200/fn:\(base64URL("a:b/c")):1/att:1/plain/http://x/a.jpg")
        let options = url.options
        XCTAssertEqual(options.skipProcessing, [.png, .jpeg])
        XCTAssertTrue(options.raw)
        XCTAssertEqual(options.expires, 32_503_669_200)
        XCTAssertEqual(options.filename, "a:b/c")
        XCTAssertTrue(options.returnAttachment)
        let segments = options.canonicalSegments
        XCTAssertEqual(
            segments,
            ["skp:jpg:png", "raw:1", "exp:32503669200", "fn:\(base64URL("a:b/c")):1", "att:1"])
        let again = try parser.parseURL("/unsafe/" + segments.joined(separator: "/") + "/plain/http://x/a.jpg")
        XCTAssertEqual(again.options, options)
        XCTAssertEqual(try parser.parseURL("/unsafe/fn:plain/plain/http://x/a.jpg").options.filename, "plain")
        XCTAssertThrowsError(try parser.parseURL("/unsafe/exp:1609448400/plain/http://x/a.jpg")) { error in
            XCTAssertEqual((error as? ProcessingURLError)?.status, 404)
        }
    }
}
