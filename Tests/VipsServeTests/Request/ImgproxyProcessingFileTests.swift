import Foundation
import VipsCore
import VipsLoad
import VipsServe
import VipsSynthesis
import XCTest

/// imgproxy's processing tests beyond processing_test.go's geometry, as data
/// (Tests/Imgproxy/processing-files.tsv: crop_test.go, extend_test.go,
/// padding_test.go, trim_test.go, flatten_test.go), each URL through a real
/// pipeline on generated sources, sizes exact; rotate_and_flip_test.go as
/// code, its results against the stored pixels turned by construction; and
/// pixels of a sample (trim, pixelate, flip, extend_aspect_ratio) against
/// references built by construction.
final class ImgproxyProcessingFileTests: XCTestCase {
    private var root: URL!
    private var parser: ProcessingURLParser!
    private var pipeline: ImagePipeline!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("vipsserve-files-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        func write(_ data: Data, _ name: String) throws { try data.write(to: root.appendingPathComponent(name)) }
        try write(ImageSynthesizer.data(width: 200, height: 100, seed: 7, format: .png()), "geometry.png")
        try write(ImageSynthesizer.data(width: 400, height: 300, seed: 8, alpha: true, format: .png()), "alpha.png")
        try write(ImageSynthesizer.data(width: 400, height: 300, seed: 8, format: .png(sixteenBit: true)), "16-bpp.png")
        try write(
            ImageSynthesizer.data(width: 400, height: 300, seed: 8, format: .png(grey: true)), "8-bpp-grayscale.png")
        try write(
            ImageSynthesizer.data(width: 400, height: 300, seed: 8, format: .png(sixteenBit: true, grey: true)),
            "16-bpp-grayscale.png")
        try write(ImageSynthesizer.data(width: 400, height: 300, seed: 8, format: .png()), "8-bpp.png")
        try write(png(Self.trim1()), "trim1.png")
        try write(png(Self.trim2()), "trim2.png")
        try write(png(Self.trim3()), "trim3.png")
        for orientation in 1...8 {
            try write(
                ImageSynthesizer.data(
                    width: 48, height: 32, seed: 9, marker: true, format: .jpeg(quality: 95, orientation: orientation)),
                "orientation-\(orientation).jpg")
        }
        parser = ProcessingURLParser(sources: try SourcePolicy(localRoot: root.path))
        pipeline = ImagePipeline(configuration: .init(decodeConcurrency: 2))
    }

    override func tearDown() {
        if let root { try? FileManager.default.removeItem(at: root) }
        pipeline = nil
        parser = nil
    }

    private func png(_ bitmap: Bitmap) throws -> Data { try ImageEncoder().encode(bitmap, as: .png()).data }

    /// A `width` × `height` bitmap whose pixel at (x, y) is `colour(x, y)` (3 or 4 channels).
    private static func bitmap(
        _ width: Int, _ height: Int, channels: Int = 3, _ colour: (Int, Int) -> [UInt8]
    ) throws
        -> Bitmap
    {
        var pixels: [UInt8] = []
        pixels.reserveCapacity(width * height * channels)
        for y in 0..<height { for x in 0..<width { pixels += colour(x, y) } }
        return try Bitmap(width: width, height: height, channels: channels, scale: 1, pixels: pixels)
    }

    /// trim1.png: 350×250 of black, and nested grey layers: 320×220 at (10, 10) (grey 50, so 20 pixels
    /// right and below), then 15 pixels in per side each: 290×190 (125), 260×160 (175), 230×130 (210),
    /// 200×100 (240). A threshold trims the layers it exceeds, as trim_test.go's sizes say.
    private static func trim1() throws -> Bitmap {
        let layers: [(x: Int, y: Int, width: Int, height: Int, grey: UInt8)] = [
            (10, 10, 320, 220, 50), (25, 25, 290, 190, 125), (40, 40, 260, 160, 175), (55, 55, 230, 130, 210),
            (70, 70, 200, 100, 240)
        ]
        return try bitmap(350, 250) { x, y in
            let grey =
                layers.last { x >= $0.x && x < $0.x + $0.width && y >= $0.y && y < $0.y + $0.height }?.grey ?? 0
            return [grey, grey, grey]
        }
    }

    /// trim2.png: 200×200, rows 0–29 red, 30–129 green, 130–199 blue.
    private static func trim2() throws -> Bitmap {
        try bitmap(200, 200) { _, y in y < 30 ? [255, 0, 0] : y < 130 ? [0, 255, 0] : [0, 0, 255] }
    }

