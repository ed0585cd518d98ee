import Foundation
import TestSupport
import VipsCore
import VipsLoad
import VipsSynthesis
import XCTest

@testable import VipsServe

/// The watermark on a real `ImageServer` over real pipelines and files: drawn
/// where `wm` puts it, and named in the `ETag` and the caches' keys, so a
/// server given another watermark image (or none) answers, tags and caches
/// the same URL apart; a watermark loaded from a real origin, under the policy.
final class WatermarkServingTests: XCTestCase {
    private var root: URL!
    private var servers: [ImageServer] = []
    private var origins: [TestHTTPServer] = []

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("vipsserve-wm-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try ImageSynthesizer.data(width: 320, height: 240, seed: 31, format: .png())
            .write(to: root.appendingPathComponent("photo.png"))
        try ImageSynthesizer.data(width: 40, height: 20, seed: 32, format: .png())
            .write(to: root.appendingPathComponent("one.png"))
        try ImageSynthesizer.data(width: 40, height: 20, seed: 33, format: .png())
            .write(to: root.appendingPathComponent("other.png"))
    }

    override func tearDown() async throws {
        for server in servers { await server.shutdown() }
        servers = []
        for origin in origins { origin.stop() }
        origins = []
        if let root { try? FileManager.default.removeItem(at: root) }
    }

    private func data(_ name: String) throws -> Data { try Data(contentsOf: root.appendingPathComponent(name)) }

    private func makeServer(watermark: WatermarkImage?, diskCache: URL? = nil) throws -> ImageServer {
        let pipeline = ImagePipeline.Configuration(decodeConcurrency: 1, memoryCache: MemoryCache(costLimit: 64 << 20))
        var configuration = ImageServer.Configuration()
        configuration.port = 0
        configuration.urls = ProcessingURLParser(sources: try SourcePolicy(localRoot: root.path))
        configuration.urls.watermark = watermark
        if let diskCache { configuration.dataCache = try DiskCache(directory: diskCache, sizeLimit: 64 << 20) }
        let server = try ImageServer(pipeline: ImagePipeline(configuration: pipeline), configuration: configuration)
        servers.append(server)
        return server
    }

    private func get(
        _ server: ImageServer, _ target: String, headers: [String: String] = [:]
    ) throws -> TestConnection.Response {
        try TestConnection(port: server.port).request(target, headers: headers)
    }

    private let marked = "/insecure/wm:1:nowe:10:10/plain/local:///photo.png@png"

    func testTheWatermarkIsDrawnAndItsImageIsInTheETag() throws {
        let one = try WatermarkImage(data: try data("one.png"))
        let server = try makeServer(watermark: one)
        let response = try get(server, marked)
        XCTAssertEqual(response.status, 200, response.text)
        XCTAssertEqual(response.header("Content-Type"), "image/png")
        let bitmap = try ImageDecoder().decode(.data(response.body))
        XCTAssertEqual([bitmap.width, bitmap.height, bitmap.channels], [320, 240, 3])
        XCTAssertEqual(bitmap.pixel(x: 10, y: 10), one.image.pixel(x: 0, y: 0), "the watermark's corner at (10, 10)")
        XCTAssertEqual(bitmap.pixel(x: 49, y: 29), one.image.pixel(x: 39, y: 19))
        let source = try ImageDecoder().decode(.data(try data("photo.png")))
        XCTAssertEqual(bitmap.pixel(x: 50, y: 30), source.pixel(x: 50, y: 30), "outside it, the image")
        let tag = try XCTUnwrap(response.header("ETag"))
        XCTAssertEqual(try get(server, marked, headers: ["If-None-Match": tag]).status, 304)

        // wm:0 is no watermark: the plain URL's variant.
        let plain = try get(server, "/insecure/plain/local:///photo.png@png")
        XCTAssertEqual(
            try get(server, "/insecure/wm:0/plain/local:///photo.png@png").header("ETag"), plain.header("ETag"))
        XCTAssertNotEqual(plain.header("ETag"), tag)

        // Another watermark image: another ETag, other bytes, and the first one's tag does not match.
        let other = try makeServer(watermark: try WatermarkImage(data: try data("other.png")))
        let otherResponse = try get(other, marked)
        XCTAssertEqual(otherResponse.status, 200)
        XCTAssertNotEqual(otherResponse.header("ETag"), tag)
        XCTAssertNotEqual(otherResponse.body, response.body)
        XCTAssertEqual(try get(other, marked, headers: ["If-None-Match": tag]).status, 200)
        // The same bytes on another server: the same ETag (the identity is the bytes' hash).
        let again = try makeServer(watermark: try WatermarkImage(data: try data("one.png")))
        XCTAssertEqual(try get(again, marked).header("ETag"), tag)
        // No watermark configured: the option draws nothing (as in imgproxy), under its own tag.
        let none = try makeServer(watermark: nil)
        let undrawn = try get(none, marked)
        XCTAssertEqual(undrawn.status, 200)
        XCTAssertNotEqual(undrawn.header("ETag"), tag)
        XCTAssertEqual(try ImageDecoder().decode(.data(undrawn.body)).pixelData, source.pixelData)
    }

