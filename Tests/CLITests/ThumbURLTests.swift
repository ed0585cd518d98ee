import Foundation
import Synchronization
import TestSupport
import VipsCore
import VipsSynthesis
import XCTest

/// `vipsload thumb` with http(s) URLs, `--input-list` and `--cache-dir`,
/// against a real server on 127.0.0.1.
final class ThumbURLTests: XCTestCase {
    private var server: TestHTTPServer!

    override func setUpWithError() throws {
        server = try TestHTTPServer()
    }

    override func tearDown() {
        server?.stop()
        server = nil
    }

    private func jpeg(_ width: Int, _ height: Int, seed: Int) throws -> Data {
        try ImageSynthesizer.data(width: width, height: height, seed: seed, format: .jpeg(quality: 85))
    }

    /// Every file below `folder`, as paths relative to it.
    private func files(below folder: URL) -> Set<String> {
        let enumerator = FileManager.default.enumerator(atPath: folder.path)
        var found: Set<String> = []
        while let relative = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(
                atPath: folder.appendingPathComponent(relative).path, isDirectory: &isDirectory),
                !isDirectory.boolValue, !relative.hasSuffix(".vipsload-journal")
            {
                found.insert(relative)
            }
        }
        return found
    }

    private func size(of file: URL) throws -> [Int] {
        let info = try ImageDecoder().info(.file(file.path))
        return [info.width, info.height]
    }

    func testURLsFromArgumentsAndAnInputListAreNamedAfterTheirLastPathComponentInsideOut() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        server.route("/photos/cat.jpg", .ok(try jpeg(800, 600, seed: 1)))
        server.route("/gallery/", .ok(try jpeg(300, 600, seed: 2)))
        // A name that decodes to "../../escape.jpg" must not climb out of --out, nor start with a dot.
        server.route("/x/..%2F..%2Fescape.jpg", .ok(try jpeg(400, 400, seed: 3)))
        let local = dir.appendingPathComponent("local.jpg")
        try jpeg(200, 100, seed: 4).write(to: local)
        let list = dir.appendingPathComponent("inputs.txt")
        try """
        # thumbnails for the gallery

        \(server.url("/gallery/").absoluteString)
           \(local.path)\u{20}\u{20}
        # \(server.url("/commented-out.jpg").absoluteString)
        \(server.url("/x/..%2F..%2Fescape.jpg").absoluteString)\r
        \(server.url("/missing.jpg").absoluteString)
        """.write(to: list, atomically: true, encoding: .utf8)
        let out = dir.appendingPathComponent("out")

        let result = try CLIHarness.run([
            "thumb", "--size", "100", "--out", out.path, "--input-list", list.path,
            server.url("/photos/cat.jpg").absoluteString + "?variant=large"
        ])
        XCTAssertEqual(result.status, 1, "the missing URL fails: \(result.stderr)")
        XCTAssertTrue(
            result.stderr.contains(server.url("/missing.jpg").absoluteString) && result.stderr.contains("httpStatus"),
            result.stderr)
        XCTAssertTrue(result.stderr.contains("4 written, 0 skipped, 1 failed"), result.stderr)
        XCTAssertEqual(files(below: out), ["cat.jpg", "gallery.jpg", "local.jpg", "_._.._escape.jpg"])
        XCTAssertEqual(
            files(below: dir),
            [
                "inputs.txt", "local.jpg", "out/cat.jpg", "out/gallery.jpg", "out/local.jpg",
                "out/_._.._escape.jpg"
            ], "nothing is written outside --out")
        XCTAssertEqual(try size(of: out.appendingPathComponent("cat.jpg")), [100, 75])
        XCTAssertEqual(try size(of: out.appendingPathComponent("gallery.jpg")), [50, 100])
        XCTAssertEqual(try size(of: out.appendingPathComponent("_._.._escape.jpg")), [100, 100])
        XCTAssertEqual(try size(of: out.appendingPathComponent("local.jpg")), [100, 50])
        for path in ["/photos/cat.jpg", "/gallery/", "/x/..%2F..%2Fescape.jpg", "/missing.jpg"] {
            XCTAssertEqual(server.requestCount(path), 1, path)
        }
        XCTAssertEqual(server.requestCount("/commented-out.jpg"), 0)
    }

    func testCacheDirServesTheNextRunFromDiskAndRevalidatesStaleImages() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        server.route(
            "/kept.jpg", .ok(try jpeg(640, 480, seed: 5), headers: [("Cache-Control", "public, max-age=3600")]))
        let checked = try jpeg(480, 640, seed: 6)
        server.route("/checked.jpg") { request in
            if request.header("If-None-Match") == "\"c1\"" {
                return TestHTTPServer.Response(
                    status: 304, headers: [("ETag", "\"c1\""), ("Cache-Control", "no-cache")])
            }
            return .ok(checked, headers: [("ETag", "\"c1\""), ("Cache-Control", "no-cache")])
        }
        let cache = dir.appendingPathComponent("cache")
        let urls = [server.url("/kept.jpg").absoluteString, server.url("/checked.jpg").absoluteString]

        for run in 1...2 {
            let out = dir.appendingPathComponent("out\(run)")
            let result = try CLIHarness.run(
                ["thumb", "--size", "64", "--cache-dir", cache.path, "--out", out.path] + urls)
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertEqual(try size(of: out.appendingPathComponent("kept.jpg")), [64, 48])
            XCTAssertEqual(try size(of: out.appendingPathComponent("checked.jpg")), [48, 64])
        }
        XCTAssertEqual(server.requestCount("/kept.jpg"), 1, "the second run read the fresh entry from disk")
        XCTAssertEqual(
            server.requests("/checked.jpg").map { $0.header("If-None-Match") }, [nil, "\"c1\""],
            "the second run revalidated the no-cache entry")
        let entries = files(below: cache.appendingPathComponent("entries"))
        // Both originals, and the thumbnail of the one with a validator (ThumbCacheTests).
        XCTAssertEqual(entries.filter { $0.hasSuffix(".meta") }.count, 3, "\(entries)")
    }

    func testCacheSizeBoundsTheDiskCache() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        var urls: [String] = []
        var bodies = 0
        for index in 0..<4 {
            let body = try jpeg(2000, 1500, seed: 30 + index)
            bodies += body.count
            server.route("/big\(index).jpg", .ok(body, headers: [("Cache-Control", "public, max-age=3600")]))
            urls.append(server.url("/big\(index).jpg").absoluteString)
        }
        let limit = 1_048_576
        XCTAssertGreaterThan(bodies, limit, "the four bodies must not fit together")
        let cache = dir.appendingPathComponent("cache")
        let result = try CLIHarness.run(
            [
                "thumb", "--size", "64", "--jobs", "1", "--cache-dir", cache.path, "--cache-size", "1",
                "--out", dir.appendingPathComponent("out").path
            ] + urls)
        XCTAssertEqual(result.status, 0, result.stderr)
        let entries = cache.appendingPathComponent("entries")
        let stored = try files(below: entries).filter { !$0.hasSuffix(".meta") }.map { name in
            try XCTUnwrap(
                FileManager.default.attributesOfItem(atPath: entries.appendingPathComponent(name).path)[.size] as? Int)
        }
        XCTAssertFalse(stored.isEmpty, "something is cached")
        XCTAssertLessThanOrEqual(stored.reduce(0, +), limit, "\(stored)")
    }

    func testInputListFromStandardInput() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        server.route("/stdin.jpg", .ok(try jpeg(300, 200, seed: 7)))
        let out = dir.appendingPathComponent("out")
        let list = "# from a pipe\n\n\(server.url("/stdin.jpg").absoluteString)\n"
        let result = try CLIHarness.run(
            ["thumb", "--size", "30", "--out", out.path, "--input-list", "-"], stdin: Data(list.utf8))
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try size(of: out.appendingPathComponent("stdin.jpg")), [30, 20])

        let missing = try CLIHarness.run([
            "thumb", "--out", out.path, "--input-list", dir.appendingPathComponent("nope.txt").path
        ])
        XCTAssertEqual(missing.status, 1)
        XCTAssertTrue(missing.stderr.contains("cannot read the input list"), missing.stderr)
    }

    func testSameNamesFromURLsAndFilesClashAndAreWrittenApartWithTheSuggestedTemplate() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        server.route("/a/photo.jpg", .ok(try jpeg(200, 100, seed: 8)))
        server.route("/b/photo.jpg", .ok(try jpeg(100, 200, seed: 9)))
        let local = dir.appendingPathComponent("photo.jpg")
        try jpeg(100, 100, seed: 10).write(to: local)
        let out = dir.appendingPathComponent("out")
        let inputs = [server.url("/a/photo.jpg").absoluteString, server.url("/b/photo.jpg").absoluteString, local.path]
        let result = try CLIHarness.run(["thumb", "--size", "50", "--out", out.path] + inputs)
        XCTAssertEqual(result.status, 1, result.stderr)
        for input in inputs {
            XCTAssertTrue(
                result.stderr.contains("\(input): nameClash: photo.jpg"),
                "each clashing input is reported: \(result.stderr)")
        }
        XCTAssertTrue(result.stderr.contains("Separate them with --name '%p/%s'"), result.stderr)
        XCTAssertEqual(files(below: out), [], "neither is written")
        XCTAssertEqual(server.requestCount("/a/photo.jpg"), 0, "clashing inputs are not even downloaded")

        let apart = try CLIHarness.run(["thumb", "--size", "50", "--out", out.path, "--name", "%p/%s"] + inputs)
        XCTAssertEqual(apart.status, 0, apart.stderr)
        XCTAssertEqual(try size(of: out.appendingPathComponent("a/photo.jpg")), [50, 25])
        XCTAssertEqual(try size(of: out.appendingPathComponent("b/photo.jpg")), [25, 50])
        XCTAssertEqual(try size(of: out.appendingPathComponent("\(dir.lastPathComponent)/photo.jpg")), [50, 50])
    }

    func testInvalidURLsFailAndAnUnusableCacheDirOnlyWarns() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        server.route("/ok.jpg", .ok(try jpeg(120, 90, seed: 11)))
        let notAFolder = dir.appendingPathComponent("file")
        try Data("x".utf8).write(to: notAFolder)
        let out = dir.appendingPathComponent("out")
        let result = try CLIHarness.run([
            "thumb", "--size", "60", "--out", out.path,
            "--cache-dir", notAFolder.appendingPathComponent("cache").path,
            "http://", "https://exa mple.com/x.jpg", server.url("/ok.jpg").absoluteString
        ])
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("not caching downloads"), result.stderr)
        XCTAssertTrue(result.stderr.contains("http://: invalidArgument"), result.stderr)
        XCTAssertTrue(result.stderr.contains("https://exa mple.com/x.jpg: invalidArgument"), result.stderr)
        XCTAssertEqual(try size(of: out.appendingPathComponent("ok.jpg")), [60, 45], "the good URL is still written")
        XCTAssertEqual(files(below: out), ["ok.jpg"])
    }

    func testTransientFailuresAreRetriedHonouringRetryAfterAndCountedInTheSummary() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let body = try jpeg(300, 300, seed: 12)
        let calls = Atomic<Int>(0)
        server.route("/flaky.jpg") { _ in
            // The first attempt is told to come back in a second; the next one succeeds.
            if calls.add(1, ordering: .relaxed).newValue == 1 {
                return TestHTTPServer.Response(status: 503, headers: [("Retry-After", "1")])
            }
            return .ok(body)
        }
        server.route("/down.jpg", .status(503))
        // Asked to wait longer than the 30 s the CLI waits at most: not retried, the status is reported.
        server.route("/later.jpg", TestHTTPServer.Response(status: 503, headers: [("Retry-After", "3600")]))
        let out = dir.appendingPathComponent("out")
        let result = try CLIHarness.run([
            "thumb", "--json", "-s", "30", "-o", out.path, server.url("/flaky.jpg").absoluteString
        ])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(server.requestCount("/flaky.jpg"), 2, "retried after the Retry-After the server asked for")
        XCTAssertTrue(result.stderr.contains("1 written, 0 skipped, 0 failed, 1 retry"), result.stderr)
        let summary = try XCTUnwrap(
            result.stdoutLines.last.flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
        XCTAssertEqual((summary["summary"] as? [String: Any])?["retries"] as? Int, 1)

        let once = try CLIHarness.run([
            "thumb", "--retries", "1", "-s", "30", "-o", out.path, server.url("/down.jpg").absoluteString
        ])
        XCTAssertEqual(once.status, 1)
        XCTAssertEqual(server.requestCount("/down.jpg"), 2, "--retries 1: one retry, then the failure")
        XCTAssertTrue(once.stderr.contains("httpStatus") && once.stderr.contains("1 retry"), once.stderr)
        let none = try CLIHarness.run([
            "thumb", "-r", "0", "-s", "30", "-o", out.path, server.url("/down.jpg").absoluteString
        ])
        XCTAssertEqual(none.status, 1)
        XCTAssertEqual(server.requestCount("/down.jpg"), 3, "--retries 0 never retries")
        let later = try CLIHarness.run(["thumb", "-s", "30", "-o", out.path, server.url("/later.jpg").absoluteString])
        XCTAssertEqual(later.status, 1)
        XCTAssertTrue(later.stderr.contains("httpStatus") && !later.stderr.contains("retry"), later.stderr)
        XCTAssertEqual(server.requestCount("/later.jpg"), 1, "Retry-After: 3600 is read, and not waited for")
    }

    /// Downloads are isolated too: fetched first, then decoded in a worker
    /// when their format says so. A worker that cannot start (capped at 1 MB)
    /// fails exactly the inputs sent to it.
    func testDownloadsOfIsolatedFormatsAreDecodedInWorkers() throws {
        let folder = try CLIHarness.temporaryFolder(for: self)
        let svg = Data(
            #"<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect width="40" height="20" fill="red"/></svg>"#
                .utf8)
        server.route("/a.svg", .ok(svg))
        server.route("/b.jpg", .ok(try jpeg(160, 120, seed: 3)))
        let urls = [server.url("/a.svg").absoluteString, server.url("/b.jpg").absoluteString]
        let out = folder.appendingPathComponent("out")
        func run(_ flags: [String]) throws -> CLIHarness.Result {
            try CLIHarness.run(
                ["thumb", "--allow", "svg", "--worker-memory", "1", "-s", "40", "--json", "-o", out.path] + flags + urls
            )
        }
        func kind(_ result: CLIHarness.Result, _ url: String) -> String? {
            result.stdoutLines.compactMap { line -> String? in
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    object["input"] as? String == url
                else { return nil }
                return (object["error"] as? [String: Any])?["kind"] as? String ?? object["status"] as? String
            }.first
        }
        // Default (opt-in formats isolated): the SVG goes to a worker, the JPEG decodes here.
        let optIn = try run([])
        XCTAssertEqual(optIn.status, 1, optIn.stderr)
        XCTAssertEqual(kind(optIn, urls[0]), "crashed", optIn.stdout)
        XCTAssertEqual(kind(optIn, urls[1]), "written", optIn.stdout)
        // Every input isolated: both fail in their workers; none: both are written.
        let all = try run(["--isolate", "all", "--force"])
        XCTAssertEqual(urls.map { kind(all, $0) }, ["crashed", "crashed"], all.stdout)
        let none = try run(["--isolate", "none", "--force"])
        XCTAssertEqual(none.status, 0, none.stderr)
        XCTAssertEqual(urls.map { kind(none, $0) }, ["written", "written"], none.stdout)
        XCTAssertEqual(
            server.requestCount("/b.jpg"), 3, "one download per run: a JPEG decoded here is not downloaded again")
        XCTAssertEqual(try ImageDecoder().info(.file(out.appendingPathComponent("a.jpg").path)).width, 40)
    }

    func testADownloadThatDoesNotDecodeIsReportedByItsURLNeverItsFile() throws {
        let folder = try CLIHarness.temporaryFolder(for: self)
        // JPEG magic, then nothing a decoder can read: it downloads, and fails to decode.
        server.route("/broken.jpg", .ok(Data([0xFF, 0xD8, 0xFF, 0xE0]) + Data(repeating: 0x5A, count: 600)))
        let url = server.url("/broken.jpg").absoluteString
        for flags in [["--isolate", "none"], ["--isolate", "all"]] {
            let result = try CLIHarness.run(
                ["thumb", "-s", "40", "--json", "--force", "-o", folder.appendingPathComponent("out").path]
                    + flags + [url])
            XCTAssertEqual(result.status, 1, "\(flags): \(result.stderr)")
            let errors = result.stdoutLines.compactMap { line -> [String: Any]? in
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    object["input"] as? String == url
                else { return nil }
                return object["error"] as? [String: Any]
            }
            let message = try XCTUnwrap(errors.first?["message"] as? String, "\(flags): \(result.stdout)")
            XCTAssertFalse(message.isEmpty, "\(flags)")
            for text in [result.stdout, result.stderr] {
                XCTAssertFalse(text.contains("download-"), "\(flags): a temporary file is named: \(text)")
                XCTAssertFalse(text.contains(NSTemporaryDirectory()), "\(flags): a temporary path is named: \(text)")
            }
        }
    }
}

