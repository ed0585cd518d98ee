import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsLoad

/// `ImageResponse.decodedLeniently` for files cut short, in every format the
/// decoder keeps going on: VipsCore's own BMP, TGA and ICO codecs report it as
/// the JPEG and PNG paths do.
final class PipelineLenientDecodeTests: XCTestCase {
    /// Each format whole, and cut short in its pixel data.
    private func files() throws -> [(name: String, whole: Data, short: Data)] {
        let pixels = try LegacyFormatWriter.Pixels.generated(width: 64, height: 48)
        let jpeg = try ImageSynthesizer.data(width: 64, height: 48, seed: 3, format: .jpeg(quality: 90))
        let png = try ImageSynthesizer.data(width: 64, height: 48, seed: 3, format: .png())
        let bmp = LegacyFormatWriter.bmp(pixels, layout: .twentyFour).data
        let rle = LegacyFormatWriter.bmp(pixels, layout: .rle(bits: 8)).data
        let tga = LegacyFormatWriter.tga(pixels, layout: .trueColour(bits: 24)).data
        let tgaRLE = LegacyFormatWriter.tga(pixels, layout: .trueColour(bits: 24), rle: true).data
        let ico = try LegacyFormatWriter.ico([.init(pixels, layout: .twentyFour)]).data
        let icoPNG = try LegacyFormatWriter.ico([.init(pixels, png: true)]).data
        return [
            ("jpeg", jpeg), ("png", png), ("bmp", bmp), ("bmp rle8", rle), ("tga", tga), ("tga rle", tgaRLE),
            ("ico", ico), ("ico png entry", icoPNG)
        ].map { ($0.0, $0.1, Data($0.1.prefix($0.1.count * 2 / 3))) }
    }

    func testEveryFormatCutShortReportsALenientDecode() async throws {
        let pipeline = ImagePipeline.testing(cache: nil)
        for (name, whole, short) in try files() {
            let intact = try await pipeline.response(
                for: ImageRequest(source: .data(whole, identifier: "\(name) whole"), size: .maxPixelSize(32)))
            XCTAssertFalse(intact.decodedLeniently, "\(name) whole")
            let damaged = try await pipeline.response(
                for: ImageRequest(source: .data(short, identifier: "\(name) short"), size: .maxPixelSize(32)))
            XCTAssertTrue(damaged.decodedLeniently, "\(name) cut short")
            // The decoder's own plain decode says so too.
            let bitmap = try ImageDecoder().decode(.data(short), size: .maxPixelSize(32))
            XCTAssertEqual(bitmap.source?.decodedLeniently, true, "\(name) cut short, ImageDecoder.decode(_:size:)")
            XCTAssertEqual(
                try ImageDecoder().decode(.data(whole), size: .maxPixelSize(32)).source?.decodedLeniently, false,
                "\(name) whole, ImageDecoder.decode(_:size:)")
        }
    }
}
