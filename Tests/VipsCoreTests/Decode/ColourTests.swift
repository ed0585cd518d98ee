import CVipsShim
import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// Colour conversion: whatever the source colour model and depth, the output
/// is 8-bit sRGB that looks like the picture that was encoded.
final class ColourTests: XCTestCase {
    let decoder = ImageDecoder()

    /// The thumbnail of the plain 8-bit RGB PNG of `seed`: the colour reference.
    func reference(seed: Int, alpha: Bool = false, grey: Bool = false) throws -> Bitmap {
        let data = try ImageSynthesizer.data(
            width: 400, height: 300, seed: seed, alpha: alpha, format: .png(grey: grey))
        return try decoder.decode(.data(data), size: .maxPixelSize(200))
    }

    func assertLooksLike(
        _ bitmap: Bitmap, _ reference: Bitmap, meanTolerance: Double, pixelTolerance: Double,
        _ label: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(bitmap.width, reference.width, label, file: file, line: line)
        XCTAssertEqual(bitmap.height, reference.height, label, file: file, line: line)
        let mean = bitmap.meanColour, expected = reference.meanColour
        for channel in 0..<3 {
            XCTAssertLessThan(
                abs(mean[channel] - expected[channel]), meanTolerance,
                "\(label): channel \(channel) mean \(mean[channel]) vs \(expected[channel])", file: file, line: line)
        }
        // The mean alone would pass a blurred or channel-swapped picture of similar tone.
        XCTAssertLessThan(bitmap.meanAbsoluteDifference(to: reference), pixelTolerance, label, file: file, line: line)
    }

    func testCMYKJPEGComesOutAsPlausibleSRGB() throws {
        let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 31, format: .jpeg(cmyk: true))
        XCTAssertEqual(try decoder.info(.data(data)).bands, 4)
        let bitmap = try decoder.decode(.data(data), size: .maxPixelSize(200))
        assertSRGB8(bitmap, alpha: false, "CMYK")
        assertLooksLike(bitmap, try reference(seed: 31), meanTolerance: 12, pixelTolerance: 16, "CMYK JPEG")
        // The full-size path (no resize) must convert too.
        let full = try decoder.decode(.data(data))
        assertSRGB8(full, alpha: false, "CMYK original")
        XCTAssertEqual(full.width, 400)
    }

    func testSixteenBitPNGComesOutAsEightBitSRGB() throws {
        let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 32, format: .png(sixteenBit: true))
        let bitmap = try decoder.decode(.data(data), size: .maxPixelSize(200))
        assertSRGB8(bitmap, alpha: false, "16-bit")
        assertLooksLike(bitmap, try reference(seed: 32), meanTolerance: 2, pixelTolerance: 2, "16-bit PNG")

        let withAlpha = try ImageSynthesizer.data(
            width: 400, height: 300, seed: 32, alpha: true, format: .png(sixteenBit: true))
        let alphaBitmap = try decoder.decode(.data(withAlpha), size: .maxPixelSize(200))
        assertSRGB8(alphaBitmap, alpha: true, "16-bit with alpha")
        let alphaReference = try reference(seed: 32, alpha: true)
        XCTAssertLessThan(abs(alphaBitmap.meanColour[3] - alphaReference.meanColour[3]), 2, "alpha scaled, not clipped")
        assertLooksLike(alphaBitmap, alphaReference, meanTolerance: 2, pixelTolerance: 2, "16-bit PNG with alpha")
    }

    func testGreyComesOutAsNeutralRGB() throws {
        for format: ImageSynthesizer.Format in [.png(grey: true), .png(sixteenBit: true, grey: true)] {
            let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 33, format: format)
            let bitmap = try decoder.decode(.data(data), size: .maxPixelSize(200))
            assertSRGB8(bitmap, alpha: false, "\(format)")
            for y in stride(from: 0, to: bitmap.height, by: 13) {
                for x in stride(from: 0, to: bitmap.width, by: 13) {
                    let pixel = bitmap.pixel(x: x, y: y)!
                    XCTAssertTrue(
                        pixel[0] == pixel[1] && pixel[1] == pixel[2], "\(format): grey at \(x),\(y) is \(pixel)")
                }
            }
            assertLooksLike(
                bitmap, try reference(seed: 33, grey: true), meanTolerance: 2, pixelTolerance: 2, "\(format)")
        }
    }

    func testEveryFormatKeepsThePicturesColours() throws {
        // Lossy and palette formats shift colours a little, never a lot.
        let expected = try reference(seed: 34)
        let formats: [(ImageSynthesizer.Format, Double)] = [
            (.jpeg(), 6), (.jpeg(progressive: true), 6), (.webp(), 10), (.webp(lossless: true), 3),
            (.png(palette: true), 10), (.png(interlaced: true), 1), (.gif, 14), (.tiff, 1)
        ]
        for (format, tolerance) in formats {
            let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 34, format: format)
            let bitmap = try decoder.decode(.data(data), size: .maxPixelSize(200))
            assertLooksLike(bitmap, expected, meanTolerance: 6, pixelTolerance: tolerance, "\(format)")
        }
    }

    func testDifferentSeedsAreDifferentPictures() throws {
        // Guards the colour tests above: they would prove nothing if every seed looked alike.
        let a = try reference(seed: 35), b = try reference(seed: 36)
        XCTAssertGreaterThan(a.meanAbsoluteDifference(to: b), 20)
    }
}

