import Foundation
import VipsCore
import VipsSynthesis
import XCTest

/// `info --placeholder` and `thumb --json --placeholder`.
final class PlaceholderCommandTests: XCTestCase {
    private func objects(_ result: CLIHarness.Result) throws -> [[String: Any]] {
        try result.stdoutLines.map {
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
    }

    private func placeholder(_ object: [String: Any]) throws -> (blurHash: String, thumbHash: String, average: String) {
        let fields = try XCTUnwrap(object["placeholder"] as? [String: Any], "\(object)")
        return (
            try XCTUnwrap(fields["blurHash"] as? String), try XCTUnwrap(fields["thumbHash"] as? String),
            try XCTUnwrap(fields["averageColour"] as? String)
        )
    }

    func testInfoPrintsThePlaceholderOfASmallDecodeInProcessAndIsolated() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let png = dir.appendingPathComponent("alpha.png")
        try ImageSynthesizer.data(width: 400, height: 200, seed: 3, alpha: true, format: .png()).write(to: png)
        let jpeg = dir.appendingPathComponent("photo.jpg")
        try ImageSynthesizer.data(width: 300, height: 600, seed: 4, format: .jpeg()).write(to: jpeg)
        let text = dir.appendingPathComponent("notes.png")
        try Data("no image".utf8).write(to: text)

        let expected = try [png, jpeg].map {
            try ImagePlaceholder(ImageDecoder().decode(.file($0.path), size: .maxPixelSize(100), mode: .fit))
        }
        for isolation in ["none", "all"] {
            let result = try CLIHarness.run([
                "info", "--json", "--placeholder", "--isolate", isolation, png.path, jpeg.path, text.path
            ])
            XCTAssertEqual(result.status, 1, "the text file fails: \(result.stderr)")
            let lines = try objects(result)
            XCTAssertEqual(lines.count, 3)
            for (line, placeholder) in zip(lines, expected) {
                let printed = try self.placeholder(line)
                XCTAssertEqual(printed.blurHash, placeholder.blurHash, "isolate \(isolation)")
                XCTAssertEqual(printed.thumbHash, placeholder.thumbHashBase64, "isolate \(isolation)")
                XCTAssertEqual(printed.average, placeholder.averageColourHex, "isolate \(isolation)")
            }
            XCTAssertEqual(try self.placeholder(lines[0]).average.count, 9, "alpha: #rrggbbaa")
            XCTAssertNil(lines[2]["placeholder"])
            XCTAssertNotNil(lines[2]["error"])
        }

        let textLine = try CLIHarness.run(["info", "--placeholder", jpeg.path])
        XCTAssertEqual(textLine.status, 0)
        XCTAssertTrue(
            textLine.stdout.contains(
                "blurhash \(expected[1].blurHash), thumbhash \(expected[1].thumbHashBase64), average \(expected[1].averageColourHex)"
            ),
            textLine.stdout)
        let plain = try CLIHarness.run(["info", "--json", jpeg.path])
        XCTAssertNil(try objects(plain).first?["placeholder"], "only with --placeholder")
    }

    func testThumbPrintsEachThumbnailsPlaceholderAlsoForOutputsUpToDate() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let input = dir.appendingPathComponent("photo.jpg")
        try ImageSynthesizer.data(width: 800, height: 400, seed: 8, format: .jpeg()).write(to: input)
        let out = dir.appendingPathComponent("thumbs")
        let cache = dir.appendingPathComponent("cache")
        let common = ["thumb", "--json", "--placeholder", "-s", "200", "-f", "png", "--cache-dir", cache.path]
        let arguments = common + ["-o", out.path, input.path]

        let first = try CLIHarness.run(arguments)
        XCTAssertEqual(first.status, 0, first.stderr)
        let written = try XCTUnwrap(try objects(first).first { $0["status"] as? String == "written" })
        let output = out.appendingPathComponent(try XCTUnwrap(written["output"] as? String))
        // From the thumbnail (200×100), downscaled to 100×50: the PNG holds exactly its pixels.
        let thumbnail = try ImageDecoder().decode(.file(output.path))
        XCTAssertEqual([thumbnail.width, thumbnail.height], [200, 100])
        let expected = try ImagePlaceholder(thumbnail)
        XCTAssertEqual(try placeholder(written).blurHash, expected.blurHash)
        XCTAssertEqual(try placeholder(written).thumbHash, expected.thumbHashBase64)

        let second = try CLIHarness.run(arguments)
        XCTAssertEqual(second.status, 0, second.stderr)
        let skipped = try XCTUnwrap(try objects(second).first { $0["status"] as? String == "skipped" })
        XCTAssertEqual(try placeholder(skipped).blurHash, expected.blurHash, "an up-to-date output's, from its file")
        XCTAssertEqual(try placeholder(skipped).thumbHash, expected.thumbHashBase64)

        // Into a new folder, from the --cache-dir cache: no decode, the stored PNG's placeholder.
        let again = try CLIHarness.run(common + ["-o", dir.appendingPathComponent("again").path, input.path])
        XCTAssertEqual(again.status, 0, again.stderr)
        let cached = try XCTUnwrap(try objects(again).first { $0["status"] as? String == "written" })
        XCTAssertEqual(cached["fromCache"] as? Bool, true)
        XCTAssertEqual(try placeholder(cached).blurHash, expected.blurHash, "a stored thumbnail's, from its bytes")
        XCTAssertEqual(try placeholder(cached).thumbHash, expected.thumbHashBase64)

        let withoutJSON = try CLIHarness.run(["thumb", "--placeholder", "-o", out.path, input.path])
        XCTAssertEqual(withoutJSON.status, 2, "--placeholder is printed in --json objects")
        XCTAssertTrue(withoutJSON.stderr.contains("--json"), withoutJSON.stderr)
    }
}
