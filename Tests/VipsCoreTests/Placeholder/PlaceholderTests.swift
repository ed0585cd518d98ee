import Foundation
import VipsCore
import VipsSynthesis
import XCTest

/// BlurHash, ThumbHash and the average colour: against strings the reference
/// encoders (PyPI `blurhash` 1.1.5 and `thumbhash` 0.1.2) give for the same
/// pixels, and against what the formats say a flat image, an aspect ratio or
/// alpha must give. `scripts/check-placeholders.sh` runs the references
/// themselves on more images.
final class PlaceholderTests: XCTestCase {
    /// 64×40: red grows to the right, green downwards, blue 128.
    private func gradient() throws -> Bitmap {
        var pixels: [UInt8] = []
        for y in 0..<40 {
            for x in 0..<64 { pixels += [UInt8(x * 255 / 63), UInt8(y * 255 / 39), 128] }
        }
        return try Bitmap(width: 64, height: 40, channels: 3, pixels: pixels)
    }

    /// 30×90, opaque, a pattern with signal in every channel.
    private func portrait() throws -> Bitmap {
        var pixels: [UInt8] = []
        for y in 0..<90 {
            for x in 0..<30 {
                pixels += [UInt8((x * 7 + y * 3) % 256), UInt8((x * x + y) % 256), UInt8((255 - y * 2) % 256)]
            }
        }
        return try Bitmap(width: 30, height: 90, channels: 3, pixels: pixels)
    }

    private func flat(_ colour: [UInt8], width: Int = 20, height: Int = 10) throws -> Bitmap {
        try Bitmap(
            width: width, height: height, channels: colour.count,
            pixels: Array([[UInt8]](repeating: colour, count: width * height).joined()))
    }

    func testBlurHashMatchesTheReferenceEncoder() throws {
        // The strings `blurhash.encode(pixels, x, y)` gives for the same pixels.
        XCTAssertEqual(try BlurHash.encode(gradient()), "L$HVCg2Y$5Sgl}azjtf7gcfjfQfj")
        XCTAssertEqual(try BlurHash.encode(gradient(), componentsX: 1, componentsY: 1), "00HVCg")
        XCTAssertEqual(
            try BlurHash.encode(gradient(), componentsX: 9, componentsY: 9),
            "|$HVCg2Y$5Sgo1bHa|j[a|l}azjtf7fQf7fQf7fQgcfjfQfjfQfjfQfjfQnma|jtfQfQfQfQfQfQfjfQfQfQfQfQfQfQfQoMa|jtfQfQfQfQfQfQe;fQfQfQfQfQfQfQfQofa|jtfQfQfQfQfQfQe;fQfQfQfQfQfQfQfQ"
        )
        XCTAssertEqual(
            try BlurHash.encode(portrait(), componentsX: 3, componentsY: 5), "c$HL4Ci%ihs1JBNvSjJTw_WZw{weWFbGSM")
    }

    func testBlurHashOfAFlatColourCarriesItsColour() throws {
        let hash = try BlurHash.encode(flat([90, 140, 200]))
        XCTAssertEqual(hash.count, 28, "1 + 1 + 4 + 2 × 11 characters for 4 × 3 components")
        XCTAssertEqual(hash.prefix(1), "L", "size flag (4 − 1) + (3 − 1) × 9 = 21")
        // The DC term is the colour itself: 0x5a8cc8 in base 83.
        let digits = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz#$%*+,-.:;=?@[]^_{|}~")
        let dc = hash.dropFirst(2).prefix(4).reduce(0) { $0 * 83 + (digits.firstIndex(of: $1) ?? -1_000_000) }
        XCTAssertEqual(dc, 0x5a_8cc8)
        // BlurHash's basis, cos(π·i·x / width) without a half-pixel offset, does not sum to zero
        // over the pixels, so even a flat image has AC terms: the reference's string for it.
        XCTAssertEqual(hash, "LIAVYTtTfQtTyGj]fQj]fQfQfQfQ")
    }

    func testBlurHashFlattensAlphaOntoWhite() throws {
        // Half-transparent black flattened onto white is 127 grey (libvips' flatten truncates 127.5).
        XCTAssertEqual(try BlurHash.encode(flat([0, 0, 0, 128])), try BlurHash.encode(flat([127, 127, 127])))
        XCTAssertEqual(try BlurHash.encode(flat([10, 20, 30, 0])), try BlurHash.encode(flat([255, 255, 255])))
    }

