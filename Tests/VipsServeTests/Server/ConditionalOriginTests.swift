import Foundation
import TestSupport
import VipsCore
import VipsLoad
import VipsSynthesis
import XCTest

@testable import VipsServe

/// Conditional requests, as imgproxy's integration tests pin them
/// (`TestETagDataMatch`, `TestLastModifiedEnabled`/`Disabled`,
/// `TestModifiedSinceReq…`): a real server on 127.0.0.1, a real origin that
/// honours `If-None-Match` and `If-Modified-Since`, real files.
final class ConditionalOriginTests: XCTestCase {
    private var root: URL!
    private var servers: [ImageServer] = []
    private var origins: [TestHTTPServer] = []
    private let tag = "\"loremipsumdolor\""
    private let modified = "Wed, 21 Oct 2015 07:28:00 GMT"

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("vipsserve-cond-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try ImageSynthesizer.data(width: 320, height: 240, seed: 3, format: .png())
            .write(to: root.appendingPathComponent("test1.png"))
    }

    override func tearDown() async throws {
        for server in servers { await server.shutdown() }
        servers = []
        for origin in origins { origin.stop() }
        origins = []
        if let root { try? FileManager.default.removeItem(at: root) }
    }

    private func makeServer(_ configure: (inout ImageServer.Configuration) -> Void = { _ in }) throws -> ImageServer {
        var pipeline = ImagePipeline.Configuration(decodeConcurrency: 1)
        pipeline.http.addressPolicy = .unrestricted
        var configuration = ImageServer.Configuration()
        configuration.port = 0
        configuration.urls = ProcessingURLParser(
            sources: try SourcePolicy(localRoot: root.path, allowedSources: [try SourcePattern("127.0.0.1:*")]))
        configure(&configuration)
        let server = try ImageServer(pipeline: ImagePipeline(configuration: pipeline), configuration: configuration)
        servers.append(server)
        return server
    }

    /// An origin whose `/test1.png` has `tag` and `modified`: 304 when
    /// `If-None-Match` names the tag, or (without one) when
    /// `If-Modified-Since` is at or after `modified`; the image otherwise.
    private func makeOrigin() throws -> TestHTTPServer {
        let origin = try TestHTTPServer()
        origins.append(origin)
        let png = try Data(contentsOf: root.appendingPathComponent("test1.png"))
        let tag = self.tag
        let modified = self.modified
        origin.route("/test1.png") { request in
            let validators = [("ETag", tag), ("Last-Modified", modified)]
            if let match = request.header("If-None-Match") {
                if match == tag { return .init(status: 304, headers: validators) }
            } else if let since = request.header("If-Modified-Since").flatMap(HTTPDate.parse),
                let date = HTTPDate.parse(modified), date <= since
            {
                return .init(status: 304, headers: validators)
            }
            return .ok(png, contentType: "image/png", headers: validators)
        }
        return origin
    }

    private func get(
        _ server: ImageServer, _ target: String, headers: [String: String] = [:]
    ) throws -> TestConnection.Response {
        try TestConnection(port: server.port).request(target, headers: headers)
    }

    private func remote(_ origin: TestHTTPServer) -> String {
        "/unsafe/rs:fill:4:4/plain/\(origin.url("/test1.png").absoluteString)"
    }

    /// imgproxy's `TestETagDataMatch`: the client's `If-None-Match` reaches
    /// the origin, and its 304 is a 304 (it was a 502: the origin's 304 was
    /// read as an error status).
    func testTheOrigins304ToTheClientsIfNoneMatchIsA304() throws {
        let origin = try makeOrigin()
        let server = try makeServer()
        let response = try get(server, remote(origin), headers: ["If-None-Match": tag])
        XCTAssertEqual(response.status, 304, response.text)
        XCTAssertTrue(response.body.isEmpty)
        XCTAssertEqual(origin.requests("/test1.png").last?.header("If-None-Match"), tag)
        XCTAssertEqual(response.header("Last-Modified"), modified)
        XCTAssertNotNil(response.header("ETag"))
        // Nothing was cached of it: without the condition the image is made.
        let image = try get(server, remote(origin))
        XCTAssertEqual(image.status, 200, image.text)
        XCTAssertFalse(image.body.isEmpty)
        XCTAssertNil(origin.requests("/test1.png").last?.header("If-None-Match"))
    }

    /// `TestModifiedSinceReqExactMatch…` and `…CompareMoreRecent…`: the
    /// client's date reaches the origin as sent, and its 304 is a 304.
    func testTheOrigins304ToTheClientsIfModifiedSinceIsA304() throws {
        let origin = try makeOrigin()
        let server = try makeServer()
        for since in [modified, "Thu, 25 Feb 2021 01:45:00 GMT"] {
            let response = try get(server, remote(origin), headers: ["If-Modified-Since": since])
            XCTAssertEqual(response.status, 304, "\(since): \(response.text)")
            XCTAssertEqual(origin.requests("/test1.png").last?.header("If-Modified-Since"), since)
        }
    }

