import Foundation
import VipsCore
import XCTest

@testable import VipsLoad

/// `ImageRequest.geometry`: a decode planned from the header, through the
/// pipeline, with a cache key made of the request's own description.
final class PipelineGeometryTests: XCTestCase {
    /// The centre square of any image, `side` pixels a side.
    private struct CentreSquare: ImageGeometry {
        let side: Int
        var identifier: String { "centre-square-\(side)" }
        func plan(for info: ImageInfo) -> DecodePlan {
            let crop = min(info.width, info.height)
            return DecodePlan(
                crop: .rect(x: (info.width - crop) / 2, y: (info.height - crop) / 2, width: crop, height: crop),
                width: side, height: side)
        }
    }

    private struct Refusing: ImageGeometry {
        var identifier: String { "refusing" }
        func plan(for info: ImageInfo) throws(VipsError) -> DecodePlan {
            throw VipsError(.invalidArgument, "no plan for \(info.width)x\(info.height)")
        }
    }

    func testAPlannedDecodeShrinksOnLoadAndCropsAtTheShrunkScale() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 4000, height: 3000, seed: 3)
        let pipeline = ImagePipeline(configuration: .init(decodeConcurrency: 2))
        var request = ImageRequest(path: path, scale: 2)
        request.geometry = CentreSquare(side: 250)
        let bitmap = try await pipeline.image(for: request)
        XCTAssertEqual([bitmap.width, bitmap.height], [250, 250])
        XCTAssertEqual(bitmap.scale, 2, "the scale tags the bitmap")
        XCTAssertEqual(bitmap.source?.loadShrink, 8, "3000² kept at 250²: decoded at 1/8")
        XCTAssertEqual(bitmap.source?.info.width, 4000)
        // The same pixels as libvips' crop and resize of the full-size image, within a small tolerance.
        let full = try ImageDecoder().decode(.file(path))
        let reference = try ImageDecoder().resize(
            try ImageProcessors.Crop(x: 500, y: 0, width: 3000, height: 3000).process(full),
            to: .fit(width: 250, height: 250), scale: 1)
        var total = 0
        for y in 0..<250 {
            for x in 0..<250 {
                let (p, q) = (bitmap.pixel(x: x, y: y) ?? [], reference.pixel(x: x, y: y) ?? [])
                for c in 0..<3 { total += abs(Int(p[c]) - Int(q[c])) }
            }
        }
        XCTAssertLessThan(Double(total) / Double(250 * 250 * 3), 4)
    }

    func testTheCacheKeyIsTheRequestsOwnDescription() throws {
        var a = ImageRequest(path: "/a.jpg")
        a.geometry = CentreSquare(side: 100)
        var b = ImageRequest(path: "/a.jpg")
        b.geometry = CentreSquare(side: 100)
        XCTAssertEqual(a.cacheKey, b.cacheKey)
        XCTAssertEqual(a, b)
        b.geometry = CentreSquare(side: 101)
        XCTAssertNotEqual(a.cacheKey, b.cacheKey)
        XCTAssertNotEqual(a.cacheKey, ImageRequest(path: "/a.jpg").cacheKey)
        XCTAssertTrue(a.cacheKey.description.contains("plan(centre-square-100)"), a.cacheKey.description)
    }

    func testASizeBesideAGeometryAndAPlanThatRefusesAreErrors() async throws {
        let folder = try ImageFolder()
        let path = try folder.png("small", width: 40, height: 30)
        let pipeline = ImagePipeline(configuration: .init(decodeConcurrency: 1))
        var request = ImageRequest(path: path, size: .maxPixelSize(10))
        request.geometry = CentreSquare(side: 10)
        await assertThrows(kind: .invalidArgument) { try await pipeline.image(for: request) }
        request = ImageRequest(path: path)
        request.geometry = Refusing()
        await assertThrows(kind: .invalidArgument) { try await pipeline.image(for: request) }
        struct Outside: ImageGeometry {
            var identifier: String { "outside" }
            func plan(for info: ImageInfo) -> DecodePlan {
                DecodePlan(crop: .rect(x: 30, y: 0, width: 20, height: 30), width: 10, height: 10)
            }
        }
        request.geometry = Outside()
        await assertThrows(kind: .invalidArgument) { try await pipeline.image(for: request) }
    }
}
