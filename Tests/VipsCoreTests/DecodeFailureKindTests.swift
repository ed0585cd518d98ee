import XCTest

@testable import VipsCore

/// Decode failures are classified by what happened (issue 16): libvips' and
/// libheif's own messages, as they report them, map to the kind a user can act on.
final class DecodeFailureKindTests: XCTestCase {
    func testUnsupportedFeaturesAreNotDamage() {
        // libvips 8.14's tiff2vips on three of its own test-suite TIFFs.
        XCTAssertEqual(
            ImageDecoder.kind(forDecodeFailure: "tiff2vips: subsampled images not supported"), .unsupportedFeature)
        XCTAssertEqual(ImageDecoder.kind(forDecodeFailure: "tiff2vips: unsupported sample format"), .unsupportedFeature)
    }

    func testImagesOverLibheifsSecurityLimitAreTooLarge() {
        let message =
            "heifload: Invalid input: Security limit exceeded: Image size 20000x20000 exceeds the maximum image size of 16384x16384"
        XCTAssertEqual(ImageDecoder.kind(forDecodeFailure: message), .tooLarge)
    }

    func testDamageAndTruncationKeepTheirKinds() {
        XCTAssertEqual(
            ImageDecoder.kind(forDecodeFailure: "gifload_source: Unexpected end of GIF source data"), .truncatedData)
        XCTAssertEqual(ImageDecoder.kind(forDecodeFailure: "pngload: libpng read error"), .truncatedData)
        XCTAssertEqual(ImageDecoder.kind(forDecodeFailure: "tiff2vips: TIFFReadDirectory: bad IFD"), .corruptData)
        XCTAssertEqual(ImageDecoder.kind(forDecodeFailure: "VipsForeignLoad: operation is blocked"), .unsupportedFormat)
    }
}
