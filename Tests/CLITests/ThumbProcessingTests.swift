import Foundation
import VipsCore
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
        let contain = try thumb(["--size", "100x100", "--fit", "contain", "--background", "transparent", "--format", "webp"], "photo.webp")
        XCTAssertEqual([contain.width, contain.height], [100, 100])
        XCTAssertTrue(contain.hasAlpha)
        let stretched = try thumb(["--size", "90x30", "--fit", "fill", "--format", "avif"], "photo.avif")
        XCTAssertEqual([stretched.width, stretched.height, stretched.pages], [90, 30, 1])
        XCTAssertEqual(stretched.format, .avif)
        let gif = try thumb(["--size", "40", "--format", "gif"], "photo.gif")
        XCTAssertEqual(gif.format, .gif)
        let out = dir.appendingPathComponent("kept")
        XCTAssertEqual(try CLIHarness.run(["thumb", "--size", "50", "--keep-metadata", "--out", out.path, photo.path]).status, 0)
        let kept = out.appendingPathComponent("photo.jpg").path
        XCTAssertNotNil(try decoder.metadata(.file(kept)).exif)
        XCTAssertEqual(try decoder.info(.file(kept)).orientation, 1)
    }

    func testBadFlagsAreUsageErrors() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let photo = dir.appendingPathComponent("photo.jpg")
        try ImageSynthesizer.data(width: 80, height: 60, format: .jpeg()).write(to: photo)
        for flags in [["--size", "0x10"], ["--size", "12xx"], ["--size", "x"], ["--size", "100x", "--fit", "cover"],
                      ["--fit", "outside"], ["--gravity", "up"], ["--background", "#12"], ["--format", "bmp"],
                      ["--fit", "contain", "--size", "10x10", "--gravity", "entropy"]] {
            let result = try CLIHarness.run(["thumb"] + flags + ["--out", dir.appendingPathComponent("out").path, photo.path])
            XCTAssertEqual(result.status, 2, "\(flags): \(result.stderr)")
        }
    }
}
