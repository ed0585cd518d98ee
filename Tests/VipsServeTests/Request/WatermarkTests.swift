import Foundation
import VipsCore
import VipsLoad
import VipsSynthesis
import XCTest

@testable import VipsServe

/// imgproxy's watermark: its cases as data (Tests/Imgproxy/processing-watermark.tsv,
/// ported from processing/watermark_test.go), each URL through a real pipeline
/// over generated images, the sizes exact and the pixels against a reference
/// built from the case's hand-worked placement; the compositing against the
/// `vips` CLI's `composite2`; the option's parser; loading the configured image.
final class WatermarkTests: XCTestCase {
    private var root: URL!
    private var pipeline: ImagePipeline!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("vipsserve-watermark-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        // JPEG sources: libjpeg-turbo decodes them as fast in a debug build (the PNG path's unfilter is Swift).
        try ImageSynthesizer.data(width: 1080, height: 902, seed: 21, format: .jpeg(quality: 90))
            .write(to: root.appendingPathComponent("24-bpp.jpg"))
        try ImageSynthesizer.data(width: 492, height: 229, seed: 22, format: .jpeg(quality: 90))
            .write(to: root.appendingPathComponent("still.jpg"))
        try ImageSynthesizer.data(width: 200, height: 100, seed: 23, format: .png())
            .write(to: root.appendingPathComponent("geometry.png"))
        try ImageSynthesizer.data(width: 120, height: 80, seed: 24, alpha: true, format: .png())
            .write(to: root.appendingPathComponent("mark.png"))
        try ImageSynthesizer.data(width: 300, height: 200, seed: 25, alpha: true, format: .png())
            .write(to: root.appendingPathComponent("alpha.png"))
        try ImageSynthesizer.data(width: 300, height: 200, seed: 26, format: .png())
            .write(to: root.appendingPathComponent("opaque.png"))
        pipeline = ImagePipeline(configuration: .init(decodeConcurrency: 2))
    }

    override func tearDown() {
        if let root { try? FileManager.default.removeItem(at: root) }
        pipeline = nil
    }

    private func file(_ name: String) -> URL { root.appendingPathComponent(name) }

    private func parser(watermark: WatermarkImage?) throws -> ProcessingURLParser {
        var parser = ProcessingURLParser(sources: try SourcePolicy(localRoot: root.path))
        parser.watermark = watermark
        return parser
    }

    private func image(_ options: String, _ source: String, _ parser: ProcessingURLParser) async throws -> Bitmap {
        try await pipeline.image(for: try parser.parse("/_/\(options)/plain/local:///\(source)").imageRequest)
    }

    // MARK: - imgproxy's cases

    private struct Case {
        let test: String, options: String
        let width: Int, height: Int, markWidth: Int, markHeight: Int
        let placement: WatermarkLayout.Placement?
    }

    private func cases() throws -> [Case] {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Imgproxy/processing-watermark.tsv")
        return try String(contentsOf: file, encoding: .utf8).split(separator: "\n").compactMap { line in
            guard !line.hasPrefix("#") else { return nil }
            let fields = line.split(separator: "\t").map(String.init)
            guard fields.count == 5 else { throw CocoaError(.fileReadCorruptFile) }
            let size = fields[2].split(separator: "x").compactMap { Int($0) }
            let mark = fields[3].split(separator: "x").compactMap { Int($0) }
            let place = fields[4].split(separator: ":", omittingEmptySubsequences: false)
            let numbers = place.dropFirst().compactMap { Int($0) }
            let placement: WatermarkLayout.Placement?
            switch place.first {
            case "at" where numbers.count == 2: placement = .at(left: numbers[0], top: numbers[1])
            case "tile" where numbers.count == 6:
                placement = .tiled(
                    .init(
                        width: numbers[0], height: numbers[1], padLeft: numbers[2], padTop: numbers[3],
                        originX: numbers[4], originY: numbers[5]))
            case "none": placement = nil
            default: throw CocoaError(.fileReadCorruptFile)
            }
            guard size.count == 2, mark.count == 2 else { throw CocoaError(.fileReadCorruptFile) }
            return Case(
                test: fields[0], options: fields[1], width: size[0], height: size[1], markWidth: mark[0],
                markHeight: mark[1], placement: placement)
        }
    }

