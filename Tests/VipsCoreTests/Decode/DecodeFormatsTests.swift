import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// Decoding every supported format to 8-bit sRGB bitmaps at the requested size.
final class DecodeFormatsTests: XCTestCase {
    let decoder = ImageDecoder()

    func testThumbnailOfEveryFormatFromDataAndFile() throws {
        let folder = try TemporaryFolder()
        for (variant, data) in zip(Fixtures.variants, Fixtures.variantData) {
            let path = try folder.write(data, named: "\(variant.name).\(variant.format.fileExtension)")
            var fromData: Bitmap?
            for input in [ImageInput.data(data), .file(path)] {
                let label = "\(variant.name) from \(input.label)"
                let bitmap = try decoder.decode(input, size: .maxPixelSize(256))
                XCTAssertEqual(bitmap.width, 256, label)
                XCTAssertEqual(bitmap.height, 192, label)
                assertFits(bitmap, box: (256, 256), source: (400, 300), label)
                assertSRGB8(bitmap, alpha: variant.alpha, label)
                XCTAssertEqual(bitmap.scale, 1, label)
                if let fromData {
                    XCTAssertEqual(bitmap.bytes, fromData.bytes, "file and memory decode identically: \(label)")
                } else {
                    fromData = bitmap
                }
            }
        }
    }

    func testAlphaIsKeptNotFlattened() throws {
        // The synthetic alpha is a smooth field from about 0 to 255: the decoded
        // alpha must vary, and must match the lossless source closely.
        for format: ImageSynthesizer.Format in [.png(), .png(sixteenBit: true), .webp(lossless: true), .tiff] {
            let data = try ImageSynthesizer.data(width: 200, height: 150, seed: 8, alpha: true, format: format)
            let bitmap = try decoder.decode(.data(data))
            let source = try ImageSynthesizer.bitmap(width: 200, height: 150, seed: 8, alpha: true)
            XCTAssertEqual(bitmap.channels, 4, "\(format)")
            var alphas = Set<UInt8>()
            var maxDifference = 0
            for y in stride(from: 0, to: 150, by: 7) {
                for x in stride(from: 0, to: 200, by: 7) {
                    let decoded = bitmap.pixel(x: x, y: y)![3], expected = source.pixel(x: x, y: y)![3]
                    alphas.insert(decoded)
                    maxDifference = max(maxDifference, abs(Int(decoded) - Int(expected)))
                }
            }
            XCTAssertGreaterThan(alphas.count, 20, "alpha varies: \(format)")
            XCTAssertLessThanOrEqual(maxDifference, 1, "alpha survives lossless formats: \(format)")
        }
    }

    func testOriginalDecodesFullSize() throws {
        for (variant, data) in zip(Fixtures.variants, Fixtures.variantData) {
            let bitmap = try decoder.decode(.data(data), size: .original)
            XCTAssertEqual(bitmap.width, 400, variant.name)
            XCTAssertEqual(bitmap.height, 300, variant.name)
            assertSRGB8(bitmap, alpha: variant.alpha, variant.name)
        }
    }

    func testLosslessFormatsDecodeToTheSynthesisedPixels() throws {
        let source = try ImageSynthesizer.bitmap(width: 120, height: 90, seed: 12)
        for format: ImageSynthesizer.Format in [
            .png(), .png(interlaced: true), .png(sixteenBit: true), .webp(lossless: true), .tiff
        ] {
            let data = try ImageSynthesizer.data(width: 120, height: 90, seed: 12, format: format)
            let bitmap = try decoder.decode(.data(data))
            XCTAssertEqual(bitmap.bytes, source.bytes, "\(format) is lossless")
        }
    }

