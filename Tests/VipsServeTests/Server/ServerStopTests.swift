import Foundation
import TestSupport
import VipsLoad
import VipsServe
import VipsSynthesis
import XCTest

/// A server stopped while renders run: libmicrohttpd aborts the process when
/// it is stopped with a connection still suspended, so every request in
/// flight must be answered or closed before the daemon stops.
final class ServerStopTests: XCTestCase {
    private var root: URL!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("vipsserve-stop-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try ImageSynthesizer.data(width: 1600, height: 1200, seed: 3, format: .jpeg(quality: 90))
            .write(to: root.appendingPathComponent("photo.jpg"))
    }

    override func tearDownWithError() throws {
        if let root { try? FileManager.default.removeItem(at: root) }
    }

    private func metric(_ server: ImageServer, _ name: String) -> Double {
        let line = server.metricsText.split(separator: "\n").first { $0.hasPrefix(name + " ") }
        return Double(line?.split(separator: " ").last ?? "") ?? -1
    }

    /// Twenty rounds: six renders of a local file start (decoding and
    /// encoding on the pipeline's threads), the server is stopped with almost
    /// no time to drain, and is let go at once with its pipeline. Every
    /// request gets a 200 that beat the stop, a 503, or a closed connection,
    /// never a hang, and the process survives (it aborted in about one run in
    /// three before `HTTPServer.stop` closed the requests still suspended).
    func testStoppingAServerWhileRendersRunLeavesNothingBehind() async throws {
        for round in 0..<20 {
            var configuration = ImageServer.Configuration()
            configuration.port = 0
            configuration.drainTimeout = .milliseconds(round % 2 == 0 ? 1 : 30)
            configuration.urls = ProcessingURLParser(sources: try SourcePolicy(localRoot: root.path))
            let server = try ImageServer(
                pipeline: ImagePipeline(configuration: ImagePipeline.Configuration(decodeConcurrency: 1)),
                configuration: configuration)
            let connections = try (0..<6).map { _ in try TestConnection(port: server.port) }
            for (index, connection) in connections.enumerated() {
                try connection.sendRequest("/insecure/rs:fit:\(300 + index):300/plain/local:///photo.jpg@png")
            }
            let deadline = Date().addingTimeInterval(60)
            while metric(server, "vipsload_renders_total") < 1, Date() < deadline { await Task.yield() }
            XCTAssertGreaterThanOrEqual(metric(server, "vipsload_renders_total"), 1, "the renders started")
            await server.shutdown()
            for connection in connections {
                if let response = try? connection.readResponse() {
                    XCTAssertTrue([200, 503].contains(response.status), "round \(round): \(response.status)")
                }
            }
        }
    }
}
