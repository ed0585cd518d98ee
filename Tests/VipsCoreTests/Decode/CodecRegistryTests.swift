import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// The codec registry: one direct codec per format, libvips for the rest and
/// for whatever a codec declines, and one header per call, read the same way
/// by `info` and `decode`.
final class CodecRegistryTests: XCTestCase {
    let fast = ImageDecoder()
    let libvipsFast = ImageDecoder.libvipsOnly()
    let strict = ImageDecoder(options: DecodeOptions(strict: true))
    let quality = ImageDecoder(options: DecodeOptions(shrinkOnLoad: .quality))

    // MARK: - The table

    func testEveryDirectFormatHasItsCodecAndReadsAsLibvipsDoes() throws {
        XCTAssertEqual(Set(CodecRegistry.codecs.keys), [.jpeg, .png, .webp, .bmp, .ico, .cur, .tga])
        // The formats libvips 8.14 has no loader for are their codecs' alone; the others fall back to libvips.
        XCTAssertEqual(
            Set(CodecRegistry.codecs.filter { $0.value.decodesAlone }.keys), [.bmp, .ico, .cur, .tga])
        let samples: [(ImageFormat, ImageSynthesizer.Format, Bool)] = [
            (.jpeg, .jpeg(orientation: 6), false), (.png, .png(), true), (.png, .png(palette: true), false),
            (.webp, .webp(orientation: 3), true), (.webp, .webp(lossless: true), false)
        ]
        for (format, synthetic, alpha) in samples {
            let label = "\(synthetic) alpha \(alpha)"
            let data = try ImageSynthesizer.data(width: 120, height: 80, seed: 3, alpha: alpha, format: synthetic)
            XCTAssertNotNil(CodecRegistry.codec(for: format), label)
            XCTAssertEqual(try fast.route(.data(data)), .direct, label)
            // The codec's header is the one libvips would read: same size, bands, alpha, orientation.
            let info = try fast.info(.data(data))
            XCTAssertEqual(info, try libvipsFast.info(.data(data)), label)
            XCTAssertEqual(info.format, format, label)
            let direct = try XCTUnwrap(try fast.decodeDirectly(.data(data), size: .maxPixelSize(50)), label)
            XCTAssertEqual(direct.source?.info, info, label)
            XCTAssertEqual(try fast.decode(.data(data), size: .maxPixelSize(50)).pixelData, direct.pixelData, label)
        }
    }

    func testFormatsWithoutACodecAreLibvipsAlone() throws {
        for (synthetic, format) in [(ImageSynthesizer.Format.gif, ImageFormat.gif), (.tiff, .tiff)] {
            let data = try ImageSynthesizer.data(width: 60, height: 40, seed: 5, format: synthetic)
            XCTAssertNil(CodecRegistry.codec(for: format))
            XCTAssertEqual(try fast.route(.data(data)), .libvips("no direct codec for \(format) images"))
            XCTAssertNil(try fast.decodeDirectly(.data(data), size: .maxPixelSize(30)))
            XCTAssertEqual(try fast.info(.data(data)), try libvipsFast.info(.data(data)))
            XCTAssertEqual(
                try fast.decode(.data(data), size: .maxPixelSize(30)).pixelData,
                try libvipsFast.decode(.data(data), size: .maxPixelSize(30)).pixelData)
        }
    }

    func testWhatACodecDeclinesIsLibvipsForHeaderAndPixels() throws {
        // Declined from the header (a P3 profile, CMYK, an animation): libvips reads both.
        let declined: [(String, Data)] = [
            ("p3 jpeg", try ImageSynthesizer.data(width: 90, height: 60, iccProfile: "p3", format: .jpeg())),
            ("cmyk jpeg", try ImageSynthesizer.data(width: 90, height: 60, format: .jpeg(cmyk: true))),
            ("p3 png", try ImageSynthesizer.data(width: 90, height: 60, iccProfile: "p3", format: .png())),
            ("p3 webp", try ImageSynthesizer.data(width: 90, height: 60, iccProfile: "p3", format: .webp()))
        ]
        for (label, data) in declined {
            guard case .libvips = try fast.route(.data(data)) else { return XCTFail("\(label) is declined") }
            XCTAssertNil(try fast.decodeDirectly(.data(data), size: .maxPixelSize(40)), label)
            XCTAssertEqual(try fast.info(.data(data)), try libvipsFast.info(.data(data)), label)
            XCTAssertEqual(
                try fast.decode(.data(data), size: .maxPixelSize(40)).pixelData,
                try libvipsFast.decode(.data(data), size: .maxPixelSize(40)).pixelData, label)
        }
        // Declined for one request only (upscaling): libvips decodes the pixels, the header stays the codec's.
        let plain = try ImageSynthesizer.data(width: 90, height: 60, seed: 7, format: .png())
        XCTAssertEqual(
            try fast.route(.data(plain), size: .maxPixelSize(180), allowUpscale: true), .libvips("upscaling"))
        let upscaled = try fast.decode(.data(plain), size: .maxPixelSize(180), allowUpscale: true)
        XCTAssertEqual([upscaled.width, upscaled.height], [180, 120])
        XCTAssertEqual(upscaled.source?.info, try fast.info(.data(plain)))
        XCTAssertEqual(
            upscaled.pixelData,
            try libvipsFast.decode(.data(plain), size: .maxPixelSize(180), allowUpscale: true).pixelData)
    }