    func testFitBoxes() throws {
        let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 7, format: .png())
        let boxes: [(width: Int, height: Int)] = [(100, 200), (300, 100), (200, 150), (399, 299), (1, 1), (50, 1000)]
        for box in boxes {
            let bitmap = try decoder.decode(.data(data), size: .fit(width: box.width, height: box.height))
            assertFits(bitmap, box: box, source: (400, 300), "fit \(box)")
        }
        let wide = try decoder.decode(.data(data), size: .fit(width: 300, height: 100))
        XCTAssertEqual(wide.height, 100)
        XCTAssertEqual(wide.width, 133)
        let tall = try decoder.decode(.data(data), size: .fit(width: 100, height: 200))
        XCTAssertEqual(tall.width, 100)
        XCTAssertEqual(tall.height, 75)
    }

    func testNeverUpscalesUnlessAllowed() throws {
        let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 9, format: .jpeg())
        for size: TargetSize in [
            .maxPixelSize(400), .maxPixelSize(1000), .fit(width: 800, height: 301), .fit(width: 4000, height: 3000)
        ] {
            let bitmap = try decoder.decode(.data(data), size: size)
            XCTAssertEqual(bitmap.width, 400, "\(size)")
            XCTAssertEqual(bitmap.height, 300, "\(size)")
        }
        let upscaled = try decoder.decode(.data(data), size: .maxPixelSize(1000), allowUpscale: true)
        XCTAssertEqual(upscaled.width, 1000)
        XCTAssertEqual(upscaled.height, 750)
        let fitted = try decoder.decode(.data(data), size: .fit(width: 800, height: 900), allowUpscale: true)
        XCTAssertEqual(fitted.width, 800)
        XCTAssertEqual(fitted.height, 600)
        // Upscaling is allowed, not forced: a smaller box still shrinks.
        let shrunk = try decoder.decode(.data(data), size: .maxPixelSize(200), allowUpscale: true)
        XCTAssertEqual(shrunk.width, 200)
        XCTAssertEqual(shrunk.height, 150)
    }

    func testScaleMultipliesPointsIntoPixels() throws {
        let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 10, format: .webp())
        let retina = try decoder.decode(.data(data), size: .maxPixelSize(100), scale: 2)
        XCTAssertEqual(retina.width, 200)
        XCTAssertEqual(retina.height, 150)
        XCTAssertEqual(retina.scale, 2)
        XCTAssertEqual(retina.pointSize.width, 100)
        XCTAssertEqual(retina.pointSize.height, 75)

        let triple = try decoder.decode(.data(data), size: .fit(width: 50, height: 100), scale: 3)
        assertFits(triple, box: (150, 300), source: (400, 300))
        XCTAssertEqual(triple.width, 150)
        XCTAssertEqual(triple.scale, 3)

        // The scale is recorded even when the image is smaller than the box.
        let small = try decoder.decode(.data(data), size: .maxPixelSize(300), scale: 2)
        XCTAssertEqual(small.width, 400)
        XCTAssertEqual(small.scale, 2)
        XCTAssertEqual(small.pointSize.width, 200)

        let original = try decoder.decode(.data(data), size: .original, scale: 2)
        XCTAssertEqual(original.width, 400)
        XCTAssertEqual(original.scale, 2)
    }

    func testTargetSizePixelBox() {
        XCTAssertNil(TargetSize.original.pixelBox(scale: 2))
        XCTAssertEqual(TargetSize.maxPixelSize(100).pixelBox(scale: 2)?.width, 200)
        XCTAssertEqual(TargetSize.maxPixelSize(100).pixelBox(scale: 2)?.height, 200)
        XCTAssertEqual(TargetSize.fit(width: 10, height: 20).pixelBox(scale: 1.5)?.width, 15)
        XCTAssertEqual(TargetSize.fit(width: 10, height: 20).pixelBox(scale: 1.5)?.height, 30)
        XCTAssertEqual(TargetSize.maxPixelSize(1).pixelBox(scale: 0.1)?.width, 1, "never below one pixel")
        // Extreme values must not trap: they clamp to libvips' coordinate range.
        XCTAssertEqual(TargetSize.maxPixelSize(.max).pixelBox(scale: 1)?.width, Int(Int32.max))
        XCTAssertEqual(TargetSize.maxPixelSize(10).pixelBox(scale: 1e300)?.width, Int(Int32.max))
        XCTAssertEqual(TargetSize.maxPixelSize(10).pixelBox(scale: .infinity)?.width, Int(Int32.max))
        XCTAssertEqual(TargetSize.maxPixelSize(10).pixelBox(scale: .nan)?.width, 1)
    }

    func testHugeBoxWithoutUpscaleGivesTheOriginal() throws {
        let data = try ImageSynthesizer.data(width: 40, height: 30, seed: 11, format: .png())
        let bitmap = try decoder.decode(.data(data), size: .maxPixelSize(.max))
        XCTAssertEqual(bitmap.width, 40)
        XCTAssertEqual(bitmap.height, 30)
        let scaled = try decoder.decode(.data(data), size: .fit(width: 10, height: 10), scale: 1e12)
        XCTAssertEqual(scaled.width, 40)
    }

    // MARK: - Shrink on load

    func testLargeJPEGShrinksOnLoadTo256() throws {
        let data = Fixtures.largeJPEG
        let info = try decoder.info(.data(data))
        XCTAssertEqual(info.width, 4000)
        XCTAssertEqual(info.height, 3000)
        for options in [DecodeOptions(), DecodeOptions(shrinkOnLoad: .quality)] {
            let bitmap = try ImageDecoder(options: options).decode(.data(data), size: .maxPixelSize(256))
            XCTAssertEqual(bitmap.width, 256, "\(options.shrinkOnLoad)")
            XCTAssertEqual(bitmap.height, 192, "\(options.shrinkOnLoad)")
            assertSRGB8(bitmap, alpha: false)
        }
        for side in [100, 255, 257, 333, 500, 501, 999, 1000, 1001, 2000, 2001] {
            let bitmap = try decoder.decode(.data(data), size: .maxPixelSize(side))
            assertFits(bitmap, box: (side, side), source: (4000, 3000), "max \(side)")
        }
    }

    func testLargeJPEGFromFileDecodesFullSize() throws {
        let folder = try TemporaryFolder()
        let path = try folder.write(Fixtures.largeJPEG, named: "large.jpg")
        let bitmap = try decoder.decode(.file(path))
        XCTAssertEqual(bitmap.width, 4000)
        XCTAssertEqual(bitmap.height, 3000)
        let thumbnail = try decoder.decode(.file(path), size: .fit(width: 640, height: 640), scale: 0.5)
        XCTAssertEqual(thumbnail.width, 320)
        XCTAssertEqual(thumbnail.height, 240)
        XCTAssertEqual(thumbnail.scale, 0.5)
    }

    func testShrunkThumbnailLooksLikeTheFullDecode() throws {
        // Shrink-on-load must only change sharpness, never the picture: compare
        // the 256 px thumbnail with the full decode reduced in memory.
        let full = try decoder.decode(.data(Fixtures.largeJPEG))
        let reference = try decoder.resize(full, to: .maxPixelSize(256), scale: 1)
        let thumbnail = try decoder.decode(.data(Fixtures.largeJPEG), size: .maxPixelSize(256))
        XCTAssertEqual(reference.width, thumbnail.width)
        XCTAssertEqual(reference.height, thumbnail.height)
        XCTAssertLessThan(thumbnail.meanAbsoluteDifference(to: reference), 4)
    }

    func testFastModesBicubicResizeMatchesVipsThumbnailsSizeAndPixels() throws {
        // Fast mode does the downscale left after shrink-on-load itself, with a
        // bicubic kernel; quality mode leaves it to vips_thumbnail (lanczos3).
        // With no shrink-on-load in either (a PNG; a JPEG boxed at under 2×)
        // both start from the same pixels: same size to the pixel, in every
        // orientation and box shape, and pixels within a rounding step.
        let quality = ImageDecoder(options: DecodeOptions(shrinkOnLoad: .quality))
        var sources: [(String, Data)] = [
            ("png", try ImageSynthesizer.data(width: 1001, height: 701, seed: 21, format: .png())),
            (
                "png with alpha",
                try ImageSynthesizer.data(width: 1001, height: 701, seed: 23, alpha: true, format: .png())
            ),
            (
                "16-bit png with alpha",
                try ImageSynthesizer.data(
                    width: 1001, height: 701, seed: 24, alpha: true,
                    format: .png(sixteenBit: true))
            )
        ]
        for orientation in [1, 6, 8] {
            sources.append(
                (
                    "jpeg orientation \(orientation)",
                    try ImageSynthesizer.data(
                        width: 1001, height: 701, seed: 22, format: .jpeg(orientation: orientation))
                ))
        }
        let boxes: [TargetSize] = [
            .maxPixelSize(600), .maxPixelSize(557), .fit(width: 560, height: 640), .fit(width: 900, height: 520)
        ]
        for (name, data) in sources {
            for box in boxes {
                let fast = try decoder.decode(.data(data), size: box)
                let reference = try quality.decode(.data(data), size: box)
                XCTAssertEqual([fast.width, fast.height], [reference.width, reference.height], "\(name), \(box)")
                guard fast.width == reference.width, fast.height == reference.height else { continue }
                XCTAssertLessThan(fast.meanAbsoluteDifference(to: reference), 1.5, "\(name), \(box)")
            }
        }
        // Larger shrinks: alpha images are box-shrunk premultiplied first, then finished bicubic.
        for (name, data) in sources.prefix(3) {
            for box in [TargetSize.maxPixelSize(200), .maxPixelSize(64), .fit(width: 333, height: 100)] {
                let fast = try decoder.decode(.data(data), size: box)
                let reference = try quality.decode(.data(data), size: box)
                XCTAssertEqual(
                    [fast.width, fast.height, fast.channels], [reference.width, reference.height, reference.channels],
                    "\(name), \(box)")
                guard fast.width == reference.width, fast.height == reference.height else { continue }
                XCTAssertLessThan(fast.meanAbsoluteDifference(to: reference), 2.5, "\(name), \(box)")
            }
        }
    }

    func testShrinkOnLoadDependsOnTheOutputNotOnHowTheBoxIsSpelled() throws {
        // A 2048×256 panorama fitted to 256 px comes out 256×32, whether asked
        // as a 256 px square or as the 256×32 box itself; both must shrink on
        // load equally far (1/8), so the pixels are identical.
        for format: ImageSynthesizer.Format in [.jpeg(), .webp()] {
            let data = try ImageSynthesizer.data(width: 2048, height: 256, seed: 13, format: format)
            let square = try decoder.decode(.data(data), size: .maxPixelSize(256))
            let exact = try decoder.decode(.data(data), size: .fit(width: 256, height: 32))
            XCTAssertEqual(square.width, 256, "\(format)")
            XCTAssertEqual(square.height, 32, "\(format)")
            XCTAssertEqual(exact.width, 256, "\(format)")
            XCTAssertEqual(exact.height, 32, "\(format)")
            XCTAssertEqual(square.bytes, exact.bytes, "\(format)")
        }
    }

    func testWebPScaledDecodeHitsTheBoxExactly() throws {
        let data = try ImageSynthesizer.data(width: 1000, height: 750, seed: 14, format: .webp())
        for side in [1, 7, 99, 100, 101, 255, 256, 257, 333, 499, 500, 501, 777, 999] {
            let bitmap = try decoder.decode(.data(data), size: .maxPixelSize(side))
            XCTAssertEqual(bitmap.width, side, "max \(side)")
            assertFits(bitmap, box: (side, side), source: (1000, 750), "max \(side)")
        }
    }
}