    /// trim3.png: 200×200 RGBA, rows 0–129 opaque green, 130–199 transparent (magenta once flattened).
    private static func trim3() throws -> Bitmap {
        try bitmap(200, 200, channels: 4) { _, y in y < 130 ? [0, 255, 0, 255] : [0, 0, 0, 0] }
    }

    private struct Case {
        let file: String, test: String, source: String, options: String, width: Int, height: Int
    }

    private func cases() throws -> [Case] {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Imgproxy/processing-files.tsv")
        return try String(contentsOf: file, encoding: .utf8).split(separator: "\n").compactMap { line in
            guard !line.hasPrefix("#") else { return nil }
            let fields = line.split(separator: "\t").map(String.init)
            guard fields.count == 5 else { throw CocoaError(.fileReadCorruptFile) }
            let size = fields[4].split(separator: "x").compactMap { Int($0) }
            guard size.count == 2 else { throw CocoaError(.fileReadCorruptFile) }
            return Case(
                file: fields[0], test: fields[1], source: fields[2], options: fields[3], width: size[0],
                height: size[1])
        }
    }

    private func image(_ options: String, _ source: String) async throws -> Bitmap {
        try await pipeline.image(for: try parser.parse("/_/\(options)/plain/local:///\(source)").imageRequest)
    }

    func testImgproxysProcessingFileCases() async throws {
        let all = try cases()
        XCTAssertEqual(all.count, 105)
        var counts: [String: (passed: Int, failed: Int, refused: Int)] = [:]
        for item in all {
            var count = counts[item.file] ?? (0, 0, 0)
            defer { counts[item.file] = count }
            let request: ProcessingRequest
            do {
                request = try parser.parse("/_/\(item.options)/plain/local:///\(item.source)")
            } catch {
                XCTFail("\(item.test) \(item.options): refused: \(error)")
                count.refused += 1
                continue
            }
            let bitmap = try await pipeline.image(for: request.imageRequest)
            XCTAssertEqual(
                "\(bitmap.width)x\(bitmap.height)", "\(item.width)x\(item.height)", "\(item.test) \(item.options)")
            if bitmap.width == item.width, bitmap.height == item.height { count.passed += 1 } else { count.failed += 1 }
        }
        for (file, count) in counts.sorted(by: { $0.key < $1.key }) {
            print("imgproxy \(file): \(count.passed) passed, \(count.failed) failed, \(count.refused) refused")
        }
    }

    /// crop_test.go's TestCropGravityPriority: the crop's own gravity wins over `gravity`.
    func testCropGravityPriority() async throws {
        let r1 = try await image("crop:50:50/gravity:no", "geometry.png")
        let r2 = try await image("crop:50:50:no", "geometry.png")
        let r3 = try await image("crop:50:50:no/gravity:so", "geometry.png")
        XCTAssertEqual(pixels(r1), pixels(r2))
        XCTAssertEqual(pixels(r1), pixels(r3))
    }

    private func pixels(_ bitmap: Bitmap) -> [UInt8] {
        bitmap.withUnsafeBytes { bytes in
            var out: [UInt8] = []
            for row in 0..<bitmap.height {
                let start = row * bitmap.bytesPerRow
                out += bytes[start..<start + bitmap.width * bitmap.channels]
            }
            return out
        }
    }

    /// A bitmap's pixels as rows of pixels, for turning by construction.
    private typealias Grid = [[[UInt8]]]

    private func grid(_ bitmap: Bitmap) -> Grid {
        (0..<bitmap.height).map { y in (0..<bitmap.width).map { x in bitmap.pixel(x: x, y: y) ?? [] } }
    }

    private func rotated(_ grid: Grid, _ angle: Int) -> Grid {
        var grid = grid
        for _ in 0..<(angle / 90) {
            // Clockwise: out(x, y) = in(y, h − 1 − x).
            let height = grid.count, width = grid.first?.count ?? 0
            grid = (0..<width).map { y in (0..<height).map { x in grid[height - 1 - x][y] } }
        }
        return grid
    }

    private func flipped(_ grid: Grid, horizontal: Bool) -> Grid {
        horizontal ? grid.map { $0.reversed() } : grid.reversed()
    }

