import Foundation
import TestSupport
import VipsLoad
import XCTest

@testable import VipsServe

/// The events `ImageServerLogging.event` documents, in order: listening, draining, stopped.
final class ServerListeningEventTests: XCTestCase {
    func testTheServerReportsListeningBeforeItsInitReturnsThenDrainingAndStopped() async throws {
        for address in ["127.0.0.1", "::1"] {
            let log = RecordingLog()
            var configuration = ImageServer.Configuration()
            configuration.address = address
            configuration.port = 0
            configuration.log = log
            let server = try ImageServer(
                pipeline: ImagePipeline(configuration: ImagePipeline.Configuration(decodeConcurrency: 1)),
                configuration: configuration)
            let host = address.contains(":") ? "[\(address)]" : address
            XCTAssertEqual(log.messages, ["listening on http://\(host):\(server.port)"])
            await server.shutdown()
            let messages = log.messages
            XCTAssertEqual(messages.count, 3, "\(messages)")
            XCTAssertTrue(messages.dropFirst().first?.hasPrefix("draining") == true, "\(messages)")
            XCTAssertEqual(messages.last, "stopped")
        }
    }
}
