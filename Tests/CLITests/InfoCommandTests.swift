import Foundation
import TestSupport
import VipsCore
import VipsSynthesis
import XCTest

final class InfoCommandTests: XCTestCase {
    /// `vipsload info DIR | head -1`: the reader goes away and the writes fail
    /// (EPIPE: SIGPIPE is ignored, as the test runner ignores it and the
    /// command's workers need). The lines are lost; the process is not.
    func testAStdoutWhoseReaderHasGoneLosesTheLinesWithoutACrash() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        for index in 0..<3 {
            try ImageSynthesizer.data(width: 40, height: 30, seed: index + 1, format: .png())
                .write(to: dir.appendingPathComponent("\(index).png"))
        }
        let process = Process()
        process.executableURL = CLIHarness.binary
        process.arguments = ["info", dir.path]
        process.environment = CLIHarness.environment()
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        signal(SIGPIPE, SIG_IGN)
        // No reader before the first line: every write to stdout fails.
        try out.fileHandleForReading.close()
        try process.run()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationReason, .exit, stderr)
        XCTAssertEqual(process.terminationStatus, 0, stderr)
        XCTAssertFalse(stderr.contains("crashed") || stderr.contains("Fatal error"), stderr)
    }

    func testTextAndJSONLinesWithFailuresReportedPerInput() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let jpeg = dir.appendingPathComponent("rotated.jpg")
        try ImageSynthesizer.data(width: 300, height: 200, format: .jpeg(orientation: 6)).write(to: jpeg)
        let png = dir.appendingPathComponent("alpha.png")
        try ImageSynthesizer.data(width: 64, height: 48, alpha: true, format: .png()).write(to: png)
        let text = dir.appendingPathComponent("notes.jpg")
        try Data("just some text, not a JPEG\n".utf8).write(to: text)
        let empty = dir.appendingPathComponent("empty.png")
        try Data().write(to: empty)

        let result = try CLIHarness.run(["info", "--json", jpeg.path, text.path, png.path, empty.path])
        XCTAssertEqual(result.status, 1, "any failed input makes the exit status 1")
        let lines = result.stdoutLines
        XCTAssertEqual(lines.count, 4, result.stdout)
        let objects = try lines.map {
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }

        XCTAssertEqual(objects[0]["input"] as? String, jpeg.path)
        XCTAssertEqual(objects[0]["width"] as? Int, 200, "width after EXIF orientation 6")
        XCTAssertEqual(objects[0]["height"] as? Int, 300)
        XCTAssertEqual(objects[0]["format"] as? String, "jpeg")
        XCTAssertEqual(objects[0]["orientation"] as? Int, 6)
        XCTAssertEqual(objects[0]["pages"] as? Int, 1)
        XCTAssertEqual(objects[0]["hasAlpha"] as? Bool, false)

        let textError = try XCTUnwrap(objects[1]["error"] as? [String: Any])
        XCTAssertEqual(textError["kind"] as? String, "unsupportedFormat")
        let message = try XCTUnwrap(textError["message"] as? String)
        XCTAssertEqual(message, "not a recognised image format", "the line names its input once, in \"input\"")

        XCTAssertEqual(objects[2]["bands"] as? Int, 4)
        XCTAssertEqual(objects[2]["hasAlpha"] as? Bool, true)
        XCTAssertEqual(objects[2]["format"] as? String, "png")

        XCTAssertEqual((objects[3]["error"] as? [String: Any])?["kind"] as? String, "emptyInput")

        let plain = try CLIHarness.run(["info", png.path])
        XCTAssertEqual(plain.status, 0)
        XCTAssertTrue(plain.stdout.contains("64x48 png"), plain.stdout)

        let failing = try CLIHarness.run(["info", text.path, png.path])
        XCTAssertEqual(failing.status, 1)
        XCTAssertEqual(
            failing.stderr, "vipsload info: \(text.path): unsupportedFormat: not a recognised image format\n",
            "errors go to stderr, worded as thumb words them")
        XCTAssertEqual(failing.stdoutLines.count, 1, "only the good input on stdout: \(failing.stdout)")
        XCTAssertTrue(
            result.stderr.contains("vipsload info: \(empty.path): emptyInput"),
            "--json also reports on stderr: \(result.stderr)")
    }

    func testTooLargeAndTruncatedInputs() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let big = dir.appendingPathComponent("big.png")
        try ImageSynthesizer.data(width: 400, height: 300, format: .png()).write(to: big)
        let full = try ImageSynthesizer.data(width: 400, height: 300, format: .jpeg())
        let cut = dir.appendingPathComponent("cut.jpg")
        try full.prefix(full.count / 2).write(to: cut)

        let limited = try CLIHarness.run(["info", "--json", "--max-pixels", "1000", big.path])
        XCTAssertEqual(limited.status, 1)
        XCTAssertTrue(limited.stdout.contains("\"tooLarge\""), limited.stdout)

        // A header probe of a half JPEG succeeds (the header is intact); decoding it strictly fails.
        let out = dir.appendingPathComponent("out")
        let strict = try CLIHarness.run(["thumb", "--strict", "--out", out.path, cut.path, big.path])
        XCTAssertEqual(strict.status, 1)
        XCTAssertTrue(strict.stderr.contains(cut.path), strict.stderr)
        XCTAssertTrue(strict.stderr.contains("truncatedData") || strict.stderr.contains("corruptData"), strict.stderr)
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: out.appendingPathComponent("big.jpg").path),
            "the good input in the same run is still written")

        let lenient = try CLIHarness.run(["thumb", "--out", out.path, cut.path])
        XCTAssertEqual(lenient.status, 0, "without --strict a truncated JPEG decodes what is there: \(lenient.stderr)")
    }

    func testUsageErrorsExitTwoAndHelpExitsZero() throws {
        for arguments in [
            ["info"], ["info", "--bogus", "x"], ["thumb", "--size"], ["thumb", "--size", "0", "x"],
            ["thumb", "--format", "bmp", "x"], ["nonsense"], []
        ] {
            let result = try CLIHarness.run(arguments)
            XCTAssertEqual(result.status, 2, "\(arguments): \(result.stderr)")
            XCTAssertFalse(result.stderr.isEmpty, "\(arguments) explains the usage error")
        }
        for command in ["info", "thumb", "corpus"] {
            let result = try CLIHarness.run([command, "--help"])
            XCTAssertEqual(result.status, 0)
            XCTAssertTrue(result.stdout.contains("usage: vipsload \(command)"), result.stdout)
        }
    }
    func testSVGIsRefusedUnlessAllowedThenRenderedAtTheThumbnailSize() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let svg = dir.appendingPathComponent("logo.svg")
        try Data(
            """
            <!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">
            <svg xmlns="http://www.w3.org/2000/svg" width="1000" height="500">
              <rect width="1000" height="500" fill="#2060c0"/><circle cx="500" cy="250" r="200" fill="#ffffff"/>
            </svg>
            """.utf8
        ).write(to: svg)

        let refused = try CLIHarness.run(["info", svg.path])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.contains("unsupportedFormat: svg images are not allowed"), refused.stderr)

        let allowed = try CLIHarness.run(["info", "--allow", "svg", svg.path])
        XCTAssertEqual(allowed.status, 0, allowed.stderr)
        XCTAssertTrue(allowed.stdout.contains("1000x500 svg"), allowed.stdout)

        let out = dir.appendingPathComponent("out")
        let thumb = try CLIHarness.run([
            "thumb", "--allow", "svg", "--size", "64", "--format", "png", "--out", out.path, svg.path
        ])
        XCTAssertEqual(thumb.status, 0, thumb.stderr)
        let bitmap = try ImageDecoder().decode(.file(out.appendingPathComponent("logo.png").path))
        XCTAssertEqual([bitmap.width, bitmap.height], [64, 32])
        XCTAssertEqual(bitmap.pixel(x: 2, y: 2), [0x20, 0x60, 0xC0, 0xFF], "the fill, rendered, not a grey placeholder")

        let unknown = try CLIHarness.run(["info", "--allow", "bmpx", svg.path])
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.stderr.contains("unknown format 'bmpx'"), unknown.stderr)
    }
}

