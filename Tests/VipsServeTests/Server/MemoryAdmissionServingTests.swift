import Foundation
import TestSupport
import VipsCore
import VipsLoad
import VipsSynthesis
import XCTest

@testable import VipsServe

/// The memory budget in a real `ImageServer` on 127.0.0.1 over a real
/// pipeline and a real JPEG: a render waits until its estimate fits beside
/// the others, and one over the whole budget gets 422.
final class MemoryAdmissionServingTests: XCTestCase {
    private var root: URL!
    private var servers: [ImageServer] = []

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("vipsserve-memory-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try ImageSynthesizer.data(width: 800, height: 600, seed: 3, format: .jpeg(quality: 90))
            .write(to: root.appendingPathComponent("photo.jpg"))
    }

    override func tearDown() async throws {
        for server in servers { await server.shutdown() }
        servers = []
        if let root { try? FileManager.default.removeItem(at: root) }
    }

    private func makeServer(budget: Int) throws -> ImageServer {
        var configuration = ImageServer.Configuration()
        configuration.port = 0
        configuration.memoryBudget = budget
        configuration.urls = ProcessingURLParser(sources: try SourcePolicy(localRoot: root.path, allowedSources: []))
        let server = try ImageServer(
            pipeline: ImagePipeline(configuration: ImagePipeline.Configuration(decodeConcurrency: 2)),
            configuration: configuration)
        servers.append(server)
        return server
    }

    private func metric(_ server: ImageServer, _ name: String) -> Double {
        let line = server.metricsText.split(separator: "\n").first { $0.hasPrefix(name + " ") }
        return Double(line?.split(separator: " ").last ?? "") ?? -1
    }

    private func waitFor(_ what: String, _ condition: () -> Bool) async {
        let deadline = Date().addingTimeInterval(60)
        while !condition(), Date() < deadline { await Task.yield() }
        XCTAssertTrue(condition(), what)
    }

    /// The estimate of the 800×600 JPEG enlarged into `side`×`side` and encoded as PNG.
    private func estimate(enlargedTo side: Int) -> Int {
        var geometry = RenderMemoryEstimate.Geometry()
        geometry.width = side
        geometry.height = side
        geometry.enlarges = true
        let info = ImageInfo(
            width: 800, height: 600, format: .jpeg, bands: 3, hasAlpha: false, orientation: 1, pages: 1)
        return RenderMemoryEstimate(info: info, geometry: geometry, format: .png()).bytes
    }

    func testTwoLargeRendersDoNotRunAtOnce() async throws {
        let large = estimate(enlargedTo: 1600)
        // Room for one large render, not two.
        let server = try makeServer(budget: large * 3 / 2)
        XCTAssertEqual(metric(server, "vipsload_memory_admission_budget_bytes"), Double(large * 3 / 2))
        // The first large render, holding its estimate (the test's own ticket, so it lasts until released).
        let first = try await server.router.images.admission.acquire(large)
        let waiting = try TestConnection(port: server.port)
        try waiting.sendRequest("/insecure/rs:fit:1600:1600:1/plain/local:///photo.jpg@png")
        await waitFor("the second large render waits for memory") {
            metric(server, "vipsload_memory_admission_waiters") == 1
        }
        XCTAssertEqual(metric(server, "vipsload_memory_admission_bytes"), Double(large), "only the first holds memory")
        first.release()
        let response = try waiting.readResponse()
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(ImageFormat.sniff(response.body.prefix(64)), .png)
        await waitFor("the render gave its memory back") { metric(server, "vipsload_memory_admission_bytes") == 0 }
        // Four distinct large renders at once: all are made, never two at a time.
        let connections = try (0..<4).map { _ in try TestConnection(port: server.port) }
        for (index, connection) in connections.enumerated() {
            try connection.sendRequest("/insecure/rs:fit:1600:1600:1/cb:\(index)/plain/local:///photo.jpg@png")
        }
        for connection in connections { XCTAssertEqual(try connection.readResponse().status, 200) }
        let gate = server.router.images.admission.snapshot
        XCTAssertEqual(gate.peakBytesInUse, large, "one large render at a time")
        XCTAssertEqual(gate.bytesInUse, 0)
        XCTAssertEqual(gate.waiters, 0)
    }

    func testARenderOverTheWholeBudgetIs422WithoutAPath() async throws {
        let server = try makeServer(budget: estimate(enlargedTo: 1600))
        let response = try TestConnection(port: server.port).request(
            "/insecure/rs:fit:4000:4000:1/plain/local:///photo.jpg@avif")
        XCTAssertEqual(response.status, 422)
        XCTAssertTrue(response.text.contains("memory budget"), response.text)
        XCTAssertFalse(response.text.contains(root.path), response.text)
        XCTAssertFalse(response.text.contains("/tmp"), response.text)
        XCTAssertEqual(metric(server, "vipsload_memory_admission_refusals_total"), 1)
        XCTAssertEqual(metric(server, "vipsload_memory_admission_bytes"), 0)
        // A thumbnail of the same source fits.
        XCTAssertEqual(
            try TestConnection(port: server.port).request("/insecure/rs:fit:300:300/plain/local:///photo.jpg").status,
            200)
    }
}