    func testBlurHashRefusesComponentCountsOutsideOneToNine() throws {
        for (x, y) in [(0, 3), (4, 10), (-1, -1)] {
            XCTAssertThrowsError(try BlurHash.encode(gradient(), componentsX: x, componentsY: y)) {
                XCTAssertEqual(($0 as? VipsError)?.kind, .invalidArgument)
            }
        }
    }

    func testThumbHashMatchesTheReferenceEncoder() throws {
        // The bytes `thumbhash.rgba_to_thumb_hash(w, h, rgba)` gives, base64.
        XCTAssertEqual(Data(try ThumbHash.encode(gradient())).base64EncodedString(), "3/cJPJqAh4eAiIiIiHeAgAj4eA==")
        XCTAssertEqual(Data(try ThumbHash.encode(portrait())).base64EncodedString(), "oRYGSghEX3WTl4Z3ZmDX71Y=")
    }

    func testThumbHashHeaderCarriesAverageAspectAndAlpha() throws {
        let opaque = try ThumbHash.encode(flat([255, 255, 255], width: 40, height: 20))
        let header24 = Int(opaque[0]) | Int(opaque[1]) << 8 | Int(opaque[2]) << 16
        let header16 = Int(opaque[3]) | Int(opaque[4]) << 8
        XCTAssertEqual(header24 & 63, 63, "white: luminance DC 1 × 63")
        XCTAssertEqual(header24 >> 23 & 1, 0, "no alpha")
        XCTAssertEqual(header16 >> 15, 1, "landscape")
        XCTAssertEqual(header16 & 7, 4, "7 luminance components across, round(7 × 20 / 40) = 4 down")

        let transparent = try ThumbHash.encode(flat([255, 0, 0, 64], width: 20, height: 40))
        XCTAssertEqual(Int(transparent[2]) >> 7, 1, "the alpha flag")
        XCTAssertEqual(Int(transparent[4]) >> 7, 0, "portrait")
        XCTAssertEqual(Int(transparent[5]) & 15, 4, "alpha DC: round(15 × 64 / 255) = 4")
    }

    func testThumbHashRefusesMoreThan100PixelsASide() throws {
        XCTAssertThrowsError(try ThumbHash.encode(flat([1, 2, 3], width: 101, height: 5))) {
            XCTAssertEqual(($0 as? VipsError)?.kind, .invalidArgument)
        }
    }

    func testAverageColourIsTheMeanInLinearLightWeightedByAlpha() throws {
        // Half black, half white: 0.5 in linear light is sRGB 188, not the 128 of a mean of sRGB values.
        let halves = try Bitmap(
            width: 2, height: 1, channels: 3, pixels: [0, 0, 0, 255, 255, 255] as [UInt8])
        XCTAssertEqual(try ImagePlaceholder(halves).averageColour, Colour(red: 188, green: 188, blue: 188))
        XCTAssertEqual(try ImagePlaceholder(halves).averageColourHex, "#bcbcbc")
        // A transparent pixel's colour does not count; the alpha is the mean alpha.
        let halfTransparent = try Bitmap(
            width: 2, height: 1, channels: 4, pixels: [200, 10, 10, 255, 0, 255, 0, 0] as [UInt8])
        let placeholder = try ImagePlaceholder(halfTransparent)
        XCTAssertEqual(placeholder.averageColour, Colour(red: 200, green: 10, blue: 10, alpha: 128))
        XCTAssertEqual(placeholder.averageColourHex, "#c80a0a80")
    }

    func testAPlaceholderOfALargeBitmapIsMadeFromItsDownscaleToFit100Pixels() throws {
        let large = try ImageDecoder().decode(
            .data(ImageSynthesizer.data(width: 640, height: 320, format: .png())), size: .original, mode: .fit)
        let small = try ImageDecoder().resize(large, to: .maxPixelSize(ImagePlaceholder.side), scale: 1)
        XCTAssertEqual([small.width, small.height], [100, 50])
        let placeholder = try ImagePlaceholder(large)
        XCTAssertEqual(placeholder, try ImagePlaceholder(small))
        XCTAssertEqual(placeholder.blurHash, try BlurHash.encode(small))
        XCTAssertEqual(placeholder.thumbHash, try ThumbHash.encode(small))
        XCTAssertEqual(Data(placeholder.thumbHash).base64EncodedString(), placeholder.thumbHashBase64)
        XCTAssertEqual(Int(placeholder.thumbHash[4]) >> 7, 1, "landscape, from the 2:1 source")
    }
}
