import Foundation
import XCTest
@testable import VipsCore
@_spi(Testing) import VipsCore

/// The direct libspng path: which PNGs take it (decided from the header),
/// and that what it returns is what the libvips path returns.
final class DirectPNGTests: XCTestCase {
    let fast = ImageDecoder()
    var libvipsFast: ImageDecoder {
        var decoder = ImageDecoder()
        decoder.usesDirectPaths = false
        return decoder
    }
    let quality = ImageDecoder(options: DecodeOptions(shrinkOnLoad: .quality))
    let strict = ImageDecoder(options: DecodeOptions(strict: true))
    var libvipsStrict: ImageDecoder {
        var decoder = strict
        decoder.usesDirectPaths = false
        return decoder
    }

    /// Every kind of PNG the direct path takes, as (label, bytes).
    func directKinds(width: Int = 300, height: Int = 200, seed: Int = 1) throws -> [(String, Data)] {
        var kinds: [(String, Data)] = []
        for alpha in [false, true] {
            let suffix = alpha ? " + alpha" : ""
            kinds.append(("RGB\(suffix)", try ImageSynthesizer.data(width: width, height: height, seed: seed, alpha: alpha, format: .png())))
            kinds.append(("grey\(suffix)", try ImageSynthesizer.data(width: width, height: height, seed: seed, alpha: alpha,
                                                                     format: .png(grey: true))))
            kinds.append(("16-bit RGB\(suffix)", try ImageSynthesizer.data(width: width, height: height, seed: seed, alpha: alpha,
                                                                           format: .png(sixteenBit: true))))
            kinds.append(("16-bit grey\(suffix)", try ImageSynthesizer.data(width: width, height: height, seed: seed, alpha: alpha,
                                                                            format: .png(sixteenBit: true, grey: true))))
            kinds.append(("palette\(suffix)", try ImageSynthesizer.data(width: width, height: height, seed: seed, alpha: alpha,
                                                                        format: .png(palette: true))))
        }
        return kinds
    }

    // MARK: - Routes

    func testPlainPNGsTakeTheDirectPath() throws {
        for (label, data) in try directKinds() {
            XCTAssertEqual(fast.pngRoute(.data(data)), .direct, label)
        }
        let srgb = try ImageSynthesizer.data(width: 120, height: 80, iccProfile: "srgb", format: .png())
        XCTAssertEqual(fast.pngRoute(.data(srgb)), .direct, "an sRGB profile")
        XCTAssertEqual(fast.pngRoute(.data(try Self.withChunk("eXIf", Self.orientationEXIF(6), into: srgb))), .direct, "eXIf")
    }

    func testEverythingElseIsSentToLibvipsFromTheHeader() throws {
        let plain = try ImageSynthesizer.data(width: 120, height: 80, format: .png())
        XCTAssertEqual(quality.pngRoute(.data(plain)), .libvips("quality mode uses libvips' lanczos path"))
        XCTAssertEqual(fast.pngRoute(.data(plain), allowUpscale: true), .libvips("upscaling"))
        let interlaced = try ImageSynthesizer.data(width: 120, height: 80, format: .png(interlaced: true))
        XCTAssertEqual(fast.pngRoute(.data(interlaced)), .libvips("interlaced (Adam7)"))
        let p3 = try ImageSynthesizer.data(width: 120, height: 80, iccProfile: "p3", format: .png())
        XCTAssertEqual(fast.pngRoute(.data(p3)), .libvips("ICC profile is not sRGB"))
        // An acTL chunk (APNG): libvips decides what it shows.
        let animated = try Self.withChunk("acTL", [0, 0, 0, 1, 0, 0, 0, 0], into: plain)
        XCTAssertEqual(fast.pngRoute(.data(animated)), .libvips("animated (APNG)"))
        XCTAssertEqual(fast.pngRoute(.data(Data(plain.prefix(20)))), .libvips("header not understood by libspng"))
        // A reduce too large to hold: streamed by libvips.
        let wide = try ImageSynthesizer.data(width: 4000, height: 3000, format: .png())
        guard case .libvips(let reason) = fast.pngRoute(.data(wide), size: .maxPixelSize(3500)) else {
            return XCTFail("a 4000×3000 → 3500 reduce is streamed by libvips")
        }
        XCTAssertTrue(reason.hasPrefix("residual reduce needs"), reason)
        XCTAssertEqual(fast.pngRoute(.data(wide), size: .maxPixelSize(256)), .direct, "while a thumbnail of it is not")
    }

