import Foundation
import VipsLoad
import VipsServe
import XCTest

/// How options map onto `ImageRequest` and `OutputPlan`: the decode's size,
/// mode, scale and upscaling, the processors after it, the combinations
/// refused, and the limits.
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

    func testSizesAndModesDecodedStraightToSize() throws {
        var r = try request("rs:fit:300:200").imageRequest
        XCTAssertEqual(r.size, .fit(width: 300, height: 200))
        XCTAssertEqual(r.mode, .fit)
        XCTAssertEqual(r.scale, 1)
        XCTAssertFalse(r.options.contains(.allowUpscale))
        XCTAssertTrue(r.processors.isEmpty)
        XCTAssertEqual(try request("w:300").imageRequest.size, .width(300))
        XCTAssertEqual(try request("h:300").imageRequest.size, .height(300))
        XCTAssertEqual(try request("q:80").imageRequest.size, .original)
        XCTAssertEqual(try request("rt:fill/w:300").imageRequest.size, .width(300), "fill with one side is fit")
        XCTAssertEqual(try request("rt:auto/h:300").imageRequest.mode, .fit)
        r = try request("rs:fill:300:200/g:sm").imageRequest
        XCTAssertEqual(r.mode, .fill(.attention))
        XCTAssertEqual(try request("rs:fill-down:300:200/g:noea").imageRequest.mode, .fill(.northEast))
        XCTAssertEqual(try request("rs:force:300:200").imageRequest.mode, .stretch)
        r = try request("rs:fit:300:200:1/dpr:2").imageRequest
        XCTAssertEqual(r.scale, 2)
        XCTAssertTrue(r.options.contains(.allowUpscale))
        // force with a side of 0 keeps the image's own side: an unbounded side, never enlarged.
        r = try request("rs:force:0:200:1").imageRequest
        XCTAssertEqual(r.size, .fit(width: TargetSize.unboundedSide, height: 200))
        XCTAssertEqual(r.mode, .stretch)
        XCTAssertFalse(r.options.contains(.allowUpscale))
    }

    func testAQuarterTurnSwapsTheBoxAndTurnsTheGravity() throws {
        var r = try request("rs:fill:300:200/g:no/rot:90")
        XCTAssertEqual(r.imageRequest.size, .fit(width: 200, height: 300))
        XCTAssertEqual(r.imageRequest.mode, .fill(.west), "north after a clockwise quarter turn is west before it")
        XCTAssertEqual(processorNames(r), ["vipsload.rotate"])
        r = try request("rs:fill:300:200/g:soea/rot:180")
        XCTAssertEqual(r.imageRequest.size, .fit(width: 300, height: 200))
        XCTAssertEqual(r.imageRequest.mode, .fill(.northWest))
        r = try request("rs:fill:300:200/g:ea/rot:270")
        XCTAssertEqual(r.imageRequest.mode, .fill(.south))
        XCTAssertEqual(try request("w:300/rot:90").imageRequest.size, .height(300))
    }

    func testFinishingStepsAndTheirOrder() throws {
        let r = try request("rs:fill-down:300:200:0:1/rot:90/bl:1/sh:0.5/pd:4/bg:ff0000/dpr:2")
        XCTAssertEqual(
            processorNames(r),
            [
                "vipsload.rotate", "vipsserve.resultCrop", "vipsload.blur", "vipsload.sharpen", "vipsserve.extend",
                "vipsserve.padding", "vipsserve.flatten"
            ])
        XCTAssertFalse(r.decodesFullSize)
        // fill at dpr 1 needs no result crop; fill at another dpr (without enlarge) does.
        XCTAssertEqual(processorNames(try request("rs:fill:300:200")), [])
        XCTAssertEqual(processorNames(try request("rs:fill:300:200/dpr:2")), ["vipsserve.resultCrop"])
        XCTAssertEqual(processorNames(try request("rs:fill:300:200:1/dpr:2")), [])
    }

    func testWhatIsDecodedAtFullSize() throws {
        for options in [
            "c:100:100", "c:0.5/rs:fill:10:10", "rs:auto:300:200", "rs:fill:300:200/g:fp:0.2:0.3",
            "rs:fill:300:200/g:no:10", "rs:fill-down:300:200/g:ce:0:0.1"
        ] {
            let r = try request(options)
            XCTAssertTrue(r.decodesFullSize, options)
            XCTAssertEqual(r.imageRequest.size, .original, options)
            XCTAssertEqual(Array(processorNames(r).prefix(2)), ["vipsserve.fullSizeResize", "vipsserve.resultCrop"])
        }
        for options in ["rs:fit:300:200/g:fp:0.2:0.3", "rs:auto:300:0", "rs:fill:300:200/g:no", "rs:force:30:20/g:no:5"]
        {
            XCTAssertFalse(try request(options).decodesFullSize, options)
        }
        XCTAssertEqual(processorNames(try request("c:10/rot:90")).first, "vipsload.rotate", "rotated before the crop")
    }

    func testCombinationsThePipelineCannotDoAreRefused() {
        assertRefused("c:100:100:sm", .unsupportedOption, naming: "smart")
        assertRefused("g:sm/c:100:100", .unsupportedOption, naming: "smart")
        assertRefused("rs:auto:300:200/g:sm", .unsupportedOption, naming: "smart")
        assertRefused("c:100:100/rs:force:50:50", .unsupportedOption, naming: "force")
        XCTAssertNoThrow(try request("c:100:100:no/g:sm"), "the crop's own gravity is used")
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
