import Foundation
import VipsLoad
import VipsServe
import XCTest

/// Local sources stay under the root in every encoding of a traversal, and
/// HTTP sources need an allowed host; refusals are 403, missing files 404,
/// and no message carries a path of the machine.
final class SourcePolicyTests: XCTestCase {
    private var folder: URL!
    private var root: URL!
    private var policy: SourcePolicy!

    override func setUpWithError() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("vipsserve-sources-\(UUID().uuidString)")
        root = folder.appendingPathComponent("img")
        let manager = FileManager.default
        try manager.createDirectory(at: root.appendingPathComponent("sub dir"), withIntermediateDirectories: true)
        try manager.createDirectory(at: folder.appendingPathComponent("images"), withIntermediateDirectories: true)
        try Data("inside".utf8).write(to: root.appendingPathComponent("a.jpg"))
        try Data("inside".utf8).write(to: root.appendingPathComponent("sub dir/b@2x.jpg"))
        try Data("inside".utf8).write(to: root.appendingPathComponent("%2e%2e"))
        try Data("secret".utf8).write(to: folder.appendingPathComponent("secret.jpg"))
        try Data("sibling".utf8).write(to: folder.appendingPathComponent("images/c.jpg"))
        // Links: one inside the root, two leaving it (one to a sibling folder sharing the root's prefix).
        try manager.createSymbolicLink(
            atPath: root.appendingPathComponent("inner.jpg").path, withDestinationPath: "a.jpg")
        try manager.createSymbolicLink(
            atPath: root.appendingPathComponent("outer.jpg").path, withDestinationPath: "../secret.jpg")
        try manager.createSymbolicLink(
            atPath: root.appendingPathComponent("sibling").path,
            withDestinationPath: folder.appendingPathComponent("images").path)
        try manager.createSymbolicLink(
            atPath: root.appendingPathComponent("dangling.jpg").path, withDestinationPath: "../nothing.jpg")
        XCTAssertEqual(mkfifo(root.appendingPathComponent("fifo.jpg").path, 0o600), 0)
        policy = try SourcePolicy(
            localRoot: root.path,
            allowedSources: [
                "example.com", "*.cdn.example.org", "https://secure.example.net", "port.example.com:8080",
                "http://any.example.com:*", "127.0.0.1", "[::1]:8443"
            ].map { try SourcePattern($0) })
    }

    override func tearDown() {
        if let folder { try? FileManager.default.removeItem(at: folder) }
    }

    private func parse(_ target: String) throws(ProcessingURLError) -> ProcessingRequest {
        try ProcessingURLParser(sources: policy).parse(target)
    }

    private func assertServes(_ target: String, _ file: String, line: UInt = #line) {
        do {
            let request = try parse(target)
            let expected = try XCTUnwrap(SourcePolicyTests.realPath(root.appendingPathComponent(file).path))
            XCTAssertEqual(request.imageRequest.source.filePath, expected, target, line: line)
        } catch {
            XCTFail("\(target): \(error)", line: line)
        }
    }

    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// `status` 403 stands for a refusal by the policy: imgproxy's 404 with the reason `.sourceNotAllowed`.
    private func assertRefused(_ target: String, status: Int, line: UInt = #line) {
        do {
            let request = try parse(target)
            XCTFail("\(target) served \(request.imageRequest.source)", line: line)
        } catch {
            if status == 403 {
                XCTAssertEqual(error.reason, .sourceNotAllowed, "\(target): \(error)", line: line)
                XCTAssertEqual(error.status, 404, "\(target): \(error)", line: line)
            } else {
                XCTAssertEqual(error.status, status, "\(target): \(error)", line: line)
            }
            XCTAssertFalse(
                error.message.contains(folder.path), "\(target): the message shows a path: \(error)", line: line)
            XCTAssertFalse(error.message.contains("/tmp"), "\(target): the message shows a path: \(error)", line: line)
        }
    }

    private func base64URL(_ text: String) -> String {
        Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    func testFilesUnderTheRootAreServed() {
        assertServes("/_/plain/local:///a.jpg", "a.jpg")
        assertServes("/_/w:10/plain/local:///sub%20dir/b%402x.jpg@png", "sub dir/b@2x.jpg")
        assertServes("/_/\(base64URL("local:///sub dir/b@2x.jpg"))", "sub dir/b@2x.jpg")
        assertServes("/_/plain/local:///./a.jpg", "a.jpg")
        assertServes("/_/plain/local:////a.jpg", "a.jpg")
        assertServes("/_/plain/local:/a.jpg", "a.jpg")
        assertServes("/_/plain/local:///inner.jpg", "a.jpg")
        // A double-encoded ".." is a file name, not a traversal.
        assertServes("/_/plain/local:///%252e%252e", "%2e%2e")
    }

    func testTraversalInEveryEncodingIsRefused() {
        let escapes = [
            "../secret.jpg", "%2e%2e/secret.jpg", "%2E%2E/secret.jpg", ".%2e/secret.jpg", "sub%20dir/../../secret.jpg",
            "..%2fsecret.jpg", "..%2Fsecret.jpg", "%2e%2e%2fsecret.jpg", "..%5csecret.jpg", "..%5Csecret.jpg",
            "a.jpg%00.png", "sub%20dir%2f..%2f..%2fsecret.jpg", "..\\secret.jpg", "%2e%2e%5csecret.jpg",
            "a/../../secret.jpg"
        ]
        for escape in escapes { assertRefused("/_/plain/local:///\(escape)", status: 403) }
        for escape in ["../secret.jpg", "sub dir/../../secret.jpg", "..\\secret.jpg", "a.jpg\u{0}.png"] {
            assertRefused("/_/\(base64URL("local:///" + escape))", status: 403)
        }
        // A combining mark after the slash: one Character with it, but the kernel still sees "..".
        assertRefused("/_/\(base64URL("local:///../\u{301}secret.jpg"))", status: 403)
        assertRefused("/_/plain/local:///%2E%2E/%CC%81secret.jpg", status: 403)
        assertRefused("/_/\(base64URL("local:///..\u{301}/../secret.jpg"))", status: 403)
        // Links that leave the root, to a file and to a sibling folder whose name starts like the root's.
        assertRefused("/_/plain/local:///outer.jpg", status: 403)
        assertRefused("/_/plain/local:///sibling/c.jpg", status: 403)
    }

    func testMissingAndNonRegularFilesAre404() {
        assertRefused("/_/plain/local:///missing.jpg", status: 404)
        assertRefused("/_/plain/local:///a.jpg/x", status: 404)
        assertRefused("/_/plain/local:///dangling.jpg", status: 404)
        assertRefused("/_/plain/local:///sub%20dir", status: 404)
        assertRefused("/_/plain/local:///fifo.jpg", status: 404)
        assertRefused("/_/plain/local:///", status: 404)
    }

    func testLocalSourcesNeedARootAndThreeSlashes() throws {
        let noRoot = ProcessingURLParser(sources: try SourcePolicy())
        XCTAssertThrowsError(try noRoot.parse("/_/plain/local:///a.jpg")) { error in
            XCTAssertEqual((error as? ProcessingURLError)?.reason, .sourceNotAllowed)
        }
        assertRefused("/_/plain/local://host/a.jpg", status: 403)
        XCTAssertThrowsError(try SourcePolicy(localRoot: folder.appendingPathComponent("none").path))
        XCTAssertThrowsError(try SourcePolicy(localRoot: root.appendingPathComponent("a.jpg").path))
    }

    func testHTTPSourcesNeedAnAllowedHost() throws {
        let allowed = [
            "http://example.com/a.jpg", "https://EXAMPLE.com./a.jpg", "https://example.com:443/a.jpg",
            "http://a.cdn.example.org/x.jpg", "https://a.b.cdn.example.org/x.jpg", "https://secure.example.net/x",
            "http://port.example.com:8080/x", "https://port.example.com:8080/x", "http://any.example.com:9999/x",
            "http://127.0.0.1/x", "https://[::1]:8443/x", "http://example.com/a%20b.jpg?w=1#f"
        ]
        for url in allowed {
            XCTAssertNoThrow(try parse("/_/\(base64URL(url))"), url)
        }
        let request = try parse("/_/plain/http://example.com/a%2520b%3Fq%3D1")
        XCTAssertEqual(request.imageRequest.source, .url(URL(string: "http://example.com/a%20b?q=1")!))
        XCTAssertEqual(
            try parse("/_/\(base64URL("http://example.com/a b|ü.jpg"))").imageRequest.source.key,
            "http://example.com/a%20b%7C%C3%BC.jpg")
        let refused = [
            "http://evil.com/a.jpg", "http://example.com.evil.com/a.jpg", "http://cdn.example.org/x.jpg",
            "http://badcdn.example.org/x.jpg", "http://secure.example.net/x", "http://example.com:8080/x",
            "http://port.example.com/x", "https://any.example.com:1/x", "http://127.0.0.2/x", "http://[::1]/x",
            "http://user:pass@example.com/a.jpg", "http://example.com@evil.com/a.jpg", "http://evil.com\\@example.com/",
            "http://%65xample.com/a.jpg", "http://exa mple.com/", "ftp://example.com/a.jpg", "file:///etc/passwd",
            "s3://bucket/a.jpg", "data:image/png;base64,AAAA", "//example.com/a.jpg", "example.com/a.jpg",
            "http:///a.jpg", "http://example.com\n/a.jpg"
        ]
        for url in refused {
            XCTAssertThrowsError(try parse("/_/\(base64URL(url))"), url) { error in
                let status = (error as? ProcessingURLError)?.status
                XCTAssertEqual(status, 404, "\(url): \(error)")
            }
        }
        let noHosts = ProcessingURLParser(sources: try SourcePolicy(localRoot: root.path))
        XCTAssertThrowsError(try noHosts.parse("/_/plain/http://example.com/a.jpg")) { error in
            XCTAssertEqual((error as? ProcessingURLError)?.reason, .sourceNotAllowed)
        }
    }

    /// A redirect's target passes exactly what a source a client names
    /// passes: the allowed scheme, host and port, no credentials, http(s) only.
    func testARedirectTargetPassesTheSameCheckAsASource() throws {
        let policy = try SourcePolicy(
            allowedSources: [try SourcePattern("https://images.example.com"), try SourcePattern("*.cdn.example:8080")])
        let cases: [(String, Bool)] = [
            ("https://images.example.com/a.jpg", true),
            ("https://IMAGES.example.com./a.jpg", true),
            ("http://images.example.com/a.jpg", false),
            ("https://images.example.com:8443/a.jpg", false),
            ("https://other.example.com/a.jpg", false),
            ("https://user:pass@images.example.com/a.jpg", false),
            ("http://a.cdn.example:8080/b.jpg", true),
            ("http://a.cdn.example/b.jpg", false),
            ("http://cdn.example:8080/b.jpg", false),
            ("file:///etc/passwd", false),
            ("ftp://images.example.com/a.jpg", false)
        ]
        for (text, allowed) in cases {
            let url = try XCTUnwrap(URL(string: text), text)
            XCTAssertEqual(policy.allowsRedirect(to: url), allowed, text)
            XCTAssertEqual((try? policy.source(for: text)) != nil, allowed, "a direct request agrees: \(text)")
        }
        XCTAssertFalse(SourcePolicy.none.allowsRedirect(to: try XCTUnwrap(URL(string: "https://images.example.com/"))))
    }

    func testPatternSyntax() throws {
        XCTAssertEqual(try SourcePattern("Example.COM").description, "example.com")
        XCTAssertEqual(try SourcePattern("HTTPS://*.Example.com:*/").description, "https://*.example.com:*")
        XCTAssertEqual(try SourcePattern("[FD00::1]:8443").description, "[fd00::1]:8443")
        XCTAssertEqual(try SourcePattern("xn--tda.com").host, "xn--tda.com")
        for bad in [
            "", "*", "*.", "a.*.com", "*example.com", "ftp://example.com", "example.com/path", "user@example.com",
            "example.com:0", "example.com:65536", "example.com:x", "fd00::1", "[10.0.0.1]", "*.10.0.0.1", "[::1",
            "exa mple.com", "a..b"
        ] {
            XCTAssertThrowsError(try SourcePattern(bad), bad) { error in
                XCTAssertEqual((error as? VipsError)?.kind, .invalidArgument, bad)
            }
        }
        let wildcard = try SourcePattern("*.example.com")
        XCTAssertTrue(wildcard.matches(scheme: "https", host: "a.example.com", port: nil))
        XCTAssertFalse(wildcard.matches(scheme: "https", host: "example.com", port: nil))
        XCTAssertFalse(wildcard.matches(scheme: "https", host: "aexample.com", port: nil))
        XCTAssertFalse(wildcard.matches(scheme: "https", host: "a.example.com", port: 8443))
    }
}
