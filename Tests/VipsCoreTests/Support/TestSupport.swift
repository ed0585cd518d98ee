import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// A folder under the system temporary directory, removed when the value is dropped.
final class TemporaryFolder {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("VipsCoreTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }

    /// Writes `data` to a file called `name` and returns its path.
    func write(_ data: Data, named name: String) throws -> String {
        let file = url.appendingPathComponent(name)
        try data.write(to: file)
        return file.path
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
}

/// Synthetic inputs that several test classes share. The large ones are made
/// once per test process: synthesising 12 megapixels takes about two seconds.
enum Fixtures {
    /// A 4000×3000 baseline JPEG, for the shrink-on-load tests.
    static let largeJPEG: Data = {
        do { return try ImageSynthesizer.data(width: 4000, height: 3000, seed: 40, format: .jpeg(quality: 85)) } catch {
            preconditionFailure("cannot synthesise the large JPEG fixture: \(error)")
        }
    }()

    /// Every variant the decoder must read, at 400×300, with whether it carries alpha.
    static let variants: [(name: String, format: ImageSynthesizer.Format, alpha: Bool)] = [
        ("jpeg-baseline", .jpeg(), false),
        ("jpeg-progressive", .jpeg(progressive: true), false),
        ("png-8bit", .png(), false),
        ("png-8bit-alpha", .png(), true),
        ("png-16bit", .png(sixteenBit: true), false),
        ("png-16bit-alpha", .png(sixteenBit: true), true),
        ("png-grey", .png(grey: true), false),
        ("png-grey-alpha", .png(grey: true), true),
        ("png-grey-16bit", .png(sixteenBit: true, grey: true), false),
        ("png-palette", .png(palette: true), false),
        ("png-palette-alpha", .png(palette: true), true),
        ("png-interlaced", .png(interlaced: true), false),
        ("webp-lossy", .webp(), false),
        ("webp-lossy-alpha", .webp(), true),
        ("webp-lossless-alpha", .webp(lossless: true), true),
        ("gif", .gif, false),
        ("gif-alpha", .gif, true),
        ("tiff", .tiff, false),
        ("tiff-alpha", .tiff, true)
    ]

    /// Each of `variants` encoded at 400×300 (seed 5), made once: palette and
    /// GIF quantisation make synthesis the slow part of the format tests.
    static let variantData: [Data] = variants.map { variant in
        do {
            return try ImageSynthesizer.data(
                width: 400, height: 300, seed: 5, alpha: variant.alpha, format: variant.format)
        } catch { preconditionFailure("cannot synthesise \(variant.name): \(error)") }
    }

    /// The sniffed format each synthesiser format must produce.
    static func expectedFormat(_ format: ImageSynthesizer.Format) -> ImageFormat {
        switch format {
        case .jpeg: return .jpeg
        case .png: return .png
        case .webp: return .webp
        case .gif: return .gif
        case .tiff: return .tiff
        }
    }
}

/// Asserts that `body` throws a `VipsError` of `kind`, and returns it.
@discardableResult
func assertThrowsKind<T>(
    _ kind: VipsError.Kind, _ body: () throws(VipsError) -> T,
    _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line
) -> VipsError? {
    do {
        let value = try body()
        XCTFail("expected \(kind), got a result: \(value). \(message())", file: file, line: line)
        return nil
    } catch {
        XCTAssertEqual(error.kind, kind, "\(error). \(message())", file: file, line: line)
        XCTAssertFalse(error.message.isEmpty, "errors carry a message", file: file, line: line)
        return error
    }
}

/// Asserts that a bitmap fits inside `box` exactly (one side equal to the
/// box, the other within) and keeps `source`'s aspect ratio within a pixel.
func assertFits(
    _ bitmap: Bitmap, box: (width: Int, height: Int), source: (width: Int, height: Int),
    _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line
) {
    let scale = min(Double(box.width) / Double(source.width), Double(box.height) / Double(source.height))
    let expected = (Double(source.width) * scale, Double(source.height) * scale)
    XCTAssertLessThanOrEqual(
        abs(Double(bitmap.width) - expected.0), 1, "width \(bitmap.width) vs \(expected.0). \(message())", file: file,
        line: line)
    XCTAssertLessThanOrEqual(
        abs(Double(bitmap.height) - expected.1), 1, "height \(bitmap.height) vs \(expected.1). \(message())",
        file: file, line: line)
    XCTAssertTrue(
        bitmap.width == box.width || bitmap.height == box.height,
        "\(bitmap.width)×\(bitmap.height) touches neither side of \(box). \(message())", file: file, line: line)
    XCTAssertLessThanOrEqual(bitmap.width, box.width, message(), file: file, line: line)
    XCTAssertLessThanOrEqual(bitmap.height, box.height, message(), file: file, line: line)
    assertAspect(bitmap, source: source, message(), file: file, line: line)
}

/// Asserts the bitmap's aspect ratio matches `source`'s within a pixel.
func assertAspect(
    _ bitmap: Bitmap, source: (width: Int, height: Int),
    _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line
) {
    let heightForWidth = Double(bitmap.width) * Double(source.height) / Double(source.width)
    XCTAssertLessThanOrEqual(
        abs(heightForWidth - Double(bitmap.height)), 1,
        "\(bitmap.width)×\(bitmap.height) does not keep \(source.width):\(source.height). \(message())",
        file: file, line: line)
}

/// Asserts the bitmap is 8-bit sRGB with 3 channels, or 4 when `alpha`.
func assertSRGB8(
    _ bitmap: Bitmap, alpha: Bool, _ message: @autoclosure () -> String = "",
    file: StaticString = #filePath, line: UInt = #line
) {
    XCTAssertEqual(bitmap.channels, alpha ? 4 : 3, message(), file: file, line: line)
    XCTAssertEqual(bitmap.hasAlpha, alpha, message(), file: file, line: line)
    XCTAssertEqual(bitmap.bytesPerRow, bitmap.width * bitmap.channels, message(), file: file, line: line)
    XCTAssertEqual(bitmap.cost, bitmap.width * bitmap.height * bitmap.channels, message(), file: file, line: line)
}

extension Bitmap {
    /// The mean of each channel over the whole bitmap.
    var meanColour: [Double] {
        withUnsafeBytes { bytes in
            var sums = [Double](repeating: 0, count: channels)
            for (index, value) in bytes.enumerated() { sums[index % channels] += Double(value) }
            let count = Double(width * height)
            return sums.map { $0 / count }
        }
    }

    /// The pixel bytes as an array, for byte-for-byte comparisons.
    var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    /// Mean absolute difference per channel value against a bitmap of the same size (RGB only).
    func meanAbsoluteDifference(to other: Bitmap) -> Double {
        precondition(width == other.width && height == other.height, "compare bitmaps of one size")
        var total = 0.0
        for y in 0..<height {
            for x in 0..<width {
                let a = pixel(x: x, y: y)!, b = other.pixel(x: x, y: y)!
                for channel in 0..<3 { total += abs(Double(a[channel]) - Double(b[channel])) }
            }
        }
        return total / Double(width * height * 3)
    }

    /// The mean colour of a square of `radius` around a point (RGB only).
    func meanColour(aroundX x: Int, y: Int, radius: Int = 2) -> [Double] {
        var sums = [0.0, 0.0, 0.0], count = 0.0
        for py in max(0, y - radius)...min(height - 1, y + radius) {
            for px in max(0, x - radius)...min(width - 1, x + radius) {
                let value = pixel(x: px, y: py)!
                for channel in 0..<3 { sums[channel] += Double(value[channel]) }
                count += 1
            }
        }
        return sums.map { $0 / count }
    }
}

/// Euclidean distance between two RGB colours.
func colourDistance(_ a: [Double], _ b: [UInt8]) -> Double {
    zip(a, b).map { ($0 - Double($1)) * ($0 - Double($1)) }.reduce(0, +).squareRoot()
}

/// CRC-32 (ISO-HDLC, as PNG chunks use), for crafting valid PNG headers.
func crc32(_ bytes: some Sequence<UInt8>) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = (crc >> 1) ^ (0xEDB8_8320 & (0 &- (crc & 1))) }
    }
    return ~crc
}

/// Big-endian bytes of a 32-bit value.
func bigEndian(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
}
