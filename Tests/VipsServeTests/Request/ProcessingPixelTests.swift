import Foundation
import VipsCore
import VipsLoad
import VipsServe
import VipsSynthesis
import XCTest

/// URLs through a real `ImagePipeline` on real files: the result sizes are
/// imgproxy's for each resizing type, crop, rotation, extend, padding and dpr,
/// and the pixels land where imgproxy puts them (checked with the
/// synthesiser's red marker in the stored top-left eighth of the image).
final class ProcessingPixelTests: XCTestCase {
    private var root: URL!
    private var parser: ProcessingURLParser!
    private var pipeline: ImagePipeline!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("vipsserve-pixels-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try ImageSynthesizer.data(width: 1000, height: 500, seed: 3, marker: true, format: .jpeg(quality: 92))
            .write(to: root.appendingPathComponent("wide.jpg"))
        try ImageSynthesizer.data(width: 200, height: 100, seed: 4, format: .jpeg())
            .write(to: root.appendingPathComponent("small.jpg"))
        try ImageSynthesizer.data(width: 400, height: 300, seed: 5, alpha: true, format: .png())
            .write(to: root.appendingPathComponent("alpha.png"))
        parser = ProcessingURLParser(sources: try SourcePolicy(localRoot: root.path))
        pipeline = ImagePipeline(configuration: .init(decodeConcurrency: 2))
    }

    override func tearDown() {
        if let root { try? FileManager.default.removeItem(at: root) }
        // XCTest keeps every test case object until the run ends: a pipeline left here would keep
        // its decode threads and memory-pressure triggers open for the tests that follow.
        pipeline = nil
        parser = nil
    }

    private func image(_ options: String, _ file: String = "wide.jpg") async throws -> Bitmap {
        let request = try parser.parse("/_/\(options)/plain/local:///\(file)")
        return try await pipeline.image(for: request.imageRequest)
    }

    private func assertSize(
        _ options: String, of file: String = "wide.jpg", _ expected: [Int], line: UInt = #line
    ) async throws {
        let bitmap = try await image(options, file)
        XCTAssertEqual([bitmap.width, bitmap.height], expected, "\(options) of \(file)", line: line)
    }

    /// Whether pixel (`x`, `y`) of the result of `options` is the marker's red.
    private func red(_ options: String, x: Int = 0, y: Int = 0) async throws -> Bool {
        isRed(try await image(options).pixel(x: x, y: y))
    }

    private func isRed(_ pixel: [UInt8]?) -> Bool {
        guard let pixel else { return false }
        return pixel[0] > 200 && pixel[1] < 60 && pixel[2] < 60
    }

    func testResultSizesAreImgproxys() async throws {
        try await assertSize("rs:fit:300:300", [300, 150])
        try await assertSize("rs:fill:300:300", [300, 300])
        try await assertSize("rs:fill:300:300/g:sm", [300, 300])
        try await assertSize("rs:fill:300:300/dpr:2", [500, 500])
        try await assertSize("rs:fill:300:300/dpr:2/el:1", [600, 600])
        try await assertSize("rs:fill-down:300:300", [300, 300])
        try await assertSize("rs:fill-down:300:300", of: "small.jpg", [100, 100])
        try await assertSize("rs:fill:300:300", of: "small.jpg", [200, 100])
        try await assertSize("rs:force:300:100", [300, 100])
        try await assertSize("rs:force:0:100", [1000, 100])
        try await assertSize("rs:auto:300:200", [300, 200])
        try await assertSize("rs:auto:200:300", [200, 100])
        try await assertSize("rs:fit:2000:2000:1", [2000, 1000])
        try await assertSize("rs:fit:2000:2000", [1000, 500])
        try await assertSize("w:250", [250, 125])
        try await assertSize("h:50/dpr:3", [300, 150])
        try await assertSize("q:50", [1000, 500])
    }

    func testCropRotateExtendAndPadding() async throws {
        try await assertSize("c:500:250/rs:fit:100:100", [100, 50])
        try await assertSize("c:0.5:0.5", [500, 250])
        try await assertSize("rot:90/rs:fit:300:300", [150, 300])
        try await assertSize("rot:90/rs:fill:300:200", [300, 200])
        try await assertSize("rot:270/c:0.5", [250, 1000])
        try await assertSize("rs:fit:300:300:0:1", [300, 300])
        try await assertSize("rs:fit:300:300:0:1", of: "small.jpg", [300, 300])
        try await assertSize("rs:fit:300:300/pd:10:20", [340, 170])
        try await assertSize("rs:fit:300:300/pd:10/dpr:2", [640, 340])
        try await assertSize("rs:fit:300:300/bl:2/sh:1", [300, 150])
    }

    func testPixelsLandWhereImgproxyPutsThem() async throws {
        // The marker fills the stored top-left 125×62.
        var marked = try await red("c:100:50:nowe")
        XCTAssertTrue(marked, "a north-west crop keeps the corner")
        marked = try await red("c:100:50:soea")
        XCTAssertFalse(marked)
        marked = try await red("rs:fill:100:100/g:we")
        XCTAssertTrue(marked)
        marked = try await red("rs:fill:100:100/g:ea")
        XCTAssertFalse(marked)
        // A focus point at the top-left corner (decoded at full size).
        marked = try await red("rs:fill:100:100/g:fp:0:0")
        XCTAssertTrue(marked)
        // Turned a quarter clockwise, the marker is at the top right; north after the turn is west before it.
        let turned = try await image("rot:90/rs:fill:100:100/g:no")
        XCTAssertTrue(isRed(turned.pixel(x: 99, y: 0)))
        XCTAssertFalse(isRed(turned.pixel(x: 0, y: 0)))
        // Extend at the centre: transparent bands above and below, the image opaque in between.
        let extended = try await image("rs:fit:300:300:0:1")
        XCTAssertEqual(extended.channels, 4)
        XCTAssertEqual(extended.pixel(x: 150, y: 10)?[3], 0)
        XCTAssertEqual(extended.pixel(x: 150, y: 150)?[3], 255)
        // Extended to the south: the band is at the top.
        let south = try await image("rs:fit:300:300:0:1:so")
        XCTAssertEqual(south.pixel(x: 150, y: 10)?[3], 0)
        XCTAssertEqual(south.pixel(x: 150, y: 290)?[3], 255)
        // Padding in the background colour; the background flattens transparency, whatever the format.
        let padded = try await image("rs:fit:300:300/pd:10/bg:00ff00")
        XCTAssertEqual(padded.channels, 3)
        XCTAssertEqual(padded.pixel(x: 2, y: 2), [0, 255, 0])
        let flattened = try await image("bg:0000ff", "alpha.png")
        XCTAssertEqual(flattened.channels, 3)
        let kept = try await image("w:100", "alpha.png")
        XCTAssertEqual(kept.channels, 4)
    }

    func testFailuresInsideTheRequestAreTyped() async throws {
        // Padding that grows past the result limit fails in processing, not by allocating it.
        let tight = ProcessingURLParser(
            sources: try SourcePolicy(localRoot: root.path), limits: .init(maxResultDimension: 1010, maxDPR: 8))
        let request = try tight.parse("/_/pd:10/plain/local:///wide.jpg")
        do throws(VipsError) {
            _ = try await pipeline.image(for: request.imageRequest)
            XCTFail("padding past the limit succeeded")
        } catch {
            XCTAssertEqual(error.kind, .invalidArgument, "\(error)")
        }
    }
}
