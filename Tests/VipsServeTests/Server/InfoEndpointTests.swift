import Foundation
import TestSupport
import VipsCore
import VipsLoad
import VipsSynthesis
import XCTest

@testable import VipsServe

/// `/info/…` on a real server: signed as processing URLs are, the JSON of a
/// local file and of a real origin's image (the placeholders the library
/// computes from the same small decode), cached and tagged, bounded.
final class InfoEndpointTests: XCTestCase {
    private var root: URL!
    private var servers: [ImageServer] = []
    private var origins: [TestHTTPServer] = []

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("vipsserve-info-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try ImageSynthesizer.data(width: 640, height: 480, seed: 7, format: .jpeg(quality: 90))
            .write(to: root.appendingPathComponent("photo.jpg"))
        try ImageSynthesizer.data(width: 300, height: 200, seed: 8, alpha: true, format: .png())
            .write(to: root.appendingPathComponent("alpha.png"))
    }

    override func tearDown() async throws {
        for server in servers { await server.shutdown() }
        servers = []
        for origin in origins { origin.stop() }
        origins = []
        if let root { try? FileManager.default.removeItem(at: root) }
    }

    private func makeServer(
        key: URLSigningKey? = nil, _ configure: (inout ImageServer.Configuration) -> Void = { _ in }
    ) throws -> ImageServer {
        var pipeline = ImagePipeline.Configuration(decodeConcurrency: 1)
        pipeline.http.addressPolicy = .unrestricted
        var configuration = ImageServer.Configuration()
        configuration.port = 0
        configuration.urls = ProcessingURLParser(
            signingKeys: key.map { [$0] } ?? [],
            sources: try SourcePolicy(localRoot: root.path, allowedSources: [try SourcePattern("127.0.0.1:*")]))
        configure(&configuration)
        let server = try ImageServer(pipeline: ImagePipeline(configuration: pipeline), configuration: configuration)
        servers.append(server)
        return server
    }

    private func get(
        _ server: ImageServer, _ target: String, headers: [String: String] = [:]
    ) throws -> TestConnection.Response {
        try TestConnection(port: server.port).request(target, headers: headers)
    }

    private func json(_ response: TestConnection.Response) throws -> [String: Any] {
        try XCTUnwrap(JSONSerialization.jsonObject(with: response.body) as? [String: Any], response.text)
    }

    /// The placeholder the library makes of `path` from the same small decode.
    private func expectedPlaceholder(_ path: String) throws -> ImagePlaceholder {
        let bitmap = try ImageDecoder().decode(.file(path), size: .maxPixelSize(ImagePlaceholder.side), mode: .fit)
        return try ImagePlaceholder(bitmap)
    }

    func testALocalFilesInfoIsItsHeaderAndPlaceholders() throws {
        let server = try makeServer()
        let response = try get(server, "/info/unsafe/plain/local:///alpha.png")
        XCTAssertEqual(response.status, 200, response.text)
        XCTAssertEqual(response.header("Content-Type"), "application/json")
        let object = try json(response)
        XCTAssertEqual(object["width"] as? Int, 300)
        XCTAssertEqual(object["height"] as? Int, 200)
        XCTAssertEqual(object["format"] as? String, "png")
        XCTAssertEqual(object["alpha"] as? Bool, true)
        XCTAssertEqual(object["pages"] as? Int, 1)
        XCTAssertEqual(object["orientation"] as? Int, 1)
        let path = root.appendingPathComponent("alpha.png").path
        XCTAssertEqual(object["size"] as? Int, try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        let expected = try expectedPlaceholder(path)
        XCTAssertEqual(object["blurhash"] as? String, expected.blurHash)
        XCTAssertEqual(object["thumbhash"] as? String, expected.thumbHashBase64)
        let average = try XCTUnwrap(object["average"] as? [String: Int])
        XCTAssertEqual(average["R"], Int(expected.averageColour.red))
        XCTAssertEqual(average["A"], Int(expected.averageColour.alpha))
        // Cached and tagged as image answers are.
        let etag = try XCTUnwrap(response.header("ETag"))
        XCTAssertEqual(try get(server, "/info/unsafe/plain/local:///alpha.png").body, response.body)
        XCTAssertEqual(
            try get(server, "/info/unsafe/plain/local:///alpha.png", headers: ["If-None-Match": etag]).status, 304)
        XCTAssertEqual(server.metricsText.contains("vipsload_renders_total 1"), true, server.metricsText)
    }

    func testARemoteSourcesInfoAndTheRefusals() throws {
        let origin = try TestHTTPServer()
        origins.append(origin)
        let jpeg = try Data(contentsOf: root.appendingPathComponent("photo.jpg"))
        origin.route("/photo.jpg", .ok(jpeg, headers: [("Last-Modified", "Wed, 21 Oct 2015 07:28:00 GMT")]))
        let server = try makeServer()
        let encoded = Data(origin.url("/photo.jpg").absoluteString.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        let response = try get(server, "/info/_/cb:2/\(encoded)")
        XCTAssertEqual(response.status, 200, response.text)
        let object = try json(response)
        XCTAssertEqual(object["width"] as? Int, 640)
        XCTAssertEqual(object["format"] as? String, "jpeg")
        XCTAssertEqual(object["size"] as? Int, jpeg.count)
        XCTAssertEqual(object["alpha"] as? Bool, false)
        XCTAssertEqual(response.header("Last-Modified"), "Wed, 21 Oct 2015 07:28:00 GMT")
        XCTAssertEqual(origin.requestCount("/photo.jpg"), 1)
        // A processing option is no info option; a missing file, a disallowed source: as image URLs.
        XCTAssertEqual(try get(server, "/info/_/rs:fit:10:10/plain/local:///photo.jpg").status, 404)
        XCTAssertEqual(try get(server, "/info/_/plain/local:///missing.jpg").status, 404)
        XCTAssertEqual(try get(server, "/info/_/plain/http://example.invalid/a.jpg").status, 404)
        XCTAssertEqual(try get(server, "/info/_/exp:1609448400/plain/local:///photo.jpg").status, 404)
    }

    func testInfoURLsAreSignedAsProcessingURLs() throws {
        let key = try URLSigningKey(hexKey: "0123456789abcdef", hexSalt: "fedcba9876543210")
        let server = try makeServer(key: key)
        let path = "/plain/local:///photo.jpg"
        XCTAssertEqual(try get(server, "/info/\(key.signature(forPath: path))\(path)").status, 200)
        XCTAssertEqual(try get(server, "/info/insecure\(path)").status, 403)
        let cacheControl = try get(server, "/info/\(key.signature(forPath: path))\(path)").header("Cache-Control")
        XCTAssertEqual(cacheControl, "public, max-age=31536000")
    }

    /// The memory budget and the queue bound info answers too.
    func testInfoIsBoundedByTheMemoryBudget() throws {
        let server = try makeServer { $0.memoryBudget = 1 }
        let response = try get(server, "/info/_/plain/local:///photo.jpg")
        XCTAssertEqual(response.status, 422, response.text)
    }
}