    /// The offset of the watermark pixel drawn at (`x`, `y`) of the result by
    /// `placement` in a `width` × `height` watermark, if any: by the case's own numbers.
    private func markOffset(
        _ placement: WatermarkLayout.Placement, width: Int, height: Int, x: Int, y: Int
    ) -> Int? {
        var markX: Int, markY: Int
        switch placement {
        case .at(let left, let top):
            (markX, markY) = (x - left, y - top)
        case .tiled(let tile):
            markX = (x + tile.originX) % tile.width - tile.padLeft
            markY = (y + tile.originY) % tile.height - tile.padTop
        }
        guard (0..<width).contains(markX), (0..<height).contains(markY) else { return nil }
        return (markY * width + markX) * 3
    }

    func testImgproxysWatermarkCases() async throws {
        let all = try cases()
        XCTAssertEqual(all.filter { $0.test != "VipsLoad" }.count, 26, "watermark_test.go's cases")
        let markData = try Data(contentsOf: file("geometry.png"))
        let watermark = try WatermarkImage(data: markData)
        let parser = try parser(watermark: watermark)
        var passed = 0
        for item in all {
            let source = item.test == "TestWatermarkAnimation" ? "still.jpg" : "24-bpp.jpg"
            let label = "\(item.test) \(item.options)"
            let result = try await image(item.options, source, parser)
            XCTAssertEqual("\(result.width)x\(result.height)", "\(item.width)x\(item.height)", label)
            let withoutMark = item.options.split(separator: "/").filter { !$0.hasPrefix("wm:") }
            let base = try await image(withoutMark.joined(separator: "/"), source, parser)
            guard result.width == base.width, result.height == base.height, result.channels == 3 else {
                XCTFail("\(label): \(result.width)x\(result.height)x\(result.channels)")
                continue
            }
            let options = try parser.parseURL("/_/\(item.options)/plain/local:///x").options
            let opacity = options.watermark.opacity
            // The reference's watermark at the case's size: the decoder's fit, not the step's planned decode.
            let mark =
                item.markWidth == 200
                ? watermark.image
                : try ImageDecoder().decode(
                    .data(markData), size: .fit(width: item.markWidth, height: item.markHeight), allowUpscale: true)
            XCTAssertEqual([mark.width, mark.height], [item.markWidth, item.markHeight], label)
            XCTAssertEqual(mark.channels, 3, "an opaque watermark")
            // Scaled watermarks are resampled by two paths: compared on the mean; native ones pixel by pixel.
            let scaled = item.markWidth != 200
            let got = [UInt8](result.pixelData), under = [UInt8](base.pixelData), over = [UInt8](mark.pixelData)
            var worst = 0, total = 0, drawn = 0
            for y in 0..<result.height {
                for x in 0..<result.width {
                    let offset = (y * result.width + x) * 3
                    let markAt = item.placement.flatMap {
                        markOffset($0, width: mark.width, height: mark.height, x: x, y: y)
                    }
                    if markAt != nil { drawn += 1 }
                    for channel in 0..<3 {
                        var expected = Int(under[offset + channel])
                        if let markAt {
                            // Straight alpha over an opaque pixel, truncated as libvips does.
                            let blended = Double(over[markAt + channel]) * opacity + Double(expected) * (1 - opacity)
                            expected = Int(blended + 1e-7)
                        }
                        let difference = abs(Int(got[offset + channel]) - expected)
                        worst = max(worst, difference)
                        total += difference
                    }
                }
            }
            let mean = Double(total) / Double(result.width * result.height * 3)
            if scaled {
                XCTAssertLessThan(mean, 1, "\(label): mean difference")
            } else {
                XCTAssertLessThanOrEqual(worst, opacity == 1 ? 0 : 1, "\(label): the largest difference")
            }
            XCTAssertEqual(drawn > 0, item.placement != nil, label)
            if result.width == item.width, result.height == item.height, scaled ? mean < 1 : worst <= 1 { passed += 1 }
        }
        print("imgproxy watermark cases: \(passed) passed, \(all.count - passed) failed, 0 refused")
    }

