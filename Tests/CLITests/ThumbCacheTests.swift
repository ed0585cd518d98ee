import Foundation
import Synchronization
import TestSupport
import VipsCore
import VipsSynthesis
import XCTest

/// `thumb --cache-dir` keeps finished thumbnails (`ThumbCache`): a second run
/// into a new `--out` decodes nothing it made before and writes the same
/// bytes; a changed source, other options or a corrupt entry make a new
/// thumbnail; a URL's thumbnail is reused only once its original is
/// revalidated. Decodes are counted by the run's own JSON summary.
final class ThumbCacheTests: XCTestCase {
    /// One `thumb --json` run: its exit status, report and the bytes of each output, by file name.
    private struct Run {
        let inputs: [String: [String: Any]]
        let summary: [String: Any]
        let outputs: [String: Data]
        let stderr: String

        var decoded: Int? { summary["decoded"] as? Int }
        var fromCache: Int? { summary["fromCache"] as? Int }
        func isFromCache(_ input: String) -> Bool? { inputs[input]?["fromCache"] as? Bool }
    }

    private func run(_ arguments: [String], cache: URL, out: URL, status: Int32 = 0) throws -> Run {
        let result = try CLIHarness.run(
            ["thumb", "--json", "--cache-dir", cache.path, "--out", out.path] + arguments)
        XCTAssertEqual(result.status, status, result.stderr)
        let (inputs, summary) = try result.jsonReport()
        var outputs: [String: Data] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: out.path)) ?? [] where !name.hasPrefix(".") {
            outputs[name] = try Data(contentsOf: out.appendingPathComponent(name))
        }
        return Run(inputs: inputs, summary: summary, outputs: outputs, stderr: result.stderr)
    }

    /// Serves `path` as `current()` says (its `ETag` and body) with `no-cache`,
    /// so every run revalidates it: `304` while the client's `ETag` is current.
    private func routeRevalidated(
        _ path: String, on server: TestHTTPServer, _ current: @escaping @Sendable () -> (etag: String, body: Data)
    ) {
        server.route(path) { request in
            let (etag, body) = current()
            let headers = [("ETag", etag), ("Cache-Control", "no-cache")]
            if request.header("If-None-Match") == etag { return TestHTTPServer.Response(status: 304, headers: headers) }
            return .ok(body, headers: headers)
        }
    }

    private func writeImages(in folder: URL) throws -> [String] {
        let images: [(String, ImageSynthesizer.Format)] = [
            ("a.jpg", .jpeg(quality: 85)), ("b.png", .png()), ("c.webp", .webp())
        ]
        return try images.enumerated().map { index, image in
            let url = folder.appendingPathComponent(image.0)
            try ImageSynthesizer.data(width: 300 + 40 * index, height: 200, seed: index + 1, format: image.1)
                .write(to: url)
            return url.path
        }
    }

    func testASecondRunIntoANewOutDecodesNothingAndWritesTheSameBytes() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let inputs = try writeImages(in: dir)
        let cache = dir.appendingPathComponent("cache")
        let first = try run(["-s", "64"] + inputs, cache: cache, out: dir.appendingPathComponent("out1"))
        XCTAssertEqual(first.decoded, 3)
        XCTAssertEqual(first.fromCache, 0)
        XCTAssertEqual(inputs.compactMap(first.isFromCache), [false, false, false])

        let second = try run(["-s", "64"] + inputs, cache: cache, out: dir.appendingPathComponent("out2"))
        XCTAssertEqual(second.decoded, 0, "nothing made before is decoded again")
        XCTAssertEqual(second.fromCache, 3)
        XCTAssertEqual(inputs.compactMap(second.isFromCache), [true, true, true])
        XCTAssertEqual(second.outputs.count, 3)
        XCTAssertEqual(second.outputs, first.outputs, "the stored thumbnails are the bytes written the first time")
        XCTAssertEqual(inputs.compactMap { second.inputs[$0]?["width"] as? Int }, [64, 64, 64])
        XCTAssertTrue(second.stderr.contains("3 written (3 from the cache)"), second.stderr)

        // --force makes every thumbnail again.
        let forced = try run(["-s", "64", "--force"] + inputs, cache: cache, out: dir.appendingPathComponent("out3"))
        XCTAssertEqual(forced.decoded, 3)
        XCTAssertEqual(forced.fromCache, 0)
        XCTAssertEqual(forced.outputs, first.outputs)
    }

    func testALocalFileChangedInPlaceIsMadeAgain() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let inputs = try writeImages(in: dir)
        let cache = dir.appendingPathComponent("cache")
        let first = try run(["-s", "64"] + inputs, cache: cache, out: dir.appendingPathComponent("out1"))
        XCTAssertEqual(first.decoded, 3)

        // The same path, rewritten in place (same inode) with another picture.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: inputs[0]))
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: ImageSynthesizer.data(width: 200, height: 300, seed: 9, format: .jpeg()))
        try handle.close()

        let second = try run(["-s", "64"] + inputs, cache: cache, out: dir.appendingPathComponent("out2"))
        XCTAssertEqual(second.decoded, 1, "only the changed file is decoded")
        XCTAssertEqual(second.isFromCache(inputs[0]), false)
        XCTAssertEqual(second.isFromCache(inputs[1]), true)
        XCTAssertEqual(second.inputs[inputs[0]]?["width"] as? Int, 43, "the new picture's thumbnail (200×300)")
        XCTAssertNotEqual(second.outputs["a.jpg"], first.outputs["a.jpg"])
        XCTAssertEqual(second.outputs["b.png"], first.outputs["b.png"])
    }

    func testDifferentOptionsMakeDifferentEntries() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let inputs = try writeImages(in: dir)
        let cache = dir.appendingPathComponent("cache")
        let variants: [[String]] = [
            ["-s", "64"], ["-s", "48"], ["-s", "64", "-Q", "50"], ["-s", "64", "--format", "png"],
            ["-s", "64x64", "--fit", "cover"], ["-s", "64", "--keep-metadata"]
        ]
        var outputs: [[String: Data]] = []
        for (index, variant) in variants.enumerated() {
            let made = try run(variant + inputs, cache: cache, out: dir.appendingPathComponent("made\(index)"))
            XCTAssertEqual(made.decoded, 3, "\(variant): a new entry for other options")
            outputs.append(made.outputs)
        }
        for (index, variant) in variants.enumerated() {
            let again = try run(variant + inputs, cache: cache, out: dir.appendingPathComponent("again\(index)"))
            XCTAssertEqual(again.decoded, 0, "\(variant): each option set has its own entry")
            XCTAssertEqual(again.outputs, outputs[index], "\(variant)")
        }
    }

    func testACorruptEntryIsDetectedAndMadeAgainAndAFailureIsNeverStored() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let inputs = try writeImages(in: dir)
        let broken = dir.appendingPathComponent("broken.jpg")
        try (Data([0xFF, 0xD8, 0xFF, 0xE0]) + Data(repeating: 0x41, count: 500)).write(to: broken)
        let cache = dir.appendingPathComponent("cache")
        let first = try run(
            ["-s", "64"] + inputs + [broken.path], cache: cache, out: dir.appendingPathComponent("out1"), status: 1)
        XCTAssertEqual(first.decoded, 4)
        XCTAssertEqual(first.inputs[broken.path]?["status"] as? String, "failed")

        // Every stored body damaged in place: a byte in the middle flipped, the length kept.
        let entries = cache.appendingPathComponent("entries")
        let bodies = try FileManager.default.contentsOfDirectory(atPath: entries.path).filter { $0.hasSuffix(".body") }
        XCTAssertEqual(bodies.count, 3, "one thumbnail per image; the failure stored nothing")
        for body in bodies {
            let url = entries.appendingPathComponent(body)
            var bytes = try Data(contentsOf: url)
            bytes[bytes.count / 2] ^= 0xFF
            try bytes.write(to: url)
        }

        let second = try run(
            ["-s", "64"] + inputs + [broken.path], cache: cache, out: dir.appendingPathComponent("out2"), status: 1)
        XCTAssertEqual(second.decoded, 4, "no corrupt entry is served; the failed input is decoded again")
        XCTAssertEqual(second.fromCache, 0)
        XCTAssertEqual(second.outputs, first.outputs, "remade from the sources")

        let third = try run(
            ["-s", "64"] + inputs + [broken.path], cache: cache, out: dir.appendingPathComponent("out3"), status: 1)
        XCTAssertEqual(third.decoded, 1, "the remade entries serve; the failure is never cached")
        XCTAssertEqual(third.outputs, first.outputs)
    }

    func testAnUnchangedURLIsRevalidatedAndItsThumbnailReused() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let server = try TestHTTPServer()
        defer { server.stop() }
        let photo = try ImageSynthesizer.data(width: 640, height: 480, seed: 3, format: .jpeg(quality: 85))
        routeRevalidated("/checked.jpg", on: server) { ("\"c1\"", photo) }
        // Fresh for an hour but without a validator: a change could not be told, so no thumbnail is kept.
        server.route("/unvalidated.jpg", .ok(photo, headers: [("Cache-Control", "public, max-age=3600")]))
        let checked = server.url("/checked.jpg").absoluteString
        let unvalidated = server.url("/unvalidated.jpg").absoluteString
        let cache = dir.appendingPathComponent("cache")

        let first = try run(["-s", "64", checked, unvalidated], cache: cache, out: dir.appendingPathComponent("out1"))
        XCTAssertEqual(first.decoded, 2)
        let second = try run(["-s", "64", checked, unvalidated], cache: cache, out: dir.appendingPathComponent("out2"))
        XCTAssertEqual(
            server.requests("/checked.jpg").map { $0.header("If-None-Match") }, [nil, "\"c1\""],
            "the stale original was revalidated before its thumbnail was used")
        XCTAssertEqual(server.requestCount("/unvalidated.jpg"), 1, "the fresh original came from the disk cache")
        XCTAssertEqual(second.isFromCache(checked), true, "304: the thumbnail is reused")
        XCTAssertEqual(second.isFromCache(unvalidated), false)
        XCTAssertEqual(second.decoded, 1, "only the original without validators is decoded again")
        XCTAssertEqual(second.outputs, first.outputs)
    }

    func testAURLWhoseOriginalChangedIsMadeAgainAfterRevalidation() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let server = try TestHTTPServer()
        defer { server.stop() }
        let versions = [
            try ImageSynthesizer.data(width: 640, height: 480, seed: 4, format: .jpeg(quality: 85)),
            try ImageSynthesizer.data(width: 480, height: 640, seed: 5, format: .jpeg(quality: 85))
        ]
        let current = Atomic<Int>(0)
        routeRevalidated("/changing.jpg", on: server) {
            let version = current.load(ordering: .relaxed)
            return ("\"v\(version)\"", versions[version])
        }
        let url = server.url("/changing.jpg").absoluteString
        let cache = dir.appendingPathComponent("cache")

        let first = try run(["-s", "64", url], cache: cache, out: dir.appendingPathComponent("out1"))
        XCTAssertEqual(first.decoded, 1)
        XCTAssertEqual(first.inputs[url]?["width"] as? Int, 64)
        current.store(1, ordering: .relaxed)
        let second = try run(["-s", "64", url], cache: cache, out: dir.appendingPathComponent("out2"))
        XCTAssertEqual(
            server.requests("/changing.jpg").map { $0.header("If-None-Match") }, [nil, "\"v0\""],
            "the original was revalidated and had changed (200)")
        XCTAssertEqual(second.decoded, 1, "a changed original makes a new thumbnail")
        XCTAssertEqual(second.isFromCache(url), false)
        XCTAssertEqual(second.inputs[url]?["width"] as? Int, 48, "the new original's thumbnail (480×640)")
        let third = try run(["-s", "64", url], cache: cache, out: dir.appendingPathComponent("out3"))
        XCTAssertEqual(third.decoded, 0, "the new original's thumbnail is reused after its 304")
        XCTAssertEqual(third.outputs, second.outputs)
    }
}
