import Foundation
import VipsCore
import VipsLoad
import VipsServe
import VipsSynthesis
import XCTest

/// min-width, min-height, zoom, extend_aspect_ratio, trim, flip, pixelate and
/// auto_rotate: imgproxy's arguments (options/parser/apply.go), their
/// canonical form (one cache key for every spelling), and the planned decode
/// still shrinking on load with each of them.
final class GeometryOptionParsingTests: XCTestCase {
    private let parser = ProcessingURLParser(sources: try! SourcePolicy())

    private func options(_ segments: String, file: StaticString = #filePath, line: UInt = #line) -> ProcessingOptions? {
        do {
            return try parser.parseURL("/_/\(segments)/plain/http://example.com/a.jpg").options
        } catch {
            XCTFail("\(segments): \(error)", file: file, line: line)
            return nil
        }
    }

    private func assertRefused(
        _ segments: String, naming name: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        do {
            let parsed = try parser.parseURL("/_/\(segments)/plain/http://example.com/a.jpg")
            XCTFail("\(segments) parsed: \(parsed.options)", file: file, line: line)
        } catch {
            XCTAssertEqual(error.reason, .invalidOption, "\(segments): \(error)", file: file, line: line)
            XCTAssertTrue(error.message.contains(name), "\(segments): \(error)", file: file, line: line)
        }
    }

    func testMinSizesAndZoom() throws {
        let o = try XCTUnwrap(options("mw:120/min-height:80/z:1.5"))
        XCTAssertEqual([o.minWidth, o.minHeight], [120, 80])
        XCTAssertEqual([o.zoomWidth, o.zoomHeight], [1.5, 1.5], "one argument zooms both sides")
        let two = try XCTUnwrap(options("zoom:2:0.5"))
        XCTAssertEqual([two.zoomWidth, two.zoomHeight], [2, 0.5])
        for bad in ["mw:-1", "mh:x", "mw:1:2"] { assertRefused(bad, naming: String(bad.prefix { $0 != ":" })) }
        for bad in ["z:0", "z:-1", "z:1:0", "z:1:2:3", "z:"] { assertRefused(bad, naming: "z") }
    }

    func testExtendAspectRatio() throws {
        let o = try XCTUnwrap(options("exar:1:no:5:0.1"))
        XCTAssertTrue(o.extendAspectRatio)
        XCTAssertEqual(o.extendAspectRatioGravity, .init(.north, x: 5, y: 0.1))
        XCTAssertEqual(options("extend_ar:1")?.extendAspectRatio, true)
        XCTAssertEqual(options("extend_aspect_ratio:1/exar:0")?.extendAspectRatio, false)
        assertRefused("exar:1:sm", naming: "exar")
        assertRefused("exar:1:ce:1:2:3", naming: "exar")
        assertRefused("exar:x", naming: "exar")
    }

    func testTrim() throws {
        let o = try XCTUnwrap(options("t:10:ff0000:1:1"))
        XCTAssertEqual(o.trimThreshold, 10)
        XCTAssertEqual(o.trimColour, Colour(red: 255, green: 0, blue: 0))
        XCTAssertEqual([o.trimEqualHorizontal, o.trimEqualVertical], [true, true])
        XCTAssertEqual(options("trim:5:f00")?.trimColour, Colour(red: 255, green: 0, blue: 0), "three digits")
        // An empty threshold turns it off; an empty colour goes back to the corner's; flags keep their value.
        let off = try XCTUnwrap(options("t:10:ff0000:1/t::"))
        XCTAssertNil(off.trimThreshold)
        XCTAssertNil(off.trimColour)
        XCTAssertTrue(off.trimEqualHorizontal)
        for bad in ["t:-1", "t:x", "t:10:zz", "t:10:ff00", "t:10::2", "t:1:2:3:4:5"] { assertRefused(bad, naming: "t") }
    }

    func testFlipPixelateAndAutoRotate() throws {
        XCTAssertEqual(options("fl:1").map { [$0.flipHorizontal, $0.flipVertical] }, [true, false])
        XCTAssertEqual(options("flip::1").map { [$0.flipHorizontal, $0.flipVertical] }, [false, true])
        XCTAssertEqual(options("fl:1:1/fl:0").map { [$0.flipHorizontal, $0.flipVertical] }, [false, true])
        XCTAssertEqual(options("pix:12")?.pixelate, 12)
        XCTAssertEqual(options("pixelate:0")?.pixelate, 0)
        XCTAssertEqual(ProcessingOptions().autoRotate, true, "imgproxy's default")
        XCTAssertEqual(options("ar:0")?.autoRotate, false)
        XCTAssertEqual(options("auto_rotate:false/ar:t")?.autoRotate, true)
        for bad in ["fl:2", "fl:1:1:1"] { assertRefused(bad, naming: "fl") }
        assertRefused("pix:-2", naming: "pix")
        assertRefused("ar:maybe", naming: "ar")
    }