    // MARK: - Compositing against libvips

    /// Runs the `vips` CLI (libvips-tools) with `arguments`.
    private func vips(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["vips"] + arguments
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        process.waitUntilExit()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(process.terminationStatus, 0, "vips \(arguments.joined(separator: " ")): \(message)")
    }

    /// What imgproxy's `vips_apply_watermark` makes of `base` with `mark` at (`x`, `y`) and `opacity`,
    /// by the `vips` CLI: the alpha scaled, `composite2` over, cast to 8 bits, an opaque base kept opaque.
    private func libvipsReference(
        base: String, mark: String, x: Int, y: Int, opacity: Double, opaqueBase: Bool
    ) throws -> Bitmap {
        let scaled = file("scaled-\(UUID().uuidString).v"), tagged = file("tagged-\(UUID().uuidString).v")
        let composed = file("composed-\(UUID().uuidString).v"), cast = file("cast-\(UUID().uuidString).v")
        let output = file("reference-\(UUID().uuidString).png")
        try vips(["linear", file(mark).path, scaled.path, "1 1 1 \(opacity)", "0"])
        try vips(["copy", scaled.path, tagged.path, "--interpretation", "srgb"])
        try vips([
            "composite2", file(base).path, tagged.path, composed.path, "over", "--x", "\(x)", "--y", "\(y)",
            "--compositing-space", "srgb"
        ])
        try vips(["cast", composed.path, cast.path, "uchar"])
        if opaqueBase {
            try vips(["extract_band", cast.path, output.path, "0", "--n", "3"])
        } else {
            try vips(["copy", cast.path, output.path])
        }
        return try ImageDecoder().decode(.file(output.path))
    }

    /// Inside the watermark's rectangle, the `vips` CLI's pixels, within 1 and
    /// 99 % identical (libvips composites in single-precision floats); outside
    /// it, the unwatermarked result's, exactly (libvips' premultiplied round
    /// trip moves a translucent base's colours there by 1; this step leaves them).
    func testCompositingMatchesLibvipsOverRGBAndRGBA() async throws {
        let watermark = try WatermarkImage(data: try Data(contentsOf: file("mark.png")))
        XCTAssertEqual(watermark.image.channels, 4)
        let parser = try parser(watermark: watermark)
        // (source, options, where the 120×80 watermark's corner goes)
        let samples: [(String, String, Int, Int)] = [
            ("opaque.png", "wm:1:ce", 90, 60), ("opaque.png", "wm:0.4:nowe:10:20", 10, 20),
            ("opaque.png", "wm:0.75:soea:-40:-30", 220, 150), ("alpha.png", "wm:1:ce", 90, 60),
            ("alpha.png", "wm:0.5:noea:-60:-50", 240, -50)
        ]
        for (source, options, x, y) in samples {
            let result = try await image(options + "/f:png", source, parser)
            let base = try await image("f:png", source, parser)
            let opacity = try parser.parseURL("/_/\(options)/plain/local:///x").options.watermark.opacity
            let reference = try libvipsReference(
                base: source, mark: "mark.png", x: x, y: y, opacity: opacity, opaqueBase: source == "opaque.png")
            XCTAssertEqual(
                [result.width, result.height, result.channels],
                [reference.width, reference.height, reference.channels], options)
            var worst = 0, exact = 0, inside = 0, outsideChanged = 0
            for py in 0..<result.height {
                for px in 0..<result.width {
                    guard let got = result.pixel(x: px, y: py) else { continue }
                    guard (x..<(x + 120)).contains(px), (y..<(y + 80)).contains(py) else {
                        if got != base.pixel(x: px, y: py) { outsideChanged += 1 }
                        continue
                    }
                    guard let want = reference.pixel(x: px, y: py) else { continue }
                    let difference = zip(got, want).map { abs(Int($0) - Int($1)) }.max() ?? 0
                    worst = max(worst, difference)
                    inside += 1
                    if difference == 0 { exact += 1 }
                }
            }
            XCTAssertLessThanOrEqual(worst, 1, "\(source) \(options): against libvips' composite")
            XCTAssertGreaterThan(Double(exact) / Double(inside), 0.99, "\(source) \(options): identical pixels")
            XCTAssertEqual(outsideChanged, 0, "\(source) \(options): pixels outside the watermark")
        }
    }

