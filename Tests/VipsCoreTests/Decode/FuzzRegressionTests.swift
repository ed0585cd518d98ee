import Foundation
import XCTest
@_spi(Testing) import VipsCore

/// Inputs found by the fuzzer (scripts/fuzz.sh, Fuzz/), each kept with the
/// options that exposed it. Crashers are stored minimised, as base64.
final class FuzzRegressionTests: XCTestCase {
    /// The fuzz harness's limits (Fuzz/Sources/FuzzDecode/FuzzTarget.swift).
    private let harnessLimits = DecodeLimits(maxPixelCount: 4_000_000, maxDimension: 8_192, maxPages: 64,
                                             maxInputBytes: 1 << 20)

    /// Found after about 100,000 executions (fuzz run 2): a 221-byte JPEG stored 65498×24
    /// with EXIF orientation 6, so displayed 24×65498. The probe checked the stored height
    /// twice (24×24) instead of the displayed size, so a rotated image passed both the side
    /// and the pixel limit, and the harness's "probe respects the limits" invariant broke.
    /// (Fixed in VipsCore by checking the displayed size; see `DecodeLimits.check`.)
    func testRotatedJPEGIsCheckedAtItsDisplayedSize() throws {
        let crasher = try XCTUnwrap(Data(base64Encoded:
            "/9j/4QC8RXhpZgAASUkqAAgAAAAGABIBAwABAAAABgAAAAUAAQAAAFYAbi1wYWdlcwEAAF4AAAAoAQMAAQAAYwAA6ANzStilQgAA" +
            "SUkqASkSimz/2U9NZW1GcmVlT09PT09PT09PT09PT//AABEIABj/AQAAAAACEQEDEQABAAIRA9kBAAIRA9kASUkqASlYcmVz2f/Z" +
            "A1hyZXNK2KVCAABJSSoBKRKKbP/ZT01lbUZyZWVPT09PT09PT09PT09P/8AAEQgAGP/aAwEiAAIRAQMR+v/aAAwDAQACEQM="))
        XCTAssertEqual(crasher.count, 221)
        let harness = ImageDecoder(options: DecodeOptions(limits: harnessLimits))
        for size in [TargetSize.original, .maxPixelSize(64), .maxPixelSize(8_187)] {
            HostileFiles.assertFails(.tooLarge, "crasher \(size)") { () throws(VipsError) in
                try harness.decode(.data(crasher), size: size)
            }
        }
        let error = HostileFiles.assertFails(.tooLarge, "crasher info") { () throws(VipsError) in
            try harness.info(.data(crasher))
        }
        XCTAssertTrue(error?.message.contains("24×65498") ?? false, error?.message ?? "")
        // With room for its size, the same bytes are an upright 24 px wide, 65498 px tall image.
        let roomy = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxDimension: 65_500)))
        let info = try roomy.info(.data(crasher))
        XCTAssertEqual([info.width, info.height, info.orientation], [24, 65_498, 6])
    }

    /// The same bypass at the default limits, where it mattered most: 65500×10000 stored
    /// and rotated was checked as 10000² = 100 MP (allowed), but is 655 MP (2 GB of RGB).
    func testRotationCannotHideMegapixelsFromTheDefaultLimits() throws {
        let decoder = ImageDecoder()
        for orientation in [5, 6, 7, 8] {
            let bomb = try HostileFiles.jpeg(claimingWidth: 65_500, height: 10_000, orientation: orientation)
            let error = HostileFiles.assertFails(.tooLarge, "orientation \(orientation)") { () throws(VipsError) in
                try decoder.info(.data(bomb))
            }
            XCTAssertTrue(error?.message.contains("10000×65500") ?? false, error?.message ?? "")
        }
        // Upright, the same claim is refused as well: the limit does not depend on orientation.
        let upright = try HostileFiles.jpeg(claimingWidth: 65_500, height: 10_000)
        HostileFiles.assertFails(.tooLarge, "upright") { () throws(VipsError) in try decoder.info(.data(upright)) }
    }
    /// Found in the fixed-seed one-minute smoke run of a fresh clone: a 2×48
    /// progressive JPEG thumbnailed to 8 px or less aborted the process. For
    /// 48→8 fast mode asked libjpeg for 1/4, and libvips 8.14 rounds 2/4 down
    /// to a width of 0 and fails an assertion (not an error). WebP's scaled
    /// decode of such a strip refuses "bad image dimensions". A loader's own
    /// shrink is now capped so the short side keeps at least a pixel.
    func testThinImagesShrinkOnLoadNoFurtherThanTheirShortSide() throws {
        let formats: [ImageSynthesizer.Format] = [.jpeg(), .jpeg(progressive: true), .webp()]
        for format in formats {
            for (width, height) in [(2, 48), (48, 2), (1, 300), (3, 9)] {
                let data = try ImageSynthesizer.data(width: width, height: height, seed: 61, format: format)
                for options in [DecodeOptions(), DecodeOptions(shrinkOnLoad: .quality)] {
                    for side in [16, 8, 4, 2, 1] {
                        let label = "\(format) \(width)×\(height) to \(side) (\(options.shrinkOnLoad))"
                        let bitmap = try ImageDecoder(options: options).decode(.data(data), size: .maxPixelSize(side))
                        XCTAssertEqual(max(bitmap.width, bitmap.height), min(side, max(width, height)), label)
                        XCTAssertGreaterThanOrEqual(min(bitmap.width, bitmap.height), 1, label)
                    }
                }
            }
        }
    }
}
