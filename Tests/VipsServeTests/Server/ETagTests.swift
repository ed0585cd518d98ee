import Foundation
import TestSupport
import VipsCore
import VipsLoad
import VipsSynthesis
import XCTest

@testable import VipsServe

/// The strong `ETag` names the bytes (RFC 9110: a strong validator changes
/// with every change of the representation's bytes): what one URL answers
/// does not depend on what the server made before it. Two fresh servers over
/// real pipelines with memory caches, the same URLs in opposite orders.
final class ETagTests: XCTestCase {
    private var root: URL!
    private var servers: [ImageServer] = []

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("vipsserve-etag-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try ImageSynthesizer.data(width: 1600, height: 1200, seed: 4, format: .jpeg(quality: 90))
            .write(to: root.appendingPathComponent("photo.jpg"))
        try ImageSynthesizer.data(width: 600, height: 400, seed: 5, alpha: true, format: .png())
            .write(to: root.appendingPathComponent("alpha.png"))
    }

    override func tearDown() async throws {
        for server in servers { await server.shutdown() }
        servers = []
        if let root { try? FileManager.default.removeItem(at: root) }
    }

    /// A server as `vipsload serve` makes one: a memory cache of bitmaps under the pipeline.
    private func makeServer() throws -> ImageServer {
        let pipeline = ImagePipeline.Configuration(decodeConcurrency: 1, memoryCache: MemoryCache(costLimit: 256 << 20))
        var configuration = ImageServer.Configuration()
        configuration.port = 0
        configuration.urls = ProcessingURLParser(sources: try SourcePolicy(localRoot: root.path, allowedSources: []))
        let server = try ImageServer(pipeline: ImagePipeline(configuration: pipeline), configuration: configuration)
        servers.append(server)
        return server
    }

    /// ETag and body of each URL, requested in order.
    private func fetch(_ urls: [String], from server: ImageServer) throws -> [String: (etag: String, body: Data)] {
        let connection = try TestConnection(port: server.port)
        var answers: [String: (etag: String, body: Data)] = [:]
        for url in urls {
            let response = try connection.request(url)
            XCTAssertEqual(response.status, 200, "\(url): \(response.text)")
            answers[url] = (try XCTUnwrap(response.header("ETag"), url), response.body)
        }
        return answers
    }

    func testEqualETagsAreEqualBytesWhateverWasCachedBefore() throws {
        // 40 URLs: two sources, ten sizes each (all below the sources' own), PNG and WebP.
        var urls: [String] = []
        for (source, widths) in [
            ("photo.jpg", [40, 64, 100, 150, 200, 256, 320, 400, 600, 800]),
            ("alpha.png", [24, 40, 64, 90, 128, 160, 200, 256, 300, 400])
        ] {
            for width in widths {
                for format in ["png", "webp"] {
                    urls.append("/insecure/rs:fit:\(width):\(width)/plain/local:///\(source)@\(format)")
                }
            }
        }
        XCTAssertEqual(urls.count, 40)
        // Small sizes first (each decoded from the file), then on a fresh server large sizes first
        // (so every smaller one could be made from a cached larger bitmap).
        let smallFirst = try fetch(urls, from: try makeServer())
        let largeFirst = try fetch(urls.reversed(), from: try makeServer())
        var differing: [String] = []
        for url in urls {
            let (a, b) = (try XCTUnwrap(smallFirst[url]), try XCTUnwrap(largeFirst[url]))
            XCTAssertEqual(a.etag, b.etag, url)
            if a.body != b.body { differing.append(url) }
        }
        XCTAssertEqual(differing, [], "\(differing.count) of \(urls.count) URLs gave other bytes under one ETag")
        // Across every answer: equal ETags ⇔ equal bytes.
        let answers = Array(smallFirst.values) + Array(largeFirst.values)
        var bodyByTag: [String: Data] = [:]
        var tagByBody: [Data: String] = [:]
        for answer in answers {
            if let body = bodyByTag[answer.etag] { XCTAssertEqual(body, answer.body, "one ETag, other bytes") }
            if let tag = tagByBody[answer.body] { XCTAssertEqual(tag, answer.etag, "one body, two ETags") }
            bodyByTag[answer.etag] = answer.body
            tagByBody[answer.body] = answer.etag
        }
    }
}