    func testAnOpaqueResultStaysOpaqueAndATransparentOneKeepsItsAlpha() async throws {
        let parser = try parser(watermark: try WatermarkImage(data: try Data(contentsOf: file("mark.png"))))
        let opaque = try await image("wm:1:ce/f:png", "opaque.png", parser)
        XCTAssertEqual(opaque.channels, 3)
        let transparent = try await image("wm:1:ce/f:png", "alpha.png", parser)
        XCTAssertEqual(transparent.channels, 4)
        // A background flattens before the watermark, as in imgproxy: the result is opaque.
        let flattened = try await image("bg:ffffff/wm:1:ce/f:png", "alpha.png", parser)
        XCTAssertEqual(flattened.channels, 3)
    }

    func testConfiguredOpacityMultipliesTheURLs() async throws {
        let data = try Data(contentsOf: file("geometry.png"))
        let half = try parser(watermark: try WatermarkImage(data: data, opacity: 0.5))
        let full = try parser(watermark: try WatermarkImage(data: data))
        let a = try await image("wm:1:nowe/f:png", "opaque.png", half)
        let b = try await image("wm:0.5:nowe/f:png", "opaque.png", full)
        XCTAssertEqual(a.pixelData, b.pixelData, "0.5 configured × 1 = 1 configured × 0.5")
        let c = try await image("wm:1:nowe/f:png", "opaque.png", full)
        XCTAssertNotEqual(a.pixelData, c.pixelData)
    }

    // MARK: - Layout arithmetic

    func testLayoutClampsSoAPixelStaysOnTheResult() throws {
        var spec = ProcessingOptions.Watermark()
        spec.opacity = 1
        spec.position = .east
        spec.x = 5000
        let layout = try WatermarkLayout(spec, result: (300, 200), watermark: (50, 40), dpr: 1)
        XCTAssertEqual(layout.placement, .at(left: -49, top: 80))
        spec.position = .south
        spec.y = -5000
        spec.x = 0
        XCTAssertEqual(
            try WatermarkLayout(spec, result: (300, 200), watermark: (50, 40), dpr: 1).placement,
            .at(left: 126, top: 199))
        // A scale the result's side rounds to 0 still asks for a 1-pixel box.
        spec.scale = 0.001
        let tiny = try WatermarkLayout(spec, result: (300, 200), watermark: (50, 40), dpr: 1)
        XCTAssertEqual([tiny.width, tiny.height], [1, 1])
    }

    func testAScaledWatermarkOverTheResultLimitIsRefusedBeforeItIsDecoded() async throws {
        let parser = try parser(watermark: try WatermarkImage(data: try Data(contentsOf: file("geometry.png"))))
        // 300×200 × 40: a 12000×6000 watermark, 72 M pixels (under the decode limit), over the 8192-pixel side limit.
        do {
            _ = try await image("wm:1:ce:0:0:40/f:png", "opaque.png", parser)
            XCTFail("a 12000-pixel watermark")
        } catch let error as VipsError {
            XCTAssertEqual(error.kind, .invalidArgument)
            XCTAssertTrue(error.message.contains("12000×6000, over the 8192-pixel limit"), error.message)
        }
        let result = try await image("wm:1:ce:0:0:20/f:png", "opaque.png", parser)
        XCTAssertEqual([result.width, result.height], [300, 200], "6000×3000 is within it")
    }

    func testReplicateWithSpacingThatLeavesNoTileIsRefused() {
        var spec = ProcessingOptions.Watermark()
        spec.opacity = 1
        spec.position = .replicate
        spec.x = -200
        XCTAssertThrowsError(try WatermarkLayout(spec, result: (300, 200), watermark: (50, 40), dpr: 1)) { error in
            XCTAssertEqual((error as? VipsError)?.kind, .invalidArgument)
        }
    }

    // MARK: - The option