/// `vipsload info URL`: probed through the pipeline, as `thumb` loads URLs
/// (disk cache, retries, header fields), against a real server on 127.0.0.1.
final class InfoURLTests: XCTestCase {
    func testURLsAreProbedThroughThePipelineAndItsDiskCache() throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let dir = try CLIHarness.temporaryFolder(for: self)
        let fresh = [("Cache-Control", "public, max-age=3600")]
        server.route(
            "/photos/cat.jpg",
            .ok(try ImageSynthesizer.data(width: 300, height: 200, format: .jpeg(orientation: 6)), headers: fresh))
        // JPEG magic, then nothing a decoder can read: the loader takes it, the header probe fails.
        server.route("/broken.jpg", .ok(Data([0xFF, 0xD8, 0xFF, 0xE0] + [UInt8](repeating: 0x42, count: 64))))
        server.route("/missing.jpg", .status(404))
        let cat = server.url("/photos/cat.jpg").absoluteString
        let broken = server.url("/broken.jpg").absoluteString
        let missing = server.url("/missing.jpg").absoluteString
        let cache = dir.appendingPathComponent("cache")

        for run in 1...2 {
            let result = try CLIHarness.run([
                "info", "--json", "--cache-dir", cache.path, "-H", "X-Run: \(run)", cat, broken, missing
            ])
            XCTAssertEqual(result.status, 1, result.stderr)
            let objects = try result.stdoutLines.map {
                try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
            }
            XCTAssertEqual(objects.count, 3, result.stdout)
            XCTAssertEqual(objects.first?["input"] as? String, cat)
            XCTAssertEqual(objects.first?["width"] as? Int, 200, "width after EXIF orientation 6")
            XCTAssertEqual(objects.first?["height"] as? Int, 300)
            XCTAssertEqual(objects.first?["format"] as? String, "jpeg")
            XCTAssertTrue(result.stderr.contains("vipsload info: \(missing): httpStatus"), result.stderr)
            XCTAssertTrue(result.stderr.contains("vipsload info: \(broken): "), result.stderr)
            XCTAssertFalse(
                result.stderr.contains("No such file") || result.stderr.contains("/tmp/")
                    || result.stderr.contains(cache.path),
                "messages name the URL, never a download or cache file: \(result.stderr)")
        }
        XCTAssertEqual(server.requestCount("/photos/cat.jpg"), 1, "the second run read the fresh entry from disk")
        XCTAssertEqual(server.requests("/missing.jpg").map { $0.header("X-Run") }, ["1", "2"], "--header is sent")

        let plain = try CLIHarness.run(["info", cat])
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertEqual(plain.stdout, "\(cat): 200x300 jpeg, 3 bands, no alpha, orientation 6, 1 page\n")
    }
}
