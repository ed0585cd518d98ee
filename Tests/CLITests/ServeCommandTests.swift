import Foundation
import TestSupport
import VipsCore
import VipsSynthesis
import XCTest

/// `vipsload serve` as a user runs it: a real child process, real
/// connections, real signals.
final class ServeCommandTests: XCTestCase {
    /// Ended and released in `tearDown` (XCTest keeps what a teardown block captures until the run ends).
    private var children: [ServeChild] = []

    override func tearDown() {
        for child in children { child.stop() }
        children = []
    }

    private func start(_ arguments: [String] = []) throws -> ServeChild {
        let child = try ServeChild(arguments)
        children.append(child)
        return child
    }

    /// GET `url` with curl: status and body.
    private func curl(_ url: URL, _ extra: [String] = []) throws -> (status: Int, body: String) {
        let result = try Self.runCurl(["-s", "-w", "\n%{http_code}", url.absoluteString] + extra)
        var lines = result.split(separator: "\n", omittingEmptySubsequences: false)
        let status = Int(lines.popLast() ?? "") ?? 0
        return (status, lines.joined(separator: "\n"))
    }

    static func runCurl(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    func testItListensOnAFreePortServesHealthAndExitsZeroOnSIGTERM() throws {
        let child = try start()
        XCTAssertGreaterThan(child.port, 0)
        let health = try curl(child.url("/health"))
        XCTAssertEqual(health.status, 200)
        XCTAssertEqual(health.body, "ok\n")
        XCTAssertNotNil(child.waitForLine(containing: "\"GET /health\" 200 3 "), "an access-log line: \(child.stderr)")
        child.send(SIGTERM)
        let result = child.wait()
        XCTAssertEqual(result.reason, .exit)
        XCTAssertEqual(result.status, 0, child.stderr)
        XCTAssertTrue(child.stderr.contains("stopped"), child.stderr)
    }

    func testSIGTERMLetsImagesInFlightFinishRefusesNewOnesWith503AndExitsZero() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("vipsload-serve-drain-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let photo = try ImageSynthesizer.data(width: 640, height: 480, seed: 7, format: .jpeg(quality: 90))
        try photo.write(to: folder.appendingPathComponent("photo.jpg"))
        let origin = try TestHTTPServer()
        defer { origin.stop() }
        let arrived = expectation(description: "the origin has the request")
        arrived.assertForOverFulfill = false
        let release = DispatchSemaphore(value: 0)
        origin.route("/held.jpg") { _ in
            arrived.fulfill()
            release.wait()
            return .ok(photo)
        }
        let child = try start([
            "--root", folder.path, "--allow-source", "127.0.0.1:*", "--allow-private-sources", "--drain-timeout", "60"
        ])
        let local = try TestConnection(port: child.port)
        XCTAssertEqual(try local.request("/insecure/w:64/plain/local:///photo.jpg@png").status, 200)
        let inFlight = try TestConnection(port: child.port)
        try inFlight.sendRequest("/insecure/w:80/plain/\(origin.url("/held.jpg").absoluteString)@webp")
        wait(for: [arrived], timeout: 60)
        child.send(SIGTERM)
        // The server's own line, logged once new requests get 503; the command's
        // "terminated; draining" line comes before the server has begun.
        XCTAssertNotNil(child.waitForLine(containing: "draining: "), child.stderr)
        // A new request on a connection that was open before: 503, and the connection closes.
        let refused = try local.request("/insecure/w:65/plain/local:///photo.jpg@png")
        XCTAssertEqual(refused.status, 503)
        XCTAssertEqual(refused.header("Connection")?.lowercased(), "close")
        release.signal()
        let finished = try inFlight.readResponse()
        XCTAssertEqual(finished.status, 200, "the request in flight completes")
        XCTAssertEqual(finished.header("Content-Type"), "image/webp")
        let result = child.wait()
        XCTAssertEqual(result.reason, .exit)
        XCTAssertEqual(result.status, 0, child.stderr)
    }

    func testKeysSaltsAndSourcePatternsAreChecked() throws {
        let child = try start(["--key", "0123abcd", "--salt", "4567ef01"])
        let connection = try TestConnection(port: child.port)
        XCTAssertEqual(try connection.request("/insecure/w:10/plain/local:///x.jpg").status, 403, "signed URLs only")
        child.send(SIGTERM)
        XCTAssertEqual(child.wait().status, 0)
        for arguments in [
            ["--key", "00"], ["--key", "zz", "--salt", "00"], ["--key", "", "--salt", ""],
            ["--allow-source", "http://x/y"]
        ] {
            let bad = try CLIHarness.run(["serve", "--port", "0"] + arguments)
            XCTAssertEqual(bad.status, 2, "\(arguments): \(bad.stderr)")
            XCTAssertFalse(bad.stderr.isEmpty, "the reason, on stderr")
        }
    }

    func testEncodingFlagsReachTheServerAndBadListsAreUsageErrors() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("vipsload-serve-output-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try ImageSynthesizer.data(width: 200, height: 100, seed: 1, format: .webp())
            .write(to: folder.appendingPathComponent("a.webp"))
        let child = try start([
            "--root", folder.path, "--preferred-formats", "png,jpeg", "--auto-avif", "--format-quality", "avif=30",
            "--quality", "50", "--client-hints"
        ])
        let connection = try TestConnection(port: child.port)
        let kept = try connection.request("/insecure/plain/local:///a.webp", headers: ["Width": "50"])
        XCTAssertEqual(kept.status, 200, kept.text)
        XCTAssertEqual(kept.header("Content-Type"), "image/png", "the first preferred format that holds it")
        XCTAssertEqual(kept.header("Vary"), "Accept, Sec-CH-DPR, DPR, Sec-CH-Width, Width")
        XCTAssertEqual(try ImageDecoder().decode(.data(kept.body)).width, 50, "Width hint")
        let avif = try connection.request("/insecure/w:40/plain/local:///a.webp", headers: ["Accept": "image/avif"])
        XCTAssertEqual(avif.header("Content-Type"), "image/avif")
        child.send(SIGTERM)
        XCTAssertEqual(child.wait().status, 0)
        for arguments in [
            ["--quality", "0"], ["--format-quality", "avif"], ["--format-quality", "foo=10"],
            ["--format-quality", "webp=101"], ["--preferred-formats", "svg"], ["--preferred-formats", ","]
        ] {
            let bad = try CLIHarness.run(["serve", "--port", "0"] + arguments)
            XCTAssertEqual(bad.status, 2, "\(arguments): \(bad.stderr)")
            XCTAssertFalse(bad.stderr.isEmpty, "the reason, on stderr")
        }
    }

    func testSIGINTDrainsToo() throws {
        let child = try start()
        child.send(SIGINT)
        let result = child.wait()
        XCTAssertEqual(result.status, 0, child.stderr)
        XCTAssertTrue(child.stderr.contains("interrupted; draining"), child.stderr)
    }

    func testTheJSONLogHasOneObjectPerLine() throws {
        let child = try start(["--log-format", "json"])
        XCTAssertEqual(try curl(child.url("/metrics")).status, 200)
        let line = try XCTUnwrap(child.waitForLine(containing: "\"target\":\"/metrics\""), child.stderr)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        XCTAssertEqual(object["status"] as? Int, 200)
        XCTAssertEqual(object["method"] as? String, "GET")
        XCTAssertEqual(object["client"] as? String, "127.0.0.1")
        XCTAssertNotNil(object["seconds"] as? Double)
        child.send(SIGTERM)
        XCTAssertEqual(child.wait().status, 0)
        let events = child.stderr.split(separator: "\n").filter { $0.contains("\"event\"") }
        XCTAssertFalse(events.isEmpty)
        for event in events {
            XCTAssertNotNil(try JSONSerialization.jsonObject(with: Data(event.utf8)) as? [String: Any], String(event))
        }
    }

    func testHeaderTimeoutClosesAConnectionWhoseHeaderIsNotComplete() throws {
        let child = try start(["--header-timeout", "1"])
        let client = try TestConnection(port: child.port)
        let started = Date()
        try client.send("GET /health HTTP/1.1\r\nX-Slow: a")
        // The idle timeout (30 s by default) would close it too, much later.
        XCTAssertTrue(try client.serverClosed(), "closed without an answer")
        XCTAssertLessThan(Date().timeIntervalSince(started), 10, "closed at the 1 s header deadline")
        XCTAssertEqual(try curl(child.url("/health")).status, 200)
    }

    func testAPortInUseExitsOneAndUsageErrorsExitTwo() throws {
        let child = try start()
        let taken = try CLIHarness.run(["serve", "--bind", "127.0.0.1", "--port", String(child.port)])
        XCTAssertEqual(taken.status, 1, taken.stderr)
        XCTAssertTrue(taken.stderr.contains("cannot listen on 127.0.0.1:\(child.port)"), taken.stderr)
        for arguments in [
            ["serve", "--port", "70000"], ["serve", "--cache-size", "10"], ["serve", "--log-format", "xml"],
            ["serve", "--bind", "not-an-address", "--port", "0"], ["serve", "extra"],
            ["serve", "--root", "/no/such/dir"], ["serve", "--header-timeout", "-1"]
        ] {
            let result = try CLIHarness.run(arguments)
            XCTAssertEqual(
                result.status, arguments.contains("not-an-address") ? 1 : 2, "\(arguments): \(result.stderr)")
        }
        let help = try CLIHarness.run(["help", "serve"])
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.stdout.contains("--drain-timeout"))
        XCTAssertTrue(try CLIHarness.run(["help"]).stdout.contains("serve"))
    }
}
