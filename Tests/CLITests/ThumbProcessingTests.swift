import Foundation
import VipsCore
import VipsSynthesis
import XCTest

/// `thumb`'s geometry and output flags.
final class ThumbProcessingTests: XCTestCase {
    func testSizesModesAndFormats() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let photo = dir.appendingPathComponent("photo.jpg")
        try ImageSynthesizer.data(width: 800, height: 600, format: .jpeg(orientation: 6)).write(to: photo)
        let decoder = ImageDecoder()
        func thumb(_ flags: [String], _ name: String) throws -> ImageInfo {
            let out = dir.appendingPathComponent(UUID().uuidString)
            let result = try CLIHarness.run(["thumb"] + flags + ["--out", out.path, photo.path])
            XCTAssertEqual(result.status, 0, result.stderr)
            return try decoder.info(.file(out.appendingPathComponent(name).path))
        }
        // The photo is 600×800 upright.
        let cover = try thumb(["--size", "120x80", "--fit", "cover", "--gravity", "attention"], "photo.jpg")
        XCTAssertEqual([cover.width, cover.height], [120, 80])
        let wide = try thumb(["--size", "150x"], "photo.jpg")
        XCTAssertEqual([wide.width, wide.height], [150, 200])
        let high = try thumb(["--size", "x100", "--format", "png"], "photo.png")
        XCTAssertEqual([high.width, high.height], [75, 100])
        let square = try thumb(["--size", "64"], "photo.jpg")
        XCTAssertEqual([square.width, square.height], [48, 64], "a plain N stays the N×N box")
        let contain = try thumb(
            ["--size", "100x100", "--fit", "contain", "--background", "transparent", "--format", "webp"], "photo.webp")
        XCTAssertEqual([contain.width, contain.height], [100, 100])
        XCTAssertTrue(contain.hasAlpha)
        let stretched = try thumb(["--size", "90x30", "--fit", "fill", "--format", "avif"], "photo.avif")
        XCTAssertEqual([stretched.width, stretched.height, stretched.pages], [90, 30, 1])
        XCTAssertEqual(stretched.format, .avif)
        let gif = try thumb(["--size", "40", "--format", "gif"], "photo.gif")
        XCTAssertEqual(gif.format, .gif)
        let out = dir.appendingPathComponent("kept")
        XCTAssertEqual(
            try CLIHarness.run(["thumb", "--size", "50", "--keep-metadata", "--out", out.path, photo.path]).status, 0)
        let kept = out.appendingPathComponent("photo.jpg").path
        XCTAssertNotNil(try decoder.metadata(.file(kept)).exif)
        XCTAssertEqual(try decoder.info(.file(kept)).orientation, 1)
    }

    func testBadFlagsAreUsageErrors() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let photo = dir.appendingPathComponent("photo.jpg")
        try ImageSynthesizer.data(width: 80, height: 60, format: .jpeg()).write(to: photo)
        for flags in [
            ["--size", "0x10"], ["--size", "12xx"], ["--size", "x"], ["--size", "100x", "--fit", "cover"],
            ["--fit", "outside"], ["--gravity", "up"], ["--background", "#12"], ["--format", "bmp"],
            ["--fit", "contain", "--size", "10x10", "--gravity", "entropy"]
        ] {
            let result = try CLIHarness.run(
                ["thumb"] + flags + ["--out", dir.appendingPathComponent("out").path, photo.path])
            XCTAssertEqual(result.status, 2, "\(flags): \(result.stderr)")
        }
    }
}

/// Animated inputs through `thumb --animated` and `info --json`.
final class AnimatedCLITests: XCTestCase {
    func testAnimatedThumbnailsKeepEveryFrameAndInfoReportsThem() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let frames = try [UInt8(0), 120, 240].map { level in
            try Bitmap(width: 90, height: 60, channels: 3, pixels: [UInt8](repeating: level, count: 90 * 60 * 3))
        }
        let gif = dir.appendingPathComponent("clip.gif")
        try ImageEncoder().encode(try AnimatedBitmap(frames: frames, delays: [50, 60, 70]), as: .gif).data.write(
            to: gif)
        let out = dir.appendingPathComponent("out")
        for format in ["webp", "gif"] {
            let result = try CLIHarness.run([
                "thumb", "--animated", "--size", "45", "--format", format, "--out", out.path, gif.path
            ])
            XCTAssertEqual(result.status, 0, result.stderr)
            let info = try CLIHarness.run(["info", "--json", out.appendingPathComponent("clip.\(format)").path])
            XCTAssertEqual(info.status, 0, info.stderr)
            XCTAssertTrue(info.stdout.contains("\"width\":45") || info.stdout.contains("\"width\": 45"), info.stdout)
            XCTAssertTrue(info.stdout.contains("\"frames\":3") || info.stdout.contains("\"frames\": 3"), info.stdout)
            XCTAssertTrue(info.stdout.contains("[50,60,70]"), info.stdout)
        }
        let still = try CLIHarness.run([
            "thumb", "--size", "45", "--format", "gif", "--out", dir.appendingPathComponent("still").path, gif.path
        ])
        XCTAssertEqual(still.status, 0, still.stderr)
        XCTAssertEqual(
            try ImageDecoder().info(.file(dir.appendingPathComponent("still/clip.gif").path)).pages, 1,
            "without --animated, the first frame")
        XCTAssertEqual(
            try CLIHarness.run(["thumb", "--animated", "--format", "jpeg", "--out", out.path, gif.path]).status, 2)
    }
}