    /// `…CompareTooOld…`: the origin sends the image, which is rendered
    /// from that one download, with the origin's `Last-Modified`
    /// (`TestLastModifiedEnabled`).
    func testAModifiedSourceIsRenderedFromTheConditionalDownloadAlone() throws {
        let origin = try makeOrigin()
        let server = try makeServer()
        let response = try get(
            server, remote(origin), headers: ["If-Modified-Since": "Tue, 01 Oct 2013 17:31:00 GMT"])
        XCTAssertEqual(response.status, 200, response.text)
        XCTAssertEqual(response.header("Last-Modified"), modified)
        XCTAssertEqual(origin.requestCount("/test1.png"), 1, "one download")
        let again = try get(server, remote(origin))
        XCTAssertEqual(again.status, 200)
        XCTAssertEqual(again.header("Last-Modified"), modified, "kept with the cached answer")
        XCTAssertEqual(again.header("ETag"), response.header("ETag"))
    }

    /// `TestLastModifiedDisabled`, `TestModifiedSinceReq…Disabled`, and the
    /// same for `If-None-Match`: nothing is forwarded, no `Last-Modified` is sent.
    func testTheSwitchesTurnForwardingOff() throws {
        let origin = try makeOrigin()
        let server = try makeServer {
            $0.usesLastModified = false
            $0.forwardsEntityTagConditions = false
        }
        let plain = try get(server, remote(origin))
        XCTAssertEqual(plain.status, 200)
        XCTAssertNil(plain.header("Last-Modified"))
        let response = try get(server, remote(origin), headers: ["If-None-Match": tag, "If-Modified-Since": modified])
        XCTAssertEqual(response.status, 200, response.text)
        for request in origin.requests("/test1.png") {
            XCTAssertNil(request.header("If-None-Match"))
            XCTAssertNil(request.header("If-Modified-Since"))
        }
    }

    /// The request to the origin keeps to the request's deadline: an origin
    /// that holds a conditional request (it answers only after the test) gets
    /// the client a 504 at `--timeout`.
    func testAConditionalRequestTheOriginHoldsEndsAtTheDeadline() throws {
        let origin = try TestHTTPServer()
        origins.append(origin)
        let gate = DispatchSemaphore(value: 0)
        defer { for _ in 0..<4 { gate.signal() } }
        origin.route("/held.png") { _ in
            gate.wait()
            return .init(status: 304)
        }
        let server = try makeServer { $0.requestTimeout = .seconds(1) }
        let response = try get(
            server, "/unsafe/plain/\(origin.url("/held.png").absoluteString)", headers: ["If-None-Match": tag])
        XCTAssertEqual(response.status, 504, response.text)
        XCTAssertTrue(server.metricsText.contains("vipsload_timeouts_total 1"), server.metricsText)
    }

    /// The server's own `ETag` is still answered at once, without asking the origin.
    func testTheServersOwnETagIsAnsweredWithoutTheOrigin() throws {
        let origin = try makeOrigin()
        let server = try makeServer()
        let first = try get(server, remote(origin))
        let etag = try XCTUnwrap(first.header("ETag"))
        let count = origin.requestCount("/test1.png")
        let response = try get(server, remote(origin), headers: ["If-None-Match": etag])
        XCTAssertEqual(response.status, 304)
        XCTAssertEqual(origin.requestCount("/test1.png"), count)
    }

    /// A local file: `Last-Modified` is its modification time, and
    /// `If-Modified-Since` is answered from it (ignored beside an
    /// `If-None-Match` that does not match, RFC 9110 §13.1.3).
    func testALocalFilesModificationTimeIsLastModifiedAndAnswersIfModifiedSince() throws {
        let path = root.appendingPathComponent("test1.png").path
        let mtime = Date(timeIntervalSince1970: 1_445_412_480) // Wed, 21 Oct 2015 07:28:00 GMT
        try FileManager.default.setAttributes([.modificationDate: mtime], ofItemAtPath: path)
        let server = try makeServer()
        let url = "/unsafe/rs:fill:4:4/plain/local:///test1.png"
        let image = try get(server, url)
        XCTAssertEqual(image.status, 200, image.text)
        XCTAssertEqual(image.header("Last-Modified"), modified)
        XCTAssertEqual(try get(server, url, headers: ["If-Modified-Since": modified]).status, 304)
        let later = try get(server, url, headers: ["If-Modified-Since": "Thu, 25 Feb 2021 01:45:00 GMT"])
        XCTAssertEqual(later.status, 304)
        XCTAssertEqual(later.header("Last-Modified"), modified)
        XCTAssertEqual(
            try get(server, url, headers: ["If-Modified-Since": "Tue, 01 Oct 2013 17:31:00 GMT"]).status, 200)
        XCTAssertEqual(try get(server, url, headers: ["If-Modified-Since": "yesterday"]).status, 200)
        let both = try get(server, url, headers: ["If-None-Match": "\"other\"", "If-Modified-Since": modified])
        XCTAssertEqual(both.status, 200)
        let off = try makeServer { $0.usesLastModified = false }
        let plain = try get(off, url, headers: ["If-Modified-Since": modified])
        XCTAssertEqual(plain.status, 200)
        XCTAssertNil(plain.header("Last-Modified"))
    }
}
