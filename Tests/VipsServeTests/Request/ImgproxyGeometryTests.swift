import XCTest

@testable import VipsServe

/// The port of imgproxy's size arithmetic, against values worked out by hand
/// from imgproxy's `calcScale`, `calcSizes` and `calcPosition`.
final class ImgproxyGeometryTests: XCTestCase {
    private func geometry(_ options: String, _ width: Int, _ height: Int) throws -> ImgproxyGeometry {
        let parsed = try ProcessingURLParser(sources: SourcePolicy()).parseURL("/_/\(options)/plain/local:///a")
        return ImgproxyGeometry(options: parsed.options, sourceWidth: width, sourceHeight: height)
    }

    func testFitFillForceAndAuto() throws {
        var g = try geometry("rs:fit:300:300", 1000, 500)
        XCTAssertEqual([g.scaledWidth, g.scaledHeight, g.targetWidth, g.targetHeight], [300, 150, 300, 300])
        g = try geometry("rs:fill:300:300", 1000, 500)
        XCTAssertEqual([g.scaledWidth, g.scaledHeight, g.resultCropWidth, g.resultCropHeight], [600, 300, 300, 300])
        g = try geometry("rs:force:300:100", 1000, 500)
        XCTAssertEqual([g.scaledWidth, g.scaledHeight], [300, 100])
        // Same orientation: fill; another: fit.
        g = try geometry("rs:auto:300:200", 1000, 500)
        XCTAssertEqual([g.scaledWidth, g.scaledHeight, g.resultCropWidth, g.resultCropHeight], [400, 200, 300, 200])
        g = try geometry("rs:auto:200:300", 1000, 500)
        XCTAssertEqual([g.scaledWidth, g.scaledHeight], [200, 100])
        // One side: the other follows, whatever the type but force.
        g = try geometry("rs:fill:300:0", 1000, 500)
        XCTAssertEqual([g.scaledWidth, g.scaledHeight], [300, 150])
        g = try geometry("rs:force:0:100", 1000, 500)
        XCTAssertEqual([g.scaledWidth, g.scaledHeight], [1000, 100])
    }

    func testASmallImageIsNotEnlargedAndLowersTheDPR() throws {
        // fill 300×300 at dpr 2 of 1000×500: a shrink of 1.67 caps the dpr at 1.67, the box at 500.
        var g = try geometry("rs:fill:300:300/dpr:2", 1000, 500)
        XCTAssertEqual(g.dprScale, 1000.0 / 600, accuracy: 1e-9)
        XCTAssertEqual([g.scaledWidth, g.scaledHeight, g.resultCropWidth, g.resultCropHeight], [1000, 500, 500, 500])
        g = try geometry("rs:fill:300:300/dpr:2/el:1", 1000, 500)
        XCTAssertEqual([g.scaledWidth, g.scaledHeight, g.resultCropWidth, g.resultCropHeight], [1200, 600, 600, 600])
        // fill-down keeps the box's aspect ratio on an image too small for it.
        g = try geometry("rs:fill-down:300:300", 200, 100)
        XCTAssertEqual([g.scaledWidth, g.scaledHeight, g.resultCropWidth, g.resultCropHeight], [200, 100, 100, 100])
        g = try geometry("rs:fill:300:300", 200, 100)
        XCTAssertEqual([g.scaledWidth, g.scaledHeight, g.resultCropWidth, g.resultCropHeight], [200, 100, 300, 300])
        // With extend the dpr is not raised to make up for the missing enlargement.
        g = try geometry("rs:fit:300:300:0:1/dpr:2", 100, 50)
        XCTAssertEqual(g.dprScale, 1)
        XCTAssertEqual([g.scaledWidth, g.scaledHeight, g.targetWidth, g.targetHeight], [100, 50, 300, 300])
        g = try geometry("rs:fit:300:300/dpr:2", 1000, 500)
        XCTAssertEqual(g.dprScale, 2)
        XCTAssertEqual([g.scaledWidth, g.scaledHeight, g.targetWidth], [600, 300, 600])
    }

    func testCropSizes() throws {
        var g = try geometry("c:0.5:0.5/rs:fit:100:100", 1000, 500)
        XCTAssertEqual([g.cropWidth, g.cropHeight, g.scaledWidth, g.scaledHeight], [500, 250, 100, 50])
        g = try geometry("c:300", 1000, 500)
        XCTAssertEqual([g.cropWidth, g.cropHeight, g.scaledWidth, g.scaledHeight], [300, 0, 300, 500])
        g = try geometry("c:5000:0.001", 1000, 500)
        XCTAssertEqual([g.cropWidth, g.cropHeight], [5000, 1], "absolute crops are clamped later; a fraction is ≥ 1 px")
    }

    func testPositions() {
        typealias G = ProcessingOptions.Gravity
        func at(_ gravity: G, _ dpr: Double = 1) -> [Int] {
            let p = ImgproxyGeometry.position(outer: (300, 300), inner: (100, 50), gravity: gravity, dpr: dpr)
            return [p.x, p.y]
        }
        // Centre: (300 − 100 + 1) / 2 = 100.5 → 100, (300 − 50 + 1) / 2 = 125.5 → 126 (half to even).
        XCTAssertEqual(at(.centre), [100, 126])
        XCTAssertEqual(at(G(.smart)), [100, 126])
        XCTAssertEqual(at(G(.north)), [100, 0])
        XCTAssertEqual(at(G(.southEast)), [200, 250])
        XCTAssertEqual(at(G(.west)), [0, 126])
        // Offsets: ≥ 1 pixels (times the dpr), below 1 a fraction of the outer size; clamped inside.
        XCTAssertEqual(at(G(.northWest, x: 10, y: 20)), [10, 20])
        XCTAssertEqual(at(G(.northWest, x: 10, y: 20), 2), [20, 40])
        XCTAssertEqual(at(G(.southEast, x: 10, y: 0.1)), [190, 220])
        XCTAssertEqual(at(G(.centre, x: 1000, y: -1000)), [200, 0])
        // A focus point centres the inner rectangle on it.
        XCTAssertEqual(at(G(.focusPoint, x: 0.5, y: 0.5)), [100, 125])
        XCTAssertEqual(at(G(.focusPoint, x: 0, y: 1)), [0, 250])
    }
}
