import Foundation
import VipsLoad
import VipsServe
import XCTest

/// How options map onto `ImageRequest` and `OutputPlan`: the decode's plan
/// from the header, the processors after it, and the limits.
final class ProcessingRequestTests: XCTestCase {
    private let parser = ProcessingURLParser(
        sources: try! SourcePolicy(allowedSources: [try! SourcePattern("example.com")]))

    private func request(
        _ options: String, file: StaticString = #filePath, line: UInt = #line
    ) throws
        -> ProcessingRequest
    {
        try parser.parse("/_/\(options)/plain/http://example.com/a.jpg")
    }

    private func processorNames(_ request: ProcessingRequest) -> [String] {
        request.imageRequest.processors.map { String($0.identifier.prefix { $0 != "(" }) }
    }

    private func assertRefused(
        _ options: String, _ reason: ProcessingURLError.Reason, naming text: String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try request(options), options, file: file, line: line) { error in
            let error = error as? ProcessingURLError
            XCTAssertEqual(error?.reason, reason, "\(String(describing: error))", file: file, line: line)
            XCTAssertTrue(error?.message.contains(text) == true, "\(String(describing: error))", file: file, line: line)
        }
    }

    /// The plan of `options` for a `width` × `height` JPEG header.
    private func plan(_ options: String, _ width: Int = 4000, _ height: Int = 3000) throws -> DecodePlan? {
        let info = ImageInfo(
            width: width, height: height, format: .jpeg, bands: 3, hasAlpha: false, orientation: 1, pages: 1)
        return try request(options).imageRequest.geometry?.plan(for: info)
    }

    func testEveryURLIsPlannedFromTheHeader() throws {
        let r = try request("rs:fit:300:200/dpr:2").imageRequest
        XCTAssertEqual(r.size, .original, "the plan decides the size")
        XCTAssertEqual(r.mode, .fit)
        XCTAssertEqual(r.scale, 2, "the bitmap is tagged with the dpr")
        XCTAssertEqual(try plan("rs:fit:300:200"), DecodePlan(width: 267, height: 200))
        XCTAssertEqual(try plan("rs:fit:300:200/dpr:2"), DecodePlan(width: 533, height: 400))
        // auto of a landscape into a square is a fill: scaled to cover, cropped after (ResultCrop).
        XCTAssertEqual(try plan("g:ce/rs:auto:250:250:0"), DecodePlan(width: 333, height: 250))
        XCTAssertEqual(try plan("rs:auto:200:300"), DecodePlan(width: 200, height: 150), "a portrait box: fit")
        // Force scales each side on its own: a crop of the whole image keeps it off the fit's one scale.
        XCTAssertEqual(
            try plan("rs:force:300:100"),
            DecodePlan(crop: .rect(x: 0, y: 0, width: 4000, height: 3000), width: 300, height: 100))
        XCTAssertEqual(try plan("rs:force:400:300"), DecodePlan(width: 400, height: 300), "one scale: no crop")
        XCTAssertEqual(try plan("rs:fit:8000:8000:1"), DecodePlan(width: 8000, height: 6000), "enlarged")
        XCTAssertEqual(try plan("q:80"), DecodePlan(width: 4000, height: 3000))
        // A crop in source pixels at its gravity, then the resize.
        XCTAssertEqual(
            try plan("c:2000:2000/rs:fit:250:250"),
            DecodePlan(crop: .rect(x: 1000, y: 500, width: 2000, height: 2000), width: 250, height: 250))
        XCTAssertEqual(
            try plan("c:0.5:0.5:fp:0.25:0.25"),
            DecodePlan(crop: .rect(x: 0, y: 0, width: 2000, height: 1500), width: 2000, height: 1500))
        XCTAssertEqual(
            try plan("c:1000:1000:soea:10:20/rs:force:50:50"),
            DecodePlan(crop: .rect(x: 2990, y: 1980, width: 1000, height: 1000), width: 50, height: 50))
        // Smart gravity: the crop, and fill's result crop, are found from the pixels.
        XCTAssertEqual(
            try plan("c:100:100:sm"),
            DecodePlan(
                crop: .smart(width: 100, height: 100, gravity: .attention), width: 100,
                height: 100))
        XCTAssertEqual(
            try plan("rs:fill:300:200/g:sm"),
            DecodePlan(width: 300, height: 225, resultCrop: .smart(width: 300, height: 200, gravity: .attention)))
    }

    func testAQuarterTurnPlansBeforeTheTurn() throws {
        // The box and the crop are the turned image's; the plan is the image's before the turn.
        XCTAssertEqual(try plan("rs:fit:300:400/rot:90"), DecodePlan(width: 400, height: 300))
        // North-west of the turned image (3000×4000) is the south-west of the image before a clockwise turn.
        XCTAssertEqual(
            try plan("c:1000:500:nowe/rot:90"),
            DecodePlan(crop: .rect(x: 0, y: 2000, width: 500, height: 1000), width: 500, height: 1000))
        XCTAssertEqual(
            try plan("c:1000:500:nowe/rot:180"),
            DecodePlan(crop: .rect(x: 3000, y: 2500, width: 1000, height: 500), width: 1000, height: 500))
        XCTAssertEqual(
            try plan("c:1000:500:nowe/rot:270"),
            DecodePlan(crop: .rect(x: 3500, y: 0, width: 500, height: 1000), width: 500, height: 1000))
    }

    func testFinishingStepsAndTheirOrder() throws {
        let r = try request("rs:fill-down:300:200:0:1/rot:90/bl:1/sh:0.5/pd:4/bg:ff0000/dpr:2")
        XCTAssertEqual(
            processorNames(r),
            [
                "vipsserve.orient", "vipsserve.resultCrop", "vipsload.blur", "vipsload.sharpen", "vipsserve.extend",
                "vipsserve.padding", "vipsserve.flatten"
            ])
        // A result crop for the types that crop to a box; a smart one is the plan's.
        XCTAssertEqual(processorNames(try request("rs:fill:300:200")), ["vipsserve.resultCrop"])
        XCTAssertEqual(processorNames(try request("rs:auto:300:200")), ["vipsserve.resultCrop"])
        XCTAssertEqual(processorNames(try request("rs:fill:300:200/g:sm")), [])
        XCTAssertEqual(processorNames(try request("rs:fit:300:200")), [])
        XCTAssertEqual(processorNames(try request("c:10/rot:90")), ["vipsserve.orient"], "the crop is the plan's")
        // imgproxy's order with trim, flip, pixelate and extend_aspect_ratio.
        XCTAssertEqual(
            processorNames(try request("rs:fill:300:200/t:10/fl:1/pix:4/exar:1/ex:1/bg:fff")),
            [
                "vipsserve.trim", "vipsserve.orient", "vipsserve.resultCrop", "vipsload.pixelate", "vipsserve.extend",
                "vipsserve.extendAspectRatio", "vipsserve.flatten"
            ])
        XCTAssertEqual(processorNames(try request("ar:0")), ["vipsserve.orient"], "the stored orientation")
    }

    func testLimits() throws {
        assertRefused("w:8193", .invalidOption, naming: "width")
        assertRefused("h:5000/dpr:2", .invalidOption, naming: "height")
        assertRefused("dpr:8.5", .invalidOption, naming: "dpr")
        assertRefused("pd:0:9000", .invalidOption, naming: "padding")
        XCTAssertNoThrow(try request("w:4096/h:8192/dpr:1"))
        XCTAssertNoThrow(try request("w:4096/h:4096/dpr:2"))
        let small = ProcessingURLParser(
            sources: try SourcePolicy(allowedSources: [try SourcePattern("example.com")]),
            limits: .init(maxResultDimension: 100, maxDPR: 2))
        XCTAssertThrowsError(try small.parse("/_/w:101/plain/http://example.com/a.jpg"))
        XCTAssertThrowsError(try small.parse("/_/dpr:3/plain/http://example.com/a.jpg"))
        // The limits themselves are bounded: one result is at most 16384² pixels.
        XCTAssertEqual(ProcessingURLParser.Limits(maxResultDimension: 1 << 40).maxResultDimension, 16_384)
        XCTAssertEqual(ProcessingURLParser.Limits(maxResultDimension: -5, maxDPR: .nan).maxResultDimension, 1)
        XCTAssertEqual(ProcessingURLParser.Limits(maxDPR: .infinity).maxDPR, 8)
    }

    func testOutputPlan() throws {
        var plan = try request("w:10").output
        XCTAssertNil(plan.format)
        XCTAssertNil(plan.quality)
        XCTAssertFalse(plan.keepsMetadata)
        XCTAssertEqual(plan.background, .white)
        XCTAssertEqual(plan.outputFormat(.webp), .webp())
        plan = try request("q:42/f:jpg/sm:0/bg:010203").output
        XCTAssertEqual(plan.outputFormat, .jpeg(quality: 42))
        XCTAssertEqual(plan.outputFormat(.avif), .avif(quality: 42))
        XCTAssertEqual(plan.outputFormat(.png), .png())
        XCTAssertTrue(plan.keepsMetadata)
        XCTAssertEqual(plan.background, Colour(red: 1, green: 2, blue: 3))
        XCTAssertTrue(try request("sm:f").imageRequest.options.contains(.keepMetadata))
        XCTAssertFalse(try request("sm:t").imageRequest.options.contains(.keepMetadata))
    }

    func testTheVariantKeyIsTheSameForEverySpellingOfTheOptions() throws {
        let a = try request("rs:fill:300:200/g:sm/q:80")
        let b = try request("s:300:200/resizing_type:fill/gravity:sm/quality:80/w:300")
        XCTAssertEqual(a.variantKey, b.variantKey)
        XCTAssertEqual(a.imageRequest.cacheKey, b.imageRequest.cacheKey)
        XCTAssertNotEqual(a.variantKey, try request("rs:fill:300:200/g:sm/q:81").variantKey)
    }
}