    // MARK: - One header per call

    func testResizeModesUseTheHeaderTheDecodeReads() throws {
        // libvips' probe refuses this PNG (a chunk type that is not four letters, see
        // FuzzRegressionTests); the direct codec reads it. Fill and stretch choose their
        // covering side from the same header as the decode, so they read it too.
        let png = try ImageSynthesizer.data(width: 120, height: 80, seed: 8, format: .png())
        let mutated = try DirectPNGTests.withChunk("pH\u{7F}s", [0, 0, 0, 1, 0, 0, 0, 1, 0], into: png)
        XCTAssertEqual(try fast.route(.data(mutated), size: .maxPixelSize(40)), .direct)
        HostileFiles.assertFails(.corruptData, "libvips' probe") { () throws(VipsError) in
            try libvipsFast.info(.data(mutated))
        }
        let info = try fast.info(.data(mutated))
        for mode in [ResizeMode.fill(.centre), .stretch, .contain(background: .black, gravity: .centre), .fit] {
            let bitmap = try fast.decode(.data(mutated), size: .fit(width: 40, height: 40), mode: mode)
            XCTAssertEqual([bitmap.width, bitmap.height], mode == .fit ? [40, 27] : [40, 40], "\(mode)")
            XCTAssertEqual(bitmap.source?.info, info, "\(mode)")
            // The same pixels as the unmutated file: the chunk changes nothing.
            XCTAssertEqual(
                bitmap.pixelData, try fast.decode(.data(png), size: .fit(width: 40, height: 40), mode: mode).pixelData,
                "\(mode)")
        }
    }

    func testInfoAndDecodeAgreeOnTheHostileCorpus() throws {
        let cases = HostileFiles.malformed(from: try HostileFiles.originals())
        var agreedFailures = 0, agreedHeaders = 0
        for hostile in cases {
            let input = ImageInput.data(hostile.data)
            for (mode, decoder) in [("fast", fast), ("strict", strict), ("quality", quality)] {
                let name = "\(hostile.name) (\(mode))"
                let info: ImageInfo
                do {
                    info = try decoder.info(input)
                } catch {
                    HostileFiles.assertTyped(error, name)
                    // The header refused: so is every decode, with the same kind.
                    for size in [TargetSize.maxPixelSize(48), .original] {
                        HostileFiles.assertFails([error.kind], "\(name) \(size)") { () throws(VipsError) in
                            try decoder.decode(input, size: size)
                        }
                    }
                    HostileFiles.assertFails([error.kind], "\(name) fill") { () throws(VipsError) in
                        try decoder.decode(input, size: .fit(width: 20, height: 20), mode: .fill(.centre))
                    }
                    agreedFailures += 1
                    continue
                }
                // The header read: a decode may still meet damage past it, but reports that header.
                for size in [TargetSize.maxPixelSize(48), .original] {
                    do {
                        let bitmap = try decoder.decode(input, size: size)
                        XCTAssertEqual(bitmap.source?.info, info, "\(name) \(size)")
                        agreedHeaders += 1
                    } catch {
                        HostileFiles.assertTyped(error, "\(name) \(size)")
                    }
                }
                if let filled = try? decoder.decode(input, size: .fit(width: 20, height: 20), mode: .fill(.centre)) {
                    XCTAssertEqual(filled.source?.info, info, "\(name) fill")
                }
            }
        }
        XCTAssertGreaterThan(agreedFailures, 100)
        XCTAssertGreaterThan(agreedHeaders, 100)
    }
}
