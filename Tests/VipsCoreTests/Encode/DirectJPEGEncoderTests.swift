import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// The direct libjpeg-turbo JPEG encoder: which bitmaps take it, and that it
/// writes exactly the bytes libvips' `jpegsave` writes with `strip`.
final class DirectJPEGEncoderTests: XCTestCase {
    let direct = ImageEncoder()
    var libvips: ImageEncoder {
        var encoder = ImageEncoder()
        encoder.usesDirectPaths = false
        return encoder
    }

    /// A photo-like bitmap (smooth gradients with fine detail), decoded from a synthesised JPEG.
    func photo(width: Int, height: Int, seed: Int) throws -> Bitmap {
        try ImageSynthesizer.bitmap(width: width, height: height, seed: seed)
    }

    func testSameBytesAsLibvipsForEverySettingAndSize() throws {
        // Odd sizes exercise the partial MCUs of 4:2:0 at the right and bottom edges.
        let sizes = [(1, 1), (2, 3), (17, 9), (256, 192), (255, 171), (171, 256)]
        let settings: [OutputFormat] = [
            .jpeg(), .jpeg(quality: 75), .jpeg(quality: 1), .jpeg(quality: 89), .jpeg(quality: 90), .jpeg(quality: 100),
            .jpeg(quality: 75, progressive: true), .jpeg(quality: 95, progressive: true),
            .jpeg(quality: 75, chromaSubsampling: .off), .jpeg(quality: 95, chromaSubsampling: .on),
            .jpeg(quality: 60, progressive: true, chromaSubsampling: .off)
        ]
        for (index, (width, height)) in sizes.enumerated() {
            let bitmap = try photo(width: width, height: height, seed: 900 + index)
            for format in settings {
                let ours = try direct.encode(bitmap, as: format)
                let theirs = try libvips.encode(bitmap, as: format)
                XCTAssertEqual(
                    ours.data, theirs.data, "\(width)×\(height) \(format): bytes differ from libvips' jpegsave")
                XCTAssertEqual(ours.width, width)
                XCTAssertEqual(ours.height, height)
            }
        }
    }

    func testNoJFIFOrOtherMetadataIsWritten() throws {
        let data = try direct.encode(try photo(width: 64, height: 48, seed: 912), as: OutputFormat.jpeg(quality: 75))
            .data
        let bytes = [UInt8](data)
        XCTAssertEqual(Array(bytes.prefix(4)), [0xFF, 0xD8, 0xFF, 0xDB], "SOI then the quantisation tables")
        // No APPn segment anywhere before the first scan.
        var offset = 2
        while offset + 4 <= bytes.count, bytes[offset] == 0xFF, bytes[offset + 1] != 0xDA {
            XCTAssertFalse(
                (0xE0...0xEF).contains(bytes[offset + 1]), String(format: "APP marker FF%02X", bytes[offset + 1]))
            offset += 2 + Int(bytes[offset + 2]) << 8 + Int(bytes[offset + 3])
        }
        XCTAssertEqual(bytes.last, 0xD9)
    }

    func testDirectOutputDecodesToTheSamePixelsAsLibvipsOutput() throws {
        let bitmap = try photo(width: 256, height: 192, seed: 913)
        let decoder = ImageDecoder()
        let ours = try decoder.decode(.data(direct.encode(bitmap, as: OutputFormat.jpeg(quality: 75)).data))
        let theirs = try decoder.decode(.data(libvips.encode(bitmap, as: OutputFormat.jpeg(quality: 75)).data))
        XCTAssertEqual(ours.width, theirs.width)
        XCTAssertEqual(ours.meanAbsoluteDifference(to: theirs), 0)
        XCTAssertLessThan(ours.meanAbsoluteDifference(to: bitmap), 12)
    }

    /// RGBA is flattened in Swift with libvips' arithmetic, then encoded
    /// directly: the same bytes as libvips' flatten + jpegsave, whatever the
    /// background and for every alpha value.
    func testRGBAIsFlattenedAsLibvipsFlattensIt() throws {
        var generator = SplitMix64(seed: 915)
        var bytes: [UInt8] = []
        for index in 0..<(64 * 48) {
            for _ in 0..<3 { bytes.append(UInt8(truncatingIfNeeded: generator.next())) }
            bytes.append(UInt8(truncatingIfNeeded: index)) // every alpha value, 0 to 255
        }
        let every = try Bitmap(width: 64, height: 48, channels: 4, pixels: bytes)
        let photo = try ImageSynthesizer.bitmap(width: 40, height: 30, seed: 914, alpha: true)
        for rgba in [every, photo] {
            for background in [Colour.white, .black, try Colour(parsing: "#3a7fc1"), .transparent] {
                for format in [OutputFormat.jpeg(quality: 75), .jpeg(quality: 92, progressive: true)] {
                    XCTAssertEqual(
                        try direct.encode(rgba, as: format, background: background).data,
                        try libvips.encode(rgba, as: format, background: background).data,
                        "\(rgba.width)×\(rgba.height) on \(background), \(format)")
                }
            }
        }
    }

    func testKeptMetadataStaysOnLibvips() throws {
        // The encoder itself declines RGBA: flattening is a separate step.
        let rgba = try ImageSynthesizer.bitmap(width: 40, height: 30, seed: 914, alpha: true)
        XCTAssertNil(try ImageEncoder.encodeJPEGDirectly(rgba, quality: 75, progressive: false, chroma: .auto))
        // With --keep-metadata the EXIF block is written as today (by libvips), orientation reset.
        let source = try ImageSynthesizer.data(width: 120, height: 80, format: .jpeg(orientation: 6))
        let decoder = ImageDecoder()
        let decoded = try decoder.decode(.data(source), size: .maxPixelSize(64))
        let metadata = try decoder.metadata(.data(source))
        XCTAssertNotNil(metadata.exif)
        let bitmap = decoded.withSource(
            BitmapSource(info: try decoder.info(.data(source)), decodedLeniently: false, metadata: metadata))
        let kept = try direct.encode(bitmap, as: OutputFormat.jpeg(quality: 75), keepingMetadata: true)
        XCTAssertEqual(
            kept.data, try libvips.encode(bitmap, as: OutputFormat.jpeg(quality: 75), keepingMetadata: true).data)
        let stripped = try direct.encode(bitmap, as: OutputFormat.jpeg(quality: 75))
        XCTAssertEqual(stripped.data, try libvips.encode(bitmap, as: OutputFormat.jpeg(quality: 75)).data)
        XCTAssertNotEqual(kept.data, stripped.data, "the kept EXIF block makes a difference")
    }
}