    func testCanonicalSegmentsReparseAndNameTheVariant() throws {
        let target =
            "/_/rs:fill:300:200/mw:120/mh:80/z:1.5:2/exar:1:sowe:3:0.25/t:12.5:0a0b0c:1:0/fl:0:1/pix:6/ar:0"
            + "/plain/http://example.com/a.jpg"
        let parsed = try parser.parseURL(target)
        let again = try parser.parseURL(parsed.canonicalPath)
        XCTAssertEqual(again.options, parsed.options)
        XCTAssertEqual(
            parsed.options.canonicalSegments,
            [
                "rt:fill", "w:300", "h:200", "mw:120", "mh:80", "z:1.5:2.0", "exar:1:sowe:3.0:0.25",
                "t:12.5:0a0b0c:1:0",
                "fl:0:1", "pix:6", "ar:0"
            ])
        // Defaults are left out; other spellings give the same variant.
        XCTAssertEqual(try XCTUnwrap(options("mw:0/z:1/exar:0/t:/fl:0:0/pix:1/ar:1")).canonicalSegments, [])
        XCTAssertEqual(
            try XCTUnwrap(options("zoom:2/flip:1/pixelate:3/auto_rotate:0/trim:5")).canonicalSegments,
            try XCTUnwrap(options("z:2:2/fl:1:0/pix:3/ar:false/t:5::0:0")).canonicalSegments)
        XCTAssertNotEqual(options("t:5")?.canonicalSegments, options("t:6")?.canonicalSegments)
    }

    func testZoomAndMinSizesAreBoundedByTheResultLimit() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent(
            "vipsserve-limits-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        try ImageSynthesizer.data(width: 8, height: 8, format: .png()).write(to: root.appendingPathComponent("a.png"))
        let parser = ProcessingURLParser(sources: try SourcePolicy(localRoot: root.path))
        for (segments, name) in [("w:5000/z:2", "zoom"), ("mw:9000", "min-width"), ("mh:5000/dpr:2", "min-height")] {
            XCTAssertThrowsError(try parser.parse("/_/\(segments)/plain/local:///a.png"), segments) { error in
                XCTAssertEqual((error as? ProcessingURLError)?.reason, .invalidOption, segments)
                XCTAssertTrue((error as? ProcessingURLError)?.message.contains(name) == true, "\(error)")
            }
        }
        XCTAssertNoThrow(try parser.parse("/_/w:4000/z:2/mw:8000/plain/local:///a.png"))
    }

    /// Each option keeps the decode planned from the header: a 4000×3000 JPEG is decoded at 1/8.
    func testTheOptionsKeepShrinkOnLoad() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent(
            "vipsserve-options-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        try ImageSynthesizer.data(width: 4000, height: 3000, seed: 12, format: .jpeg(quality: 90, orientation: 6))
            .write(to: root.appendingPathComponent("large.jpg"))
        let parser = ProcessingURLParser(sources: try SourcePolicy(localRoot: root.path))
        let pipeline = ImagePipeline(configuration: .init(decodeConcurrency: 2))
        for (options, size) in [
            ("rs:fit:250:250/mw:300", [250, 250]), ("rs:fit:200:200/z:1.25", [188, 250]),
            ("rs:fit:300:300/exar:1", [300, 300]), ("rs:fill:250:250/fl:1:1/rot:90", [250, 250]),
            ("rs:fit:250:250/ar:0", [250, 188]), ("rs:fit:250:250/pix:10", [188, 250]),
            ("c:1000:2000:nowe/rs:fit:100:100/ar:0/fl:1", [50, 100]), ("rs:force:300:200", [300, 200])
        ] {
            let request = try parser.parse("/_/\(options)/plain/local:///large.jpg").imageRequest
            let bitmap = try await pipeline.image(for: request)
            XCTAssertEqual([bitmap.width, bitmap.height], size, options)
            XCTAssertEqual(bitmap.source?.loadShrink, 8, "\(options): decoded at 1/8, not at full size")
        }
    }
}
