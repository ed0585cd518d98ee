import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// The fast path for progressive JPEGs decoded at 1/8: AC scans are dropped
/// before libjpeg runs (`ProgressiveJPEGFilter`).
final class ProgressiveJPEGTests: XCTestCase {
    static let progressive: Data = {
        do {
            return try ImageSynthesizer.data(
                width: 1600, height: 1200, seed: 12, format: .jpeg(quality: 90, progressive: true))
        } catch { preconditionFailure("cannot synthesise the progressive fixture: \(error)") }
    }()

    func testFilterKeepsOnlyDCScansAndTheResultIsAValidJPEG() throws {
        let filtered = try XCTUnwrap(Self.progressive.withUnsafeBytes { ProgressiveJPEGFilter.dcOnly($0) })
        XCTAssertLessThan(filtered.count, Self.progressive.count / 3, "AC scans are most of the bytes")
        let info = try ImageDecoder().info(.data(filtered))
        XCTAssertEqual([info.width, info.height], [1600, 1200])
    }

    func testFilterDeclinesBaselineAndMalformedStreams() throws {
        let baseline = try ImageSynthesizer.data(width: 160, height: 120, format: .jpeg())
        XCTAssertNil(
            baseline.withUnsafeBytes { ProgressiveJPEGFilter.dcOnly($0) }, "nothing to drop in a baseline JPEG")
        for length in [0, 2, 3, 100, 700, Self.progressive.count / 2] {
            let cut = Self.progressive.prefix(length)
            XCTAssertNil(
                cut.withUnsafeBytes { ProgressiveJPEGFilter.dcOnly($0) },
                "a stream cut at \(length) bytes is left alone")
        }
        var junk = Self.progressive
        junk[2] = 0x00 // the first marker is no longer a marker
        XCTAssertNil(junk.withUnsafeBytes { ProgressiveJPEGFilter.dcOnly($0) })
    }

    func testFastDecodeMatchesTheFullDecodeClosely() throws {
        // 1600 → 100 needs a 1/16 shrink, so the fast mode decodes at 1/8 from DC scans only.
        let fast = try ImageDecoder().decode(.data(Self.progressive), size: .maxPixelSize(100))
        let full = try ImageDecoder(options: DecodeOptions(strict: true)).decode(
            .data(Self.progressive), size: .maxPixelSize(100))
        XCTAssertEqual([fast.width, fast.height], [100, 75])
        XCTAssertEqual([full.width, full.height], [100, 75])
        let difference = fast.meanAbsoluteDifference(to: full)
        XCTAssertLessThan(difference, 4, "dropping AC scans changes only sub-block chroma detail")
        XCTAssertGreaterThan(difference, 0, "the fast path really ran (a full decode at 1/8 would be identical)")
    }

    func testFileAndDataInputsGiveTheSamePixels() throws {
        let folder = try TemporaryFolder()
        let path = try folder.write(Self.progressive, named: "progressive.jpg")
        let fromFile = try ImageDecoder().decode(.file(path), size: .maxPixelSize(100))
        let fromData = try ImageDecoder().decode(.data(Self.progressive), size: .maxPixelSize(100))
        XCTAssertEqual(fromFile.bytes, fromData.bytes)
    }
}