    /// EXIF `orientation` applied to stored pixels (the TIFF/EXIF definitions).
    private func upright(_ grid: Grid, _ orientation: Int) -> Grid {
        switch orientation {
        case 2: return flipped(grid, horizontal: true)
        case 3: return rotated(grid, 180)
        case 4: return flipped(grid, horizontal: false)
        case 5: return flipped(rotated(grid, 90), horizontal: true)
        case 6: return rotated(grid, 90)
        case 7: return flipped(rotated(grid, 270), horizontal: true)
        case 8: return rotated(grid, 270)
        default: return grid
        }
    }

    /// rotate_and_flip_test.go, its three tests, over one image stored with each EXIF orientation
    /// (imgproxy's orientation-N images): every result equals the stored pixels turned by
    /// construction (the orientation when auto-rotating, then `rotate`, then the flips), so with
    /// `ar:0` the eight sources give the same results, and two consecutive cases never do.
    func testRotateAndFlip() async throws {
        let stored = grid(try await image("ar:0", "orientation-1.jpg"))
        var counts = (passed: 0, failed: 0)
        func check(_ result: Grid, _ expected: Grid, _ label: String) {
            XCTAssertEqual(result, expected, label)
            if result == expected { counts.passed += 1 } else { counts.failed += 1 }
        }
        // TestOrientationAutoRotate: no options but auto_rotate, 8 sources, both ways.
        for autoRotate in [false, true] {
            var previous: Grid?
            for orientation in 1...8 {
                let result = grid(try await image(autoRotate ? "ar:1" : "ar:0", "orientation-\(orientation).jpg"))
                check(
                    result, autoRotate ? upright(stored, orientation) : stored,
                    "orientation \(orientation) ar \(autoRotate)")
                if autoRotate, let previous { XCTAssertNotEqual(result, previous, "orientation \(orientation)") }
                previous = result
            }
        }
        // TestRotateFlip and TestRotateFlipAutoRotate: every rotate and flip, 8 sources, both ways.
        for autoRotate in [false, true] {
            for orientation in 1...8 {
                var previous: Grid?
                for rotate in [0, 90, 180, 270] {
                    for flipH in [false, true] {
                        for flipV in [false, true] {
                            var options: [String] = []
                            if rotate != 0 { options.append("rotate:\(rotate)") }
                            if flipH || flipV { options.append("flip:" + (flipH ? "1" : "") + (flipV ? ":1" : "")) }
                            if !autoRotate { options.append("auto_rotate:0") }
                            let url = options.isEmpty ? "ar:1" : options.joined(separator: "/")
                            let result = grid(try await image(url, "orientation-\(orientation).jpg"))
                            var expected = autoRotate ? upright(stored, orientation) : stored
                            expected = rotated(expected, rotate)
                            if flipH { expected = flipped(expected, horizontal: true) }
                            if flipV { expected = flipped(expected, horizontal: false) }
                            check(result, expected, "\(url) of orientation \(orientation)")
                            if let previous {
                                XCTAssertNotEqual(result, previous, "\(url) of orientation \(orientation)")
                            }
                            previous = result
                        }
                    }
                }
            }
        }
        print("imgproxy rotate_and_flip_test.go: \(counts.passed) passed, \(counts.failed) failed, 0 refused")
    }

    /// A crop before resizing lands where imgproxy's does whatever the EXIF orientation, `auto_rotate`,
    /// `rotate` and `flip`: placed in the stored frame with the gravity turned back (imgproxy's
    /// `RotateAndFlip`), it is the final frame's crop at the URL's gravity (corners and pixel offsets
    /// have no rounding to differ by).
    func testACropLandsInTheFinalFrame() async throws {
        let stored = grid(try await image("ar:0", "orientation-1.jpg"))
        for orientation in [1, 3, 6, 7, 8] {
            for (turn, flipH, flipV) in [(0, false, false), (90, true, false), (180, false, true), (270, true, true)] {
                for autoRotate in [false, true] {
                    var final = autoRotate ? upright(stored, orientation) : stored
                    final = rotated(final, turn)
                    if flipH { final = flipped(final, horizontal: true) }
                    if flipV { final = flipped(final, horizontal: false) }
                    let (width, height) = (final.first?.count ?? 0, final.count)
                    for (gravity, x, y) in [
                        ("nowe", 0, 0), ("soea:3:2", width - 20 - 3, height - 10 - 2), ("noea:1", width - 21, 0)
                    ] {
                        let url =
                            "c:20:10:\(gravity)/rot:\(turn)/fl:\(flipH ? 1 : 0):\(flipV ? 1 : 0)/ar:\(autoRotate ? 1 : 0)"
                        let result = grid(try await image(url, "orientation-\(orientation).jpg"))
                        let expected = final[y..<y + 10].map { Array($0[x..<x + 20]) }
                        XCTAssertEqual(result, expected, "\(url) of orientation \(orientation)")
                    }
                }
            }
        }
    }