    func testADiskCacheKeepsEachWatermarksResultApart() async throws {
        let folder = root.appendingPathComponent("cache")
        let first = try makeServer(watermark: try WatermarkImage(data: try data("one.png")), diskCache: folder)
        let drawn = try get(first, marked)
        XCTAssertEqual(drawn.status, 200)
        await first.shutdown()
        // A restart with another watermark over the same disk cache: not the first one's bytes.
        let second = try makeServer(watermark: try WatermarkImage(data: try data("other.png")), diskCache: folder)
        let redrawn = try get(second, marked)
        XCTAssertEqual(redrawn.status, 200)
        XCTAssertNotEqual(redrawn.body, drawn.body)
        XCTAssertNotEqual(redrawn.header("ETag"), drawn.header("ETag"))
        let bitmap = try ImageDecoder().decode(.data(redrawn.body))
        let other = try ImageDecoder().decode(.data(try data("other.png")))
        XCTAssertEqual(bitmap.pixel(x: 10, y: 10), other.pixel(x: 0, y: 0))
    }

    func testAWatermarkFromAnOriginIsLoadedOnceUnderThePolicy() async throws {
        let origin = try TestHTTPServer()
        origins.append(origin)
        let mark = try data("one.png")
        let fetched = LockedCounter()
        origin.route("/mark.png") { _ in
            fetched.increment()
            return .ok(mark, contentType: "image/png")
        }
        var configuration = ImagePipeline.Configuration(decodeConcurrency: 1)
        configuration.http.addressPolicy = .unrestricted
        let pipeline = ImagePipeline(configuration: configuration)
        let url = origin.url("/mark.png").absoluteString
        do {
            _ = try await WatermarkImage.load(
                .url(url), pipeline: pipeline, sources: try SourcePolicy(localRoot: root.path))
            XCTFail("a host the policy does not allow")
        } catch {
            XCTAssertEqual(error.kind, .sourceNotAllowed)
        }
        XCTAssertEqual(fetched.value, 0, "nothing is fetched from a refused source")
        let policy = try SourcePolicy(localRoot: root.path, allowedSources: [try SourcePattern("127.0.0.1:*")])
        let watermark = try await WatermarkImage.load(.url(url), opacity: 0.5, pipeline: pipeline, sources: policy)
        XCTAssertEqual(fetched.value, 1)
        XCTAssertEqual(watermark.identity, try WatermarkImage(data: mark).identity + "@0.5")
        let server = try makeServer(watermark: watermark)
        for target in [marked, "/insecure/wm:1:re/plain/local:///photo.png@png", marked] {
            XCTAssertEqual(try get(server, target).status, 200, target)
        }
        XCTAssertEqual(fetched.value, 1, "loaded once, at start")
        do {
            _ = try await WatermarkImage.load(
                .url(origin.url("/absent.png").absoluteString), pipeline: pipeline, sources: policy)
            XCTFail("an origin's 404")
        } catch {
            XCTAssertEqual(error.kind, .httpStatus)
            XCTAssertTrue(error.message.hasPrefix("watermark URL: "), error.message)
        }
    }
}

/// A count several threads add to.
private final class LockedCounter: Sendable {
    private let state = LockedState(0)
    func increment() { state.withLock { $0 += 1 } }
    var value: Int { state.withLock { $0 } }
}