/// Embedded ICC profiles: pixels stored in Display P3, Adobe RGB or a grey
/// profile come out as sRGB converted with that profile (as `vips
/// icc_transform … srgb --embedded` does), not as their raw numbers.
final class EmbeddedProfileTests: XCTestCase {
    let folder = try! TemporaryFolder()

    /// The Adobe RGB profile as a file, for libvips to convert into.
    lazy var adobeRGB: String = try! folder.write(ICCProfileWriter.adobeRGB(), named: "adobe-rgb.icc")
    lazy var greyProfile: String = try! folder.write(ICCProfileWriter.grey(), named: "grey-1.8.icc")

    /// The photo in `profile`, more saturated than the default synthetic one so the gamut matters.
    func photo(_ profile: String, format: ImageSynthesizer.Format = .jpeg(quality: 95)) throws -> Data {
        try ImageSynthesizer.data(width: 600, height: 400, seed: 51, iccProfile: profile, format: format)
    }

    /// The reference: the file converted to sRGB with its embedded profile by
    /// libvips at full size (8-bit, profile-free PNG), then thumbnailed like any sRGB file.
    func reference(_ data: Data, decoder: ImageDecoder, size: Int = 200) throws -> Bitmap {
        let converted: Data = try ImageInput.data(data).withSource { source throws(VipsError) in
            let format = ImageFormat.sniff(Array(data.prefix(32)))
            let image = try ImageDecoder.load("reference") {
                vl_load_named(
                    LibVips.table, format?.libvipsLoader ?? "jpegload_source", source, VIPS_ACCESS_RANDOM,
                    VIPS_FAIL_ON_NONE)
            }
            let srgb = try image.apply(.internal, "reference") {
                vl_icc_transform_embedded(LibVips.table, $0, $1, "srgb")
            }
            var buffer: UnsafeMutableRawPointer? = nil
            var length = 0
            guard vl_pngsave_options(LibVips.table, srgb.pointer, &buffer, &length, 1, 0, 1) == 0, let buffer else {
                throw VipsError(.encodeFailed, VipsRuntime.takeErrorMessage(default: "png"))
            }
            return Data(bytesNoCopy: buffer, count: length, deallocator: .custom { pointer, _ in g_free(pointer) })
        }
        return try decoder.decode(.data(converted), size: .maxPixelSize(size))
    }

    func check(
        _ profile: String, _ name: String, format: ImageSynthesizer.Format = .jpeg(quality: 95),
        decoder: ImageDecoder = ImageDecoder(), tolerance: Double = 1.0,
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let data = try photo(profile, format: format)
        let expected = try reference(data, decoder: decoder)
        let bitmap = try decoder.decode(.data(data), size: .maxPixelSize(200))
        XCTAssertEqual(bitmap.width, expected.width, name, file: file, line: line)
        let difference = bitmap.meanAbsoluteDifference(to: expected)
        XCTAssertLessThan(
            difference, tolerance, "\(name): mean difference to the converted reference", file: file, line: line)
        // The old behaviour (the profile's numbers shown as sRGB) must fail the same check.
        let unconverted = try decoder.decode(.data(stripICC(data)), size: .maxPixelSize(200))
        XCTAssertGreaterThan(
            unconverted.meanAbsoluteDifference(to: expected), 2.0,
            "\(name): without the conversion the picture would differ visibly", file: file, line: line)
    }

    func testDisplayP3JPEGIsConvertedWithItsProfile() throws {
        try check("p3", "P3 JPEG")
        try check("p3", "P3 JPEG, quality mode", decoder: ImageDecoder(options: DecodeOptions(shrinkOnLoad: .quality)))
    }

    func testAdobeRGBJPEGIsConvertedWithItsProfile() throws {
        try check(adobeRGB, "Adobe RGB JPEG")
        try check(
            adobeRGB, "Adobe RGB JPEG, quality mode",
            decoder: ImageDecoder(options: DecodeOptions(shrinkOnLoad: .quality)))
    }

    func testPNGTIFFAndWebPAreConvertedWithTheirProfiles() throws {
        try check("p3", "P3 PNG", format: .png())
        try check(adobeRGB, "Adobe RGB 16-bit PNG", format: .png(sixteenBit: true))
        try check(adobeRGB, "Adobe RGB TIFF", format: .tiff)
        // WebP's scaled decode (shrink on load) alone differs from a full decode by about a level.
        try check("p3", "P3 WebP", format: .webp(quality: 95), tolerance: 1.5)
    }

    func testGreyProfileIsConverted() throws {
        try check(greyProfile, "grey gamma 1.8 PNG", format: .png(grey: true))
    }

    func testFullSizeDecodeIsConvertedToo() throws {
        let data = try photo("p3")
        let bitmap = try ImageDecoder().decode(.data(data))
        XCTAssertLessThan(
            bitmap.meanAbsoluteDifference(to: try reference(data, decoder: ImageDecoder(), size: 600)), 1.0)
    }

