import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// Animated GIF and WebP: every frame, timing, limits, round trips through `info`.
final class AnimationTests: XCTestCase {
    /// Four 120×90 frames, each a different solid colour.
    private func animation() throws -> AnimatedBitmap {
        let colours: [[UInt8]] = [[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 255]]
        let frames = try colours.map { colour in
            try Bitmap(width: 120, height: 90, channels: 3, pixels: (0..<(120 * 90)).flatMap { _ in colour })
        }
        return try AnimatedBitmap(frames: frames, delays: [100, 200, 300, 400], loopCount: 3)
    }

    func testAnimatedGIFAndWebPRoundTripThroughInfoAndDecode() throws {
        for format in [OutputFormat.gif, .webp(quality: 90)] {
            let encoded = try ImageEncoder().encode(try animation(), as: format)
            let info = try ImageDecoder().info(.data(encoded.data))
            XCTAssertEqual(info.format, format.imageFormat)
            XCTAssertEqual(info.pages, 4, "\(format)")
            XCTAssertEqual([info.width, info.height], [120, 90])

            let decoded = try ImageDecoder().decodeAnimation(.data(encoded.data), size: .maxPixelSize(60))
            XCTAssertEqual(decoded.frameCount, 4, "\(format)")
            XCTAssertEqual([decoded.width, decoded.height], [60, 45], "every frame with the same geometry")
            XCTAssertEqual(decoded.delays, [100, 200, 300, 400], "\(format)")
            XCTAssertEqual(decoded.loopCount, 3, "\(format)")
            let reds = decoded.frames.map { Int($0.pixel(x: 30, y: 20)?[0] ?? 0) }
            XCTAssertTrue(
                reds[0] > 200 && reds[1] < 60 && reds[2] < 60 && reds[3] > 200, "\(format): frames in order \(reds)")
            // Without the opt-in, the first frame, as before.
            let still = try ImageDecoder().decode(.data(encoded.data), size: .maxPixelSize(60))
            XCTAssertEqual([still.width, still.height], [60, 45])
        }
        let frames = try animation()
        assertThrowsKind(.invalidArgument, { () throws(VipsError) in try ImageEncoder().encode(frames, as: .jpeg()) })
    }

    func testFramesTogetherObeyThePixelLimit() throws {
        let encoded = try ImageEncoder().encode(try animation(), as: .gif)
        var options = DecodeOptions()
        options.limits.maxPixelCount = 120 * 90 * 3 // one frame fits, four do not
        XCTAssertNoThrow(try ImageDecoder(options: options).decode(.data(encoded.data)))
        assertThrowsKind(
            .tooLarge,
            { () throws(VipsError) in try ImageDecoder(options: options).decodeAnimation(.data(encoded.data)) })
    }

    func testStillImagesAreOneFrame() throws {
        let data = try ImageSynthesizer.data(width: 80, height: 60, format: .png())
        let still = try ImageDecoder().decodeAnimation(.data(data), size: .width(40))
        XCTAssertEqual(still.frameCount, 1)
        XCTAssertEqual([still.width, still.height], [40, 30])
        XCTAssertThrowsError(try AnimatedBitmap(frames: [], delays: []))
    }
}
