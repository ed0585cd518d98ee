import Foundation
import TestSupport
import VipsCore
import VipsSynthesis
import XCTest

/// `vipsload thumb` with credentials in URLs (issue 13, item 7): they are
/// sent, and appear neither on stderr nor in the disk cache's files.
final class ThumbCredentialTests: XCTestCase {
    func testCredentialsInURLsReachNeitherStderrNorTheCacheFolder() throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let secret = "pw-\(UUID().uuidString.prefix(8))"
        server.route(
            "/ok.jpg",
            .ok(
                try ImageSynthesizer.data(width: 200, height: 100, seed: 3, format: .jpeg(quality: 85)),
                // An ETag: its thumbnail is kept in the cache too, keyed by the URL (ThumbCache).
                headers: [("Cache-Control", "max-age=600"), ("ETag", "\"ok1\"")]))
        server.route("/missing.jpg", .status(404))
        server.route("/away.jpg", .redirect(to: "file:///etc/passwd"))
        let folder = try CLIHarness.temporaryFolder(for: self)
        let cache = folder.appendingPathComponent("cache")
        let out = folder.appendingPathComponent("out")

        let urls = ["/ok.jpg", "/missing.jpg", "/away.jpg"].map {
            server.url($0, user: "carol", password: secret).absoluteString
        }
        let result = try CLIHarness.run(["thumb", "--size", "50", "--cache-dir", cache.path, "--out", out.path] + urls)
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertFalse(result.stderr.contains(secret), result.stderr)
        XCTAssertTrue(
            result.stderr.contains("http://***@127.0.0.1:\(server.port)/missing.jpg: httpStatus: HTTP 404"),
            result.stderr)
        XCTAssertTrue(result.stderr.contains("/away.jpg: redirectRefused"), result.stderr)
        XCTAssertTrue(result.stderr.contains("1 written, 0 skipped, 2 failed"), result.stderr)
        XCTAssertEqual(try ImageDecoder().info(.file(out.appendingPathComponent("ok.jpg").path)).width, 50)
        XCTAssertEqual(
            server.requests("/ok.jpg").first?.header("Authorization"),
            "Basic " + Data("carol:\(secret)".utf8).base64EncodedString())

        var files = 0
        let enumerator = FileManager.default.enumerator(atPath: cache.path)
        while let relative = enumerator?.nextObject() as? String {
            guard let bytes = FileManager.default.contents(atPath: cache.appendingPathComponent(relative).path) else {
                continue
            }
            files += 1
            XCTAssertNil(bytes.range(of: Data(secret.utf8)), "\(relative) holds the password")
        }
        XCTAssertGreaterThanOrEqual(files, 4, "the original's and the thumbnail's body and metadata were checked")
    }
}