    func testSRGBProfilesAreRecognisedAndOthersAreNot() throws {
        func profile(of data: Data) throws -> ICCProfile? {
            try ImageInput.data(data).withSource { source throws(VipsError) in
                let image = try ImageDecoder.load("probe") {
                    vl_load_named(LibVips.table, "jpegload_source", source, VIPS_ACCESS_SEQUENTIAL, VIPS_FAIL_ON_NONE)
                }
                return image.withBlob("icc-profile-data") { ICCProfile($0) } ?? nil
            }
        }
        let srgb = try XCTUnwrap(try profile(of: try photo("srgb")))
        XCTAssertEqual(srgb.colourSpace, .rgb)
        XCTAssertTrue(srgb.isSRGB, "libvips' own sRGB profile")
        let p3 = try XCTUnwrap(try profile(of: try photo("p3")))
        XCTAssertFalse(p3.isSRGB, "Display P3 has sRGB's curve but other primaries")
        XCTAssertFalse(try XCTUnwrap(try profile(of: try photo(adobeRGB))).isSRGB, "Adobe RGB")
        let cmyk = try XCTUnwrap(
            try profile(of: try ImageSynthesizer.data(width: 64, height: 48, format: .jpeg(cmyk: true))))
        XCTAssertEqual(cmyk.colourSpace, .cmyk)
        // sRGB's primaries with a gamma 2.2 curve are not sRGB.
        let gamma = ICCProfileWriter.rgb(
            description: "sRGB primaries, gamma 2.2", colorants: ICCProfile.srgbColorants, gamma: 2.2)
        XCTAssertEqual(gamma.withUnsafeBytes { ICCProfile($0) }?.isSRGB, false)
        // Hostile bytes: truncated, huge tag counts, tags pointing outside.
        var bytes = [UInt8](ICCProfileWriter.adobeRGB())
        XCTAssertNil(Array(bytes.prefix(100)).withUnsafeBytes { ICCProfile($0) })
        bytes.replaceSubrange(128..<132, with: bigEndian(0xFFFF_FFFF))
        XCTAssertNil(bytes.withUnsafeBytes { ICCProfile($0) })
        bytes = [UInt8](ICCProfileWriter.adobeRGB())
        bytes.replaceSubrange(136..<140, with: bigEndian(0xFFFF_FFF0))
        XCTAssertEqual(bytes.withUnsafeBytes { ICCProfile($0) }?.isSRGB, false)
    }
}

/// The same file with its ICC profile removed (JPEG APP2 ICC_PROFILE segments, PNG iCCP,
/// TIFF and WebP are stripped by re-reading the pixels losslessly): the old behaviour's input.
func stripICC(_ data: Data) -> Data {
    let bytes = [UInt8](data)
    if bytes.starts(with: [0xFF, 0xD8]) {
        var out: [UInt8] = [0xFF, 0xD8]
        var index = 2
        while index + 4 <= bytes.count, bytes[index] == 0xFF {
            let marker = bytes[index + 1]
            if marker == 0xDA { break }
            let length = Int(bytes[index + 2]) << 8 | Int(bytes[index + 3])
            let segment = bytes[index..<min(bytes.count, index + 2 + length)]
            let isICC = marker == 0xE2 && segment.dropFirst(4).starts(with: Array("ICC_PROFILE".utf8))
            if !isICC { out += segment }
            index += 2 + length
        }
        return Data(out + bytes[index...])
    }
    if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47]) {
        var out = Array(bytes.prefix(8))
        var index = 8
        while index + 12 <= bytes.count {
            let length =
                Int(bytes[index]) << 24 | Int(bytes[index + 1]) << 16 | Int(bytes[index + 2]) << 8
                | Int(bytes[index + 3])
            let type = String(decoding: bytes[(index + 4)..<(index + 8)], as: UTF8.self)
            if type != "iCCP" { out += bytes[index..<(index + 12 + length)] }
            index += 12 + length
        }
        return Data(out)
    }
    // TIFF, WebP: lossless re-encode of the same numbers without the profile.
    do {
        return try ImageInput.data(data).withSource { source throws(VipsError) in
            let format = ImageFormat.sniff(Array(data.prefix(32)))
            let image = try ImageDecoder.load("strip") {
                vl_load_named(
                    LibVips.table, format?.libvipsLoader ?? "tiffload_source", source, VIPS_ACCESS_RANDOM,
                    VIPS_FAIL_ON_NONE)
            }
            var buffer: UnsafeMutableRawPointer? = nil
            var length = 0
            guard vl_pngsave_options(LibVips.table, image.pointer, &buffer, &length, 1, 0, 1) == 0, let buffer else {
                throw VipsError(.encodeFailed, VipsRuntime.takeErrorMessage(default: "png"))
            }
            return Data(bytesNoCopy: buffer, count: length, deallocator: .custom { pointer, _ in g_free(pointer) })
        }
    } catch {
        preconditionFailure("cannot strip the profile: \(error)")
    }
}