    func testRoutedToLibvipsStillDecodeAsBefore() throws {
        let interlaced = try ImageSynthesizer.data(width: 300, height: 200, seed: 5, format: .png(interlaced: true))
        let p3 = try ImageSynthesizer.data(width: 300, height: 200, seed: 5, iccProfile: "p3", format: .png())
        let animated = try Self.withChunk("acTL", [0, 0, 0, 1, 0, 0, 0, 0],
                                          into: try ImageSynthesizer.data(width: 300, height: 200, seed: 5, format: .png()))
        for data in [interlaced, p3, animated] {
            let decoded = try fast.decode(.data(data), size: .maxPixelSize(100))
            let reference = try libvipsFast.decode(.data(data), size: .maxPixelSize(100))
            XCTAssertEqual(decoded.bytes, reference.bytes, "the same libvips decode")
        }
    }

    // MARK: - Pixels and sizes

    func testSizesAreTodaysFastModeAndPixelsMatchTheLibvipsPath() throws {
        for (width, height) in [(300, 200), (641, 479), (97, 33)] {
            for (label, data) in try directKinds(width: width, height: height, seed: width) {
                for size in [TargetSize.maxPixelSize(256), .maxPixelSize(100), .fit(width: 50, height: 37), .maxPixelSize(8),
                             .original, .maxPixelSize(2000)] {
                    let what = "\(width)×\(height) \(label) → \(size)"
                    let direct = try fast.decode(.data(data), size: size)
                    let viaLibvips = try libvipsFast.decode(.data(data), size: size)
                    XCTAssertEqual([direct.width, direct.height, direct.channels],
                                   [viaLibvips.width, viaLibvips.height, viaLibvips.channels], what)
                    guard direct.width == viaLibvips.width, direct.height == viaLibvips.height,
                          direct.channels == viaLibvips.channels else { continue }
                    let (mean, maximum) = difference(direct, viaLibvips)
                    XCTAssertLessThanOrEqual(mean, 1.0, "\(what): mean")
                    XCTAssertLessThanOrEqual(maximum, 16, "\(what): max")
                }
            }
        }
    }

    func testPhotographicPNGsMatchTheLibvipsPath() throws {
        // The benchmark corpus' kind: 2000×1500 photos, with and without alpha.
        for alpha in [false, true] {
            let data = try ImageSynthesizer.data(width: 2000, height: 1500, seed: 9, alpha: alpha, format: .png())
            let direct = try fast.decode(.data(data), size: .maxPixelSize(256))
            let viaLibvips = try libvipsFast.decode(.data(data), size: .maxPixelSize(256))
            XCTAssertEqual([direct.width, direct.height, direct.channels], [viaLibvips.width, viaLibvips.height, viaLibvips.channels])
            let (mean, maximum) = difference(direct, viaLibvips)
            XCTAssertLessThanOrEqual(mean, 1.0, "alpha \(alpha)")
            XCTAssertLessThanOrEqual(maximum, 16, "alpha \(alpha)")
        }
    }

    // MARK: - Helpers

    func difference(_ a: Bitmap, _ b: Bitmap) -> (mean: Double, max: Int) {
        let x = a.bytes, y = b.bytes
        var total = 0, maximum = 0
        for index in x.indices {
            let d = abs(Int(x[index]) - Int(y[index]))
            total += d
            maximum = max(maximum, d)
        }
        return (Double(total) / Double(max(1, x.count)), maximum)
    }

    /// A big-endian TIFF structure holding only an orientation tag.
    static func orientationEXIF(_ orientation: UInt8) -> [UInt8] {
        [0x4D, 0x4D, 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, orientation, 0, 0, 0, 0, 0, 0]
    }

    /// `png` with a chunk inserted right after IHDR (its CRC computed).
    static func withChunk(_ type: String, _ payload: [UInt8], into png: Data) throws -> Data {
        let bytes = [UInt8](png)
        // Signature (8) + IHDR (4 length + 4 type + 13 data + 4 CRC).
        let end = 8 + 25
        guard bytes.count > end else { throw VipsError(.invalidArgument, "not a PNG") }
        let body = Array(type.utf8) + payload
        let length = UInt32(payload.count), crc = crc32(body)
        let chunk = [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + body
            + [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)]
        return Data(bytes[..<end] + chunk + bytes[end...])
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
        }
        return ~crc
    }
}
