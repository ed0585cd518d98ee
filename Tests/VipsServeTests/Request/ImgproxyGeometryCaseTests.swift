import Foundation
import VipsCore
import VipsLoad
import VipsServe
import VipsSynthesis
import XCTest

/// imgproxy's geometry cases as data (Tests/Imgproxy/processing-geometry.tsv,
/// ported from its processing/processing_test.go over a generated 200×100
/// PNG, as its testdata/geometry.png is), each URL through a real pipeline;
/// the pixels of a sample against libvips' own crop and resize of the
/// full-size image; and the shrink-on-load of the planned decode.
final class ImgproxyGeometryCaseTests: XCTestCase {
    private var root: URL!
    private var parser: ProcessingURLParser!
    private var pipeline: ImagePipeline!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("vipsserve-geometry-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try ImageSynthesizer.data(width: 200, height: 100, seed: 7, format: .png())
            .write(to: root.appendingPathComponent("geometry.png"))
        parser = ProcessingURLParser(sources: try SourcePolicy(localRoot: root.path))
        pipeline = ImagePipeline(configuration: .init(decodeConcurrency: 2))
    }

    override func tearDown() {
        if let root { try? FileManager.default.removeItem(at: root) }
        pipeline = nil
        parser = nil
    }

    private struct Case {
        let test: String, options: String, width: Int, height: Int
    }

    private func cases() throws -> [Case] {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Imgproxy/processing-geometry.tsv")
        return try String(contentsOf: file, encoding: .utf8).split(separator: "\n").compactMap { line in
            guard !line.hasPrefix("#") else { return nil }
            let fields = line.split(separator: "\t").map(String.init)
            let size = fields[2].split(separator: "x").compactMap { Int($0) }
            guard fields.count == 3, size.count == 2 else { throw CocoaError(.fileReadCorruptFile) }
            return Case(test: fields[0], options: fields[1], width: size[0], height: size[1])
        }
    }

    /// Options imgproxy has and `serve` does not yet (issue 29, section 2): refused with a 400.
    private static let lacking = ["max_result_dimension:"]

    func testImgproxysGeometryCases() async throws {
        let all = try cases()
        XCTAssertEqual(all.filter { $0.test != "VipsLoad" }.count, 167, "processing_test.go's size cases")
        var passed = 0, refused = 0
        for item in all {
            let path = "/_/\(item.options)/plain/local:///geometry.png"
            if Self.lacking.contains(where: item.options.contains) {
                XCTAssertThrowsError(try parser.parse(path), "\(item.test) \(item.options)")
                refused += 1
                continue
            }
            let request = try parser.parse(path)
            let bitmap = try await pipeline.image(for: request.imageRequest)
            XCTAssertEqual(
                "\(bitmap.width)x\(bitmap.height)", "\(item.width)x\(item.height)", "\(item.test) \(item.options)")
            if bitmap.width == item.width, bitmap.height == item.height { passed += 1 }
        }
        print("imgproxy geometry cases: \(passed) passed, \(all.count - passed - refused) failed, \(refused) refused")
    }

    /// The mean absolute difference per channel between two bitmaps of one size.
    private func difference(_ a: Bitmap, _ b: Bitmap) -> Double {
        var total = 0
        for y in 0..<a.height {
            for x in 0..<a.width {
                guard let p = a.pixel(x: x, y: y), let q = b.pixel(x: x, y: y) else { continue }
                for channel in 0..<3 { total += abs(Int(p[channel]) - Int(q[channel])) }
            }
        }
        return Double(total) / Double(a.width * a.height * 3)
    }

    func testPixelsMatchLibvipsOnTheFullSizeImage() async throws {
        let file = root.appendingPathComponent("photo.jpg")
        try ImageSynthesizer.data(width: 1600, height: 1200, seed: 11, format: .jpeg(quality: 95)).write(to: file)
        let full = try ImageDecoder().decode(.file(file.path))
        // (options, the crop of the full-size image imgproxy takes, the size it resizes that to)
        let samples: [(String, (x: Int, y: Int, width: Int, height: Int), (Int, Int))] = [
            ("c:800:600/rs:fit:200:200", (400, 300, 800, 600), (200, 150)),
            ("c:800:800:nowe:40:20/rs:fit:100:100", (40, 20, 800, 800), (100, 100)),
            ("c:0.5:0.5:fp:0.8:0.9/rs:fit:160:160", (800, 600, 800, 600), (160, 120)),
            ("c:1000:500:soea/rs:force:250:250", (600, 700, 1000, 500), (250, 250)),
            // auto into a square: fill, scaled to 333×250 and cropped at the centre.
            ("g:ce/rs:auto:250:250:0", (0, 0, 1600, 1200), (333, 250))
        ]
        for (options, crop, size) in samples {
            let bitmap = try await pipeline.image(
                for: try parser.parse("/_/\(options)/plain/local:///photo.jpg")
                    .imageRequest)
            let cropped = try ImageProcessors.Crop(x: crop.x, y: crop.y, width: crop.width, height: crop.height)
                .process(full)
            var reference =
                options.contains("force")
                ? try stretched(cropped, to: size)
                : try ImageDecoder().resize(cropped, to: .fit(width: size.0, height: size.1), scale: 1)
            if options.contains("auto") {
                // imgproxy's centre: round((333 − 250 + 1) / 2) = 42.
                reference = try ImageProcessors.Crop(x: 42, y: 0, width: 250, height: 250).process(reference)
            }
            XCTAssertEqual([bitmap.width, bitmap.height], [reference.width, reference.height], options)
            guard bitmap.width == reference.width, bitmap.height == reference.height else { continue }
            XCTAssertLessThan(difference(bitmap, reference), 4, options)
        }
    }

    /// `bitmap` scaled to `size` on each side independently, by libvips (the decoder's stretch mode of a PNG of it).
    private func stretched(_ bitmap: Bitmap, to size: (Int, Int)) throws -> Bitmap {
        let data = try ImageEncoder().encode(bitmap, as: .png()).data
        return try ImageDecoder().decode(
            .data(data), size: .fit(width: size.0, height: size.1), mode: .stretch, allowUpscale: true)
    }

    func testAutoOfALargeJPEGShrinksOnLoad() async throws {
        let file = root.appendingPathComponent("large.jpg")
        try ImageSynthesizer.data(width: 4000, height: 3000, seed: 12, format: .jpeg(quality: 90)).write(to: file)
        for (options, size) in [
            ("g:ce/rs:auto:250:250:0", [250, 250]), ("c:2000:2000/rs:fit:250:250", [250, 250]),
            ("rs:fill:250:250/g:fp:0.3:0.7", [250, 250]), ("rs:fill:250:250/g:sm", [250, 250]),
            ("c:3000:2000:sm/rs:fit:300:200", [300, 200])
        ] {
            let request = try parser.parse("/_/\(options)/plain/local:///large.jpg").imageRequest
            let bitmap = try await pipeline.image(for: request)
            XCTAssertEqual([bitmap.width, bitmap.height], size, options)
            XCTAssertEqual(bitmap.source?.loadShrink, 8, "\(options): decoded at 1/8, not at full size")
        }
    }
}
