import Foundation
import VipsSynthesis
import XCTest

@testable import VipsCore

/// The complete scans of a progressive JPEG still arriving, which previews decode.
final class ProgressiveJPEGScansTests: XCTestCase {
    func testScansGrowWithTheBytesAndEachPrefixDecodes() throws {
        let jpeg = try ImageSynthesizer.data(
            width: 640, height: 480, seed: 7, format: .jpeg(quality: 90, progressive: true))
        var last = 0
        var seen: [Int] = []
        for percent in stride(from: 2, through: 98, by: 4) {
            let prefix = jpeg.prefix(jpeg.count * percent / 100)
            guard let preview = ProgressiveJPEGScans.preview(of: Data(prefix)) else {
                XCTAssertEqual(last, 0, "once a scan is complete it stays complete (\(percent)%)")
                continue
            }
            XCTAssertGreaterThanOrEqual(preview.scans, last, "\(percent)%")
            XCTAssertLessThanOrEqual(preview.data.count, prefix.count + 2)
            XCTAssertEqual(Array(preview.data.suffix(2)), [0xFF, 0xD9])
            if preview.scans > last {
                // A preview is a valid JPEG: it decodes whole, without a warning of damage.
                let bitmap = try ImageDecoder(options: DecodeOptions(strict: true)).decode(
                    .data(preview.data), size: .maxPixelSize(256))
                XCTAssertEqual(bitmap.width, 256)
                seen.append(preview.scans)
            }
            last = preview.scans
        }
        print("progressive 640×480 JPEG of \(jpeg.count) bytes: complete scans at 4% steps \(seen)")
        XCTAssertGreaterThan(seen.count, 2, "several scans complete one after another")
        // The whole file: the final decode's business, not a preview's.
        XCTAssertNil(ProgressiveJPEGScans.preview(of: jpeg))
    }

    func testBaselineJPEGsAndOtherFormatsHaveNoScansToPreview() throws {
        let baseline = try ImageSynthesizer.data(width: 320, height: 240, seed: 8, format: .jpeg(quality: 90))
        let png = try ImageSynthesizer.data(width: 320, height: 240, seed: 8, format: .png(interlaced: true))
        for data in [baseline, png] {
            XCTAssertNil(ProgressiveJPEGScans.preview(of: data.prefix(data.count / 2)))
        }
        XCTAssertNil(ProgressiveJPEGScans.preview(of: Data([0xFF, 0xD8, 0xFF])))
        XCTAssertNil(ProgressiveJPEGScans.preview(of: Data()))
        // A segment length that runs past the bytes is waited for, one that is too short is refused.
        XCTAssertNil(ProgressiveJPEGScans.preview(of: Data([0xFF, 0xD8, 0xFF, 0xC2, 0xFF, 0xFF, 0x00])))
        XCTAssertNil(ProgressiveJPEGScans.preview(of: Data([0xFF, 0xD8, 0xFF, 0xC2, 0x00, 0x01, 0x00])))
    }
}