    func testImgproxysParserCase() throws {
        // options/parser/processing_options_test.go, TestParsePathWatermark.
        let url = try ProcessingURLParser(sources: .none).parseURL(
            "/_/watermark:0.5:soea:10:20:0.6/plain/http://images.dev/lorem/ipsum.jpg")
        let mark = url.options.watermark
        XCTAssertEqual(mark.opacity, 0.5)
        XCTAssertEqual(mark.position, .southEast)
        XCTAssertEqual(mark.x, 10)
        XCTAssertEqual(mark.y, 20)
        XCTAssertEqual(mark.scale, 0.6)
    }

    func testOptionArgumentsAndCanonicalForm() throws {
        let parser = ProcessingURLParser(sources: .none)
        func options(_ text: String) throws -> ProcessingOptions {
            try parser.parseURL("/_/\(text)/plain/local:///a.png").options
        }
        XCTAssertEqual(try options("wm:1").watermark.position, .centre)
        XCTAssertEqual(try options("wm:0.3:re").canonicalSegments, ["wm:0.3:re:0.0:0.0"])
        XCTAssertEqual(try options("wm:1:ce:-0:0.5:2").canonicalSegments, ["wm:1.0:ce:0.0:0.5:2.0"])
        // Empty arguments keep what an earlier option set; a later option wins.
        let merged = try options("wm:0.5:soea:10:20:0.6/wm:1::::").watermark
        XCTAssertEqual([merged.opacity, merged.x, merged.y, merged.scale], [1, 10, 20, 0.6])
        XCTAssertEqual(merged.position, .southEast)
        // Seven arguments are taken (imgproxy's open-source version reads five).
        XCTAssertEqual(try options("watermark:1:no:1:2:0.5:x:y").watermark.scale, 0.5)
        XCTAssertEqual(try options("wm:0").canonicalSegments, [], "opacity 0 is the default: no watermark")
        for text in [
            "wm:1/w:10/wm:0.2:we:3:4:0.1", "wm:0.25:re:-0.1:5", "wm:1:soea:0.5:0.25:3"
        ] {
            let parsed = try options(text)
            XCTAssertEqual(
                try options(parsed.canonicalSegments.joined(separator: "/")), parsed, "\(text) round trip")
        }
        for bad in [
            "wm:", "wm:1.5", "wm:-0.1", "wm:x", "wm:1:sm", "wm:1:fp", "wm:1:up", "wm:1:ce:a", "wm:1:ce:0:b",
            "wm:1:ce:0:0:0", "wm:1:ce:0:0:-1", "wm:1:ce:0:0:1:2:3:4"
        ] {
            XCTAssertThrowsError(try options(bad), bad) { error in
                XCTAssertEqual((error as? ProcessingURLError)?.reason, .invalidOption, bad)
            }
        }
    }

    func testWatermarkIsInTheVariantKeyOnlyWhenDrawn() throws {
        let one = try WatermarkImage(data: try Data(contentsOf: file("geometry.png")))
        let other = try WatermarkImage(data: try Data(contentsOf: file("mark.png")))
        let target = "/_/w:100/wm:0.5:re/plain/local:///opaque.png"
        let plain = try parser(watermark: nil).parse(target)
        XCTAssertEqual(plain.variantKey, "w:100/wm:0.5:re:0.0:0.0")
        XCTAssertEqual(plain.imageRequest.processors.count, 0, "no watermark configured: none drawn, as in imgproxy")
        let first = try parser(watermark: one).parse(target)
        let second = try parser(watermark: other).parse(target)
        XCTAssertEqual(first.variantKey, "w:100/wm:0.5:re:0.0:0.0/wm-image:\(one.identity)")
        XCTAssertNotEqual(first.variantKey, second.variantKey)
        XCTAssertNotEqual(first.imageRequest.cacheKey, second.imageRequest.cacheKey)
        XCTAssertEqual(try parser(watermark: one).parse("/_/w:100/wm:0/plain/local:///opaque.png").variantKey, "w:100")
        XCTAssertTrue(one.identity.hasPrefix("sha256:"))
        XCTAssertEqual(one.identity.count, "sha256:".count + 64)
        let again = try WatermarkImage(data: try Data(contentsOf: file("geometry.png")))
        XCTAssertEqual(again.identity, one.identity, "the identity is the bytes', stable across loads")
        XCTAssertEqual(
            try WatermarkImage(data: try Data(contentsOf: file("geometry.png")), opacity: 0.5).identity,
            one.identity + "@0.5")
    }