    /// Trimmed pixels are the source's own: the layers' box cut from trim1.png.
    func testTrimCutsTheSourcesPixels() async throws {
        let source = try Self.trim1()
        for (options, box) in [
            ("trim:100", (25, 25, 290, 190)), ("trim:5::1:1", (10, 10, 330, 230)), ("trim:220", (70, 70, 200, 100))
        ] {
            let result = try await image(options, "trim1.png")
            let expected = try ImageProcessors.Crop(x: box.0, y: box.1, width: box.2, height: box.3).process(source)
            XCTAssertEqual(pixels(result), pixels(expected), options)
        }
        // A trim then planned as imgproxy does: the trimmed 200×100 fitted into 100×100.
        let fitted = try await image("trim:220/rs:fit:100:100", "trim1.png")
        XCTAssertEqual([fitted.width, fitted.height], [100, 50])
        XCTAssertEqual(fitted.pixel(x: 50, y: 25)?.prefix(3).map { $0 }, [240, 240, 240])
    }

    /// Pixelate's blocks are their pixels' mean (libvips' shrink), and the edge block is
    /// averaged over its mirrored extension, as imgproxy's `vips_embed` with `VIPS_EXTEND_MIRROR` does.
    func testPixelateAveragesBlocks() async throws {
        // 10×4: the left 5 columns 0, the right 5 columns 200 (grey): blocks of 4 → columns 0–3 are 0,
        // 4–7 average columns 4 (0) and 5–7 (200) = 150, and 8–11 (8, 9 and their mirror 9, 8) = 200.
        let source = try Self.bitmap(10, 4) { x, _ in x < 5 ? [0, 0, 0] : [200, 200, 200] }
        try png(source).write(to: root.appendingPathComponent("halves.png"))
        let result = try await image("pix:4", "halves.png")
        XCTAssertEqual([result.width, result.height], [10, 4])
        XCTAssertEqual(
            (0..<10).map { Int(result.pixel(x: $0, y: 1)?[0] ?? 1) }, [0, 0, 0, 0, 150, 150, 150, 150, 200, 200])
    }

    /// extend_aspect_ratio pads with the background at its gravity: 200×100 into 300:600's ratio is
    /// 200×400, the image at the top with `no`.
    func testExtendAspectRatioPlacesTheImage() async throws {
        let result = try await image("w:300/h:600/exar:1:no/bg:ff0000", "geometry.png")
        XCTAssertEqual([result.width, result.height], [200, 400])
        XCTAssertEqual(result.pixel(x: 100, y: 399)?.prefix(3).map { $0 }, [255, 0, 0])
        XCTAssertNotEqual(result.pixel(x: 100, y: 50)?.prefix(3).map { $0 }, [255, 0, 0])
        let centred = try await image("w:300/h:600/exar:1/bg:ff0000", "geometry.png")
        XCTAssertEqual(centred.pixel(x: 100, y: 0)?.prefix(3).map { $0 }, [255, 0, 0])
        XCTAssertEqual(centred.pixel(x: 100, y: 399)?.prefix(3).map { $0 }, [255, 0, 0])
    }

    /// `rs:force` scales each side by its own factor, as imgproxy's `Resize(wscale, hscale)`: stripes
    /// across a 200×100 PNG forced to 100×51 (0.5 across, 0.51 down) match libvips' resize by those
    /// two scales, not the fit a pixel apart (102×51) cut to the box, which shifts every stripe.
    func testForceScalesEachSideOnItsOwn() async throws {
        let source = try Self.bitmap(200, 100) { x, _ in x / 3 % 2 == 0 ? [0, 0, 0] : [255, 255, 255] }
        try png(source).write(to: root.appendingPathComponent("stripes.png"))
        let result = try await image("rs:force:100:51", "stripes.png")
        XCTAssertEqual([result.width, result.height], [100, 51])
        let reference = try ImageProcessors.Resize(width: 100, height: 51).process(source)
        var total = 0
        for x in 0..<100 {
            total += abs(Int(result.pixel(x: x, y: 25)?[0] ?? 0) - Int(reference.pixel(x: x, y: 25)?[0] ?? 0))
        }
        XCTAssertLessThan(Double(total) / 100, 8, "the mean difference along the middle row")
    }
}