/// `thumb --header`.
final class ThumbHeaderTests: XCTestCase {
    func testHeadersAreSentWithEveryURLRequestAndBadOnesAreUsageErrors() throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let dir = try CLIHarness.temporaryFolder(for: self)
        let jpeg = try ImageSynthesizer.data(width: 120, height: 80, seed: 91, format: .jpeg(quality: 85))
        server.route("/one.jpg", .ok(jpeg))
        server.route("/two.jpg", .ok(jpeg))
        let result = try CLIHarness.run([
            "thumb", "--size", "40", "--out", dir.appendingPathComponent("out").path,
            "--header", "Authorization: Bearer secret", "-H", "User-Agent: gallery/1",
            server.url("/one.jpg").absoluteString, server.url("/two.jpg").absoluteString
        ])
        XCTAssertEqual(result.status, 0, result.stderr)
        for path in ["/one.jpg", "/two.jpg"] {
            let request = try XCTUnwrap(server.requests(path).first)
            XCTAssertEqual(request.header("Authorization"), "Bearer secret")
            XCTAssertEqual(request.header("User-Agent"), "gallery/1")
            XCTAssertNotNil(request.header("Accept"), "the default fields stay")
        }
        for bad in ["no colon", ": empty name", "Bad Name: x"] {
            let refused = try CLIHarness.run(["thumb", "--header", bad, server.url("/one.jpg").absoluteString])
            XCTAssertEqual(refused.status, 2, bad)
            XCTAssertTrue(refused.stderr.contains("--header"), refused.stderr)
        }
        XCTAssertEqual(server.totalRequestCount, 2)
    }
}
