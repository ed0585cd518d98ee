import Foundation
import TestSupport
import VipsLoad
import VipsSynthesis
import XCTest

@testable import VipsHTTP
@testable import VipsServe

/// Issue 30, finding 1, as a client of the server saw it: with
/// `127.0.0.1:P` and `nonexistent.invalid:P` both allowed, requests for
/// 127.0.0.1, then the unresolvable name, then 127.0.0.1 again were answered
/// 200, 502, then 400 (and every later remote load 400): the failed lookup
/// spoiled the transfer handle the next download reused.
///
/// The name is looked up in a network namespace of its own, so no DNS query
/// leaves the machine: the outer test runs this test binary again under
/// `unshare -n` to run `testInsideItsOwnNetworkNamespace`, which starts the
/// origin and the server on that namespace's loopback.
final class ServeFailedLookupTests: XCTestCase {
    private static let variable = "VIPSLOAD_TEST_SERVE_NETNS"

    func testAFailedLookupDoesNotBreakLaterRemoteSources() throws {
        let launcher: [String]
        do {
            launcher = try NetworkNamespace.launcher()
        } catch {
            throw XCTSkip(error.description)
        }
        let child = Process()
        child.executableURL = URL(fileURLWithPath: launcher[0])
        child.arguments =
            Array(launcher.dropFirst()) + [
                URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path,
                "VipsServeTests.ServeFailedLookupTests/testInsideItsOwnNetworkNamespace"
            ]
        var environment = ProcessInfo.processInfo.environment
        environment[Self.variable] = "1"
        child.environment = environment
        let output = Pipe()
        child.standardOutput = output
        child.standardError = output
        try child.run()
        let transcript = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        child.waitUntilExit()
        XCTAssertEqual(child.terminationStatus, 0, transcript)
        XCTAssertTrue(transcript.contains("STATUSES 200 502 200 200 502 200 200 502 200"), transcript)
    }

    /// The child's part (skipped in a normal run): three rounds of
    /// 127.0.0.1, `nonexistent.invalid`, 127.0.0.1, each at a new width and
    /// without a memory cache, so that every one downloads its source.
    func testInsideItsOwnNetworkNamespace() throws {
        guard ProcessInfo.processInfo.environment[Self.variable] == "1" else {
            throw XCTSkip(
                "runs only inside the network namespace testAFailedLookupDoesNotBreakLaterRemoteSources makes")
        }
        let origin = try TestHTTPServer()
        defer { origin.stop() }
        origin.route(
            "/photo.jpg", .ok(try ImageSynthesizer.data(width: 200, height: 150, seed: 1, format: .jpeg(quality: 90))))
        var pipeline = ImagePipeline.Configuration(decodeConcurrency: 1, memoryCache: nil)
        pipeline.http.addressPolicy = SourceAddressPolicy(
            allowedScopes: [.public], allowedNetworks: [IPNetwork("127.0.0.1/32")].compactMap { $0 })
        var configuration = ImageServer.Configuration()
        configuration.port = 0
        configuration.urls = ProcessingURLParser(
            sources: try SourcePolicy(
                allowedSources: [
                    try SourcePattern("127.0.0.1:\(origin.port)"),
                    try SourcePattern("nonexistent.invalid:\(origin.port)")
                ]))
        let server = try ImageServer(pipeline: ImagePipeline(configuration: pipeline), configuration: configuration)
        var statuses: [Int] = []
        for _ in 0..<3 {
            for host in ["127.0.0.1", "nonexistent.invalid", "127.0.0.1"] {
                let width = 50 + statuses.count
                let target = "/insecure/w:\(width)/plain/http://\(host):\(origin.port)/photo.jpg"
                statuses.append(try TestConnection(port: server.port).request(target).status)
            }
        }
        let done = expectation(description: "shutdown")
        Task {
            await server.shutdown()
            done.fulfill()
        }
        wait(for: [done], timeout: 60)
        print("STATUSES " + statuses.map(String.init).joined(separator: " "))
        XCTAssertEqual(statuses, [200, 502, 200, 200, 502, 200, 200, 502, 200])
    }
}
