import Foundation
import TestSupport
import XCTest

@testable import VipsLoad

/// Servers that break or stretch HTTP (issue 13): interim responses, redirects
/// to local schemes, contradictory lengths, a redirect without a target,
/// garbage, huge headers, credentials in URLs. Each against the real server.
final class NetworkProtocolFaultTests: NetworkTestCase {
    // MARK: Item 2: interim responses

    func testEarlyHintsAndAnUnrequestedContinueBeforeTheResponseAreSkipped() async throws {
        let jpeg = try NetworkFixtures.jpeg(seed: 21)
        server.route(
            "/hints.jpg",
            TestHTTPServer.Response(headers: [("Content-Type", "image/jpeg")], body: .data(jpeg), interim: [103]))
        server.route(
            "/continue.jpg",
            TestHTTPServer.Response(
                headers: [("Content-Type", "image/jpeg")], body: .data(jpeg),
                interim: [100, 103, 103]))
        let loader = makeLoader()
        for path in ["/hints.jpg", "/continue.jpg"] {
            let data = try await load(loader, path)
            XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg, path)
        }
        // Into the cache too: the final response's validators are the ones kept.
        let cache = try makeCache()
        server.route(
            "/cached.jpg",
            TestHTTPServer.Response(
                headers: [
                    ("Content-Type", "image/jpeg"), ("ETag", "\"v1\""),
                    ("Cache-Control", "max-age=600")
                ],
                body: .data(jpeg), interim: [103]))
        let cached = try await load(makeLoader(cache: cache), "/cached.jpg")
        XCTAssertEqual(NetworkFixtures.contents(of: cached), jpeg)
        XCTAssertEqual(cache.entry(for: server.url("/cached.jpg").absoluteString)?.http?.etag, "\"v1\"")
        // An interim response and then nothing is no response at all: a network failure, not "HTTP 103".
        server.route("/hints-only", .raw(Data("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n".utf8)))
        await assertLoadFails(loader, "/hints-only", kind: .network)
        XCTAssertEqual(leftoverFiles(), [])
    }

    // MARK: Item 3: redirects to other schemes

    func testRedirectsToFileDataAndOtherSchemesAreRefusedBeforeAnyRequest() async throws {
        let loader = makeLoader()
        let targets = [
            "file:///etc/passwd", "FILE:///img/x.jpg", "data:image/jpeg;base64,/9j/4AAQ", "ftp://127.0.0.1/x.jpg",
            "javascript:alert(1)"
        ]
        for (index, target) in targets.enumerated() {
            server.route("/r\(index)", .redirect(to: target))
            await assertLoadFails(loader, "/r\(index)", kind: .redirectRefused, containing: "only http and https")
        }
        // None was rewritten onto this host (as FoundationNetworking did): only the redirects were asked for.
        XCTAssertEqual(server.totalRequestCount, targets.count, "only the redirects themselves were requested")
        XCTAssertEqual(server.requestCount("/etc/passwd"), 0)
        XCTAssertEqual(server.requestCount("/img/x.jpg"), 0)

        // Relative and absolute http(s) targets are still followed.
        let jpeg = try NetworkFixtures.jpeg(seed: 22)
        server.route("/final.jpg", .ok(jpeg))
        server.route("/relative", .redirect(to: "final.jpg"))
        server.route("/absolute", .redirect(to: server.url("/final.jpg").absoluteString, status: 307))
        for path in ["/relative", "/absolute"] {
            let data = try await load(loader, path)
            XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg, path)
        }
    }

    func testTheSchemeOfALocationIsReadAsRFC3986Says() {
        XCTAssertEqual(HTTPTransfer.scheme(ofReference: " FILE:///x"), "file")
        XCTAssertEqual(HTTPTransfer.scheme(ofReference: "data:,x"), "data")
        XCTAssertEqual(HTTPTransfer.scheme(ofReference: "HTTPS://h/x"), "https")
        XCTAssertNil(HTTPTransfer.scheme(ofReference: "/a:b"))
        XCTAssertNil(HTTPTransfer.scheme(ofReference: "//host/x"))
        XCTAssertNil(HTTPTransfer.scheme(ofReference: "b.jpg?at=1:2"))
        XCTAssertNil(HTTPTransfer.scheme(ofReference: "1x:y"))
    }

    // MARK: Item 4: contradictory Content-Length

    func testTwoDifferentContentLengthsAreAProtocolErrorAndNothingIsCached() async throws {
        let jpeg = try NetworkFixtures.jpeg(seed: 23)
        // The real length first, a shorter one second: the shorter one used to win.
        server.route(
            "/two.jpg",
            TestHTTPServer.Response(
                headers: [
                    ("Content-Type", "image/jpeg"), ("Content-Length", "\(jpeg.count)"),
                    ("Content-Length", "\(jpeg.count / 2)"), ("Cache-Control", "max-age=600")
                ],
                body: .data(jpeg), declaredLength: .some(nil)))
        server.route(
            "/list.jpg",
            TestHTTPServer.Response(
                headers: [
                    ("Content-Type", "image/jpeg"),
                    ("Content-Length", "\(jpeg.count), \(jpeg.count - 1)")
                ],
                body: .data(jpeg), declaredLength: .some(nil)))
        let cache = try makeCache()
        let loader = makeLoader(cache: cache)
        await assertLoadFails(loader, "/two.jpg", kind: .protocolError, containing: "conflicting Content-Length")
        await assertLoadFails(loader, "/list.jpg", kind: .protocolError, containing: "conflicting Content-Length")
        XCTAssertNil(cache.entry(for: server.url("/two.jpg").absoluteString))
        XCTAssertEqual(cache.metrics.writes, 0)
        XCTAssertEqual(leftoverFiles(), [])
        // Not retried: a framing error does not heal.
        XCTAssertEqual(server.requestCount("/two.jpg"), 1)

        // The same value twice is one length (RFC 9112 §6.3).
        server.route(
            "/same.jpg",
            TestHTTPServer.Response(
                headers: [
                    ("Content-Type", "image/jpeg"), ("Content-Length", "\(jpeg.count)"),
                    ("Content-Length", "\(jpeg.count)")
                ],
                body: .data(jpeg), declaredLength: .some(nil)))
        let data = try await load(loader, "/same.jpg")
        XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg)
    }

    // MARK: Item 6: a redirect status without Location

    func testAFoundWithoutLocationIsAnHTTPStatusErrorAndIsNotRetried() async throws {
        server.route("/nowhere", .status(302))
        let loader = makeLoader { $0.retryPolicy = HTTPRetryPolicy(maxRetries: 2, initialDelay: 0.01) }
        do {
            let data = try await load(loader, "/nowhere")
            XCTFail("loaded \(data.byteCount) bytes")
        } catch let error as VipsError {
            XCTAssertEqual(error.kind, .httpStatus, "\(error)")
            XCTAssertEqual(error.httpStatus, 302, "\(error)")
            XCTAssertTrue(error.message.contains("without a Location"), error.message)
        }
        XCTAssertEqual(server.requestCount("/nowhere"), 1, "a status error is not retried")
        XCTAssertEqual(loader.metrics.retries, 0)
    }

    // MARK: Item 7: credentials in URLs

    func testCredentialsInAURLAppearInNoMessageAndNoCacheFile() async throws {
        let secret = "s3cr3t-\(UUID().uuidString.prefix(8))"
        let jpeg = try NetworkFixtures.jpeg(seed: 24)
        server.route("/private.jpg", .ok(jpeg, headers: [("Cache-Control", "max-age=600")]))
        server.route("/missing.jpg", .status(404))
        server.route("/page.jpg", .ok(Data("<html>no</html>".utf8), contentType: "text/html"))
        server.route("/away", .redirect(to: "file:///etc/passwd"))
        let cache = try makeCache()
        let loader = makeLoader(cache: cache)

        let url = server.url("/private.jpg", user: "alice", password: secret)
        let data = try await loader.loadData(for: .url(url))
        XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg)
        XCTAssertEqual(
            server.requests("/private.jpg").first?.header("Authorization"),
            "Basic " + Data("alice:\(secret)".utf8).base64EncodedString(), "the credentials are still sent")
        // A second loader finds the entry under the same credentials, and not under others.
        let again = try await makeLoader(cache: cache).loadData(for: .url(url))
        XCTAssertEqual(NetworkFixtures.contents(of: again), jpeg)
        XCTAssertEqual(server.requestCount("/private.jpg"), 1, "served from the cache")
        _ = try await makeLoader(cache: cache).loadData(
            for: .url(server.url("/private.jpg", user: "bob", password: "other")))
        XCTAssertEqual(server.requestCount("/private.jpg"), 2, "other credentials are another entry")

        for (path, kind) in [
            ("/missing.jpg", VipsError.Kind.httpStatus), ("/page.jpg", .unsupportedFormat), ("/away", .redirectRefused)
        ] {
            do {
                _ = try await loader.loadData(for: .url(server.url(path, user: "alice", password: secret)))
                XCTFail("\(path) loaded")
            } catch {
                XCTAssertEqual(error.kind, kind, "\(error)")
                XCTAssertFalse(error.description.contains(secret), "\(path): \(error)")
                XCTAssertTrue(error.message.contains("http://***@127.0.0.1:\(server.port)\(path)"), "\(error)")
            }
        }
        // Nothing in the cache's folder holds the password.
        let enumerator = FileManager.default.enumerator(atPath: cacheDirectory.path)
        var checked = 0
        while let relative = enumerator?.nextObject() as? String {
            guard let bytes = FileManager.default.contents(atPath: cacheDirectory.appendingPathComponent(relative).path)
            else { continue }
            XCTAssertNil(bytes.range(of: Data(secret.utf8)), relative)
            if relative.hasSuffix(".meta") {
                checked += 1
                XCTAssertNotNil(bytes.range(of: Data("sha256-".utf8)), "the stored key holds a digest: \(relative)")
            }
        }
        XCTAssertEqual(checked, 2, "two entries (alice's and bob's) were checked")
    }

    func testRedactionReplacesEveryUserinfoAndNothingElse() {
        XCTAssertEqual(URLRedaction.redacted("http://u:p@h:8/a@b?c=d@e"), "http://***@h:8/a@b?c=d@e")
        XCTAssertEqual(
            URLRedaction.redacted("failed: https://token@h/x and ftp://a:b@c/"),
            "failed: https://***@h/x and ftp://***@c/")
        XCTAssertEqual(URLRedaction.redacted("http://h/a?u=x@y"), "http://h/a?u=x@y")
        XCTAssertEqual(URLRedaction.redacted("mailto:a@b"), "mailto:a@b")
        XCTAssertEqual(ImageSource.url(URL(string: "https://u:p@h/x.jpg")!).description, "https://***@h/x.jpg")
        XCTAssertEqual(URLRedaction.storageKey("http://h/x"), "http://h/x")
        XCTAssertEqual(
            URLRedaction.storageKey("http://u:p@h/x"),
            "http://sha256-" + SHA256.hexDigest(of: Array("u:p".utf8)) + "@h/x")
        // FIPS 180-4 examples, and a message longer than one block.
        XCTAssertEqual(
            SHA256.hexDigest(of: Array("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(SHA256.hexDigest(of: []), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(
            SHA256.hexDigest(of: Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    // MARK: Item 8: error kinds and messages

    func testAGarbageAnswerIsAProtocolErrorAndAHugeHeaderIsTooLarge() async throws {
        server.route("/garbage", .raw(Data("SSH-2.0-OpenSSH_9.2\r\nnot http at all\r\n".utf8)))
        server.route(
            "/big-header",
            TestHTTPServer.Response(
                headers: [
                    ("Content-Type", "image/jpeg"),
                    ("X-Padding", String(repeating: "a", count: 100 * 1024))
                ],
                body: .data(try NetworkFixtures.jpeg(seed: 25))))
        let loader = makeLoader { $0.retryPolicy = HTTPRetryPolicy(maxRetries: 2, initialDelay: 0.01) }
        await assertLoadFails(loader, "/garbage", kind: .protocolError, containing: "not an HTTP response")
        await assertLoadFails(loader, "/big-header", kind: .tooLarge, containing: "response header")
        XCTAssertEqual(server.requestCount("/garbage"), 1, "not retried")
        XCTAssertEqual(server.requestCount("/big-header"), 1, "not retried")
        XCTAssertEqual(leftoverFiles(), [])
    }

    func testAWriteFailureNamesTheURLAndNotTheTemporaryFile() async throws {
        // The download folder is a file: no download can be made there.
        let blocked = downloadDirectory.appendingPathComponent("blocked")
        try Data("x".utf8).write(to: blocked)
        server.route("/photo.jpg", .ok(try NetworkFixtures.jpeg(seed: 26)))
        let loader = makeLoader { $0.temporaryDirectory = blocked }
        await assertLoadFails(
            loader, "/photo.jpg", kind: .io, containing: server.url("/photo.jpg").absoluteString + ": ")
    }

    // MARK: Item 1 (library): private download folders

    func testDownloadsLiveInALockedPrivateFolderAndDeadProcessesFoldersAreSwept() async throws {
        let base = downloadDirectory.appendingPathComponent("base")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        // What a killed process leaves: a folder whose lock nobody holds, with a partial download.
        let dead = base.appendingPathComponent("999999-00000000deadbeef")
        try FileManager.default.createDirectory(at: dead, withIntermediateDirectories: true)
        try Data().write(to: dead.appendingPathComponent(TemporaryDownloads.lockFileName))
        try Data(count: 1000).write(to: dead.appendingPathComponent("download-0123456789abcdef"))
        // One made while its owner was killed before the lock file existed (that pid is not alive).
        let unlocked = base.appendingPathComponent("\(Int32.max - 7)-00000000feedface")
        try FileManager.default.createDirectory(at: unlocked, withIntermediateDirectories: true)
        // A live owner: its lock is held (by another descriptor, so by "another process" for flock).
        let live = base.appendingPathComponent("1-00000000cafe0001")
        try FileManager.default.createDirectory(at: live, withIntermediateDirectories: true)
        let liveLock = open(live.appendingPathComponent(TemporaryDownloads.lockFileName).path, O_RDWR | O_CREAT, 0o600)
        XCTAssertEqual(flock(liveLock, LOCK_EX | LOCK_NB), 0)
        defer { close(liveLock) }
        // Other names are left alone.
        let unrelated = base.appendingPathComponent("notes.txt")
        try Data("keep".utf8).write(to: unrelated)
        // What earlier versions left in the folder itself: old files go, young ones may be in use.
        let oldLegacy = base.appendingPathComponent("download-00000000000000a1")
        let youngLegacy = base.appendingPathComponent("download-00000000000000a2")
        try Data(count: 10).write(to: oldLegacy)
        try Data(count: 10).write(to: youngLegacy)
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSinceNow: -7200)], ofItemAtPath: oldLegacy.path)

        server.route("/photo.jpg", .ok(try NetworkFixtures.jpeg(seed: 27)))
        let loader = makeLoader { $0.temporaryDirectory = base }
        var data: ImageData? = try await load(loader, "/photo.jpg")
        let path = try XCTUnwrap(data.flatMap { if case .file(let path) = $0.input { path } else { nil } })
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent()
        XCTAssertEqual(folder.deletingLastPathComponent().path, base.path)
        XCTAssertTrue(folder.lastPathComponent.hasPrefix("\(getpid())-"), folder.path)
        // Its lock is held: another descriptor cannot take it.
        let probe = open(folder.appendingPathComponent(TemporaryDownloads.lockFileName).path, O_RDWR)
        XCTAssertGreaterThanOrEqual(probe, 0)
        XCTAssertNotEqual(flock(probe, LOCK_EX | LOCK_NB), 0, "the owner holds the lock")
        close(probe)

        XCTAssertFalse(FileManager.default.fileExists(atPath: dead.path), "a dead owner's folder is swept")
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: unlocked.path), "a lockless folder of a gone pid is swept")
        XCTAssertTrue(FileManager.default.fileExists(atPath: live.path), "a live owner's folder stays")
        XCTAssertTrue(FileManager.default.fileExists(atPath: unrelated.path))
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: oldLegacy.path),
            "an hour-old download of an earlier version is swept")
        XCTAssertTrue(FileManager.default.fileExists(atPath: youngLegacy.path))

        data = nil
        XCTAssertEqual(
            NetworkFixtures.files(in: base).filter { $0.hasPrefix(folder.lastPathComponent) }, [],
            "the file goes with its ImageData")
        // Deleting the folder behind the loader's back costs nothing: the next download makes a new one.
        try FileManager.default.removeItem(at: folder)
        let next = try await load(loader, "/photo.jpg")
        XCTAssertGreaterThan(next.byteCount, 0)
    }
}