    // MARK: - The configured image

    func testABadWatermarkFailsWhenMadeWithAClearError() async throws {
        XCTAssertThrowsError(try WatermarkImage(data: Data("not an image".utf8))) { error in
            XCTAssertEqual((error as? VipsError)?.kind, .unsupportedFormat)
            XCTAssertTrue((error as? VipsError)?.message.hasPrefix("watermark: ") == true, "\(error)")
        }
        XCTAssertThrowsError(try WatermarkImage(data: Data())) { error in
            XCTAssertEqual((error as? VipsError)?.kind, .emptyInput)
        }
        let data = try Data(contentsOf: file("geometry.png"))
        for opacity in [0, -1, 1.5, .nan] {
            XCTAssertThrowsError(try WatermarkImage(data: data, opacity: opacity)) { error in
                XCTAssertEqual((error as? VipsError)?.kind, .invalidArgument)
            }
        }
        var limits = DecodeOptions()
        limits.limits.maxPixelCount = 100 * 100
        XCTAssertThrowsError(try WatermarkImage(data: data, decodeOptions: limits)) { error in
            XCTAssertEqual((error as? VipsError)?.kind, .tooLarge)
        }
        let policy = try SourcePolicy(localRoot: root.path)
        do {
            _ = try await WatermarkImage.load(.path(file("missing.png").path), pipeline: pipeline, sources: policy)
            XCTFail("a missing file")
        } catch {
            XCTAssertEqual(error.kind, .fileNotFound)
        }
        do {
            _ = try await WatermarkImage.load(.path(root.path), pipeline: pipeline, sources: policy)
            XCTFail("a folder")
        } catch {
            XCTAssertEqual(error.kind, .fileNotFound)
        }
        do {
            _ = try await WatermarkImage.load(.url("http://127.0.0.1:1/x.png"), pipeline: pipeline, sources: policy)
            XCTFail("a source the policy refuses")
        } catch {
            XCTAssertEqual(error.kind, .sourceNotAllowed)
            XCTAssertTrue(error.message.hasPrefix("watermark URL: "), error.message)
        }
    }

    func testLoadsFromAPathDataOrAURLUnderThePolicy() async throws {
        let data = try Data(contentsOf: file("mark.png"))
        let policy = try SourcePolicy(localRoot: root.path)
        let fromData = try await WatermarkImage.load(.data(data), pipeline: pipeline, sources: policy)
        let fromPath = try await WatermarkImage.load(.path(file("mark.png").path), pipeline: pipeline, sources: .none)
        let fromURL = try await WatermarkImage.load(
            .url("local:///mark.png"), opacity: 0.9, pipeline: pipeline, sources: policy)
        XCTAssertEqual(fromData.identity, fromPath.identity)
        XCTAssertEqual(fromURL.identity, fromData.identity + "@0.9")
        XCTAssertEqual([fromURL.image.width, fromURL.image.height], [120, 80])
        XCTAssertEqual(fromURL.image.pixelData, fromData.image.pixelData)
    }

    func testScaledSizesAreDecodedOnceAndBounded() throws {
        let watermark = try WatermarkImage(data: try Data(contentsOf: file("geometry.png")))
        let first = try watermark.scaled(width: 100, height: 50)
        XCTAssertEqual([first.width, first.height], [100, 50])
        XCTAssertEqual(watermark.keptVariants, 1)
        XCTAssertEqual(try watermark.scaled(width: 100, height: 50).pixelData, first.pixelData)
        XCTAssertEqual(watermark.keptVariants, 1)
        XCTAssertEqual(try watermark.scaled(width: 200, height: 100).pixelData, watermark.image.pixelData)
        XCTAssertEqual(watermark.keptVariants, 1, "its own size is the decoded image, not a variant")
        for side in 1...(WatermarkImage.variantLimit + 4) { _ = try watermark.scaled(width: 2 * side, height: side) }
        XCTAssertEqual(watermark.keptVariants, WatermarkImage.variantLimit)
    }
}
