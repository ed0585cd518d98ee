import Foundation
import VipsCore
import VipsSynthesis
import XCTest

/// TIFF layouts libvips 8.14's tiffload refuses, decoded through libtiff's RGBA interface
/// (`TIFFRGBACodec`) or its sample reader: files made with libtiff's own tiffcp from a libvips
/// TIFF, and small TIFFs written here byte by byte (12-bit samples, no PhotometricInterpretation).
final class TIFFFallbackTests: XCTestCase {
    private let decoder = ImageDecoder()

    private func tiffcp(_ arguments: [String], _ input: URL, _ output: URL) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/tiffcp")
        process.arguments = arguments + [input.path, output.path]
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "tiffcp \(arguments)")
    }

    /// Tiled separate planes (libvips: "tiled separate planes not supported"): the same pixels as the
    /// contiguous file libvips reads, at full size and as a thumbnail, with and without alpha.
    func testTiledSeparatePlanesDecodeAsTheContiguousFile() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/tiffcp") else {
            throw XCTSkip("tiffcp (libtiff-tools) is not installed; scripts/setup.sh installs it")
        }
        let folder = try TemporaryFolder()
        for alpha in [false, true] {
            let source = folder.url.appendingPathComponent("contiguous-\(alpha).tif")
            try ImageSynthesizer.data(width: 70, height: 45, seed: 3, alpha: alpha, format: .tiff).write(to: source)
            let planar = folder.url.appendingPathComponent("planar-\(alpha).tif")
            try tiffcp(["-p", "separate", "-t", "-w", "16", "-l", "16", "-c", "lzw"], source, planar)
            let reference = try decoder.decode(.file(source.path))
            let bitmap = try decoder.decode(.file(planar.path))
            XCTAssertEqual([bitmap.width, bitmap.height, bitmap.channels], [70, 45, alpha ? 4 : 3])
            if alpha {
                // libtiff's RGBA interface premultiplies; back to straight alpha, colours keep their rounding.
                var worst = 0
                for y in 0..<45 {
                    for x in 0..<70 {
                        guard let got = bitmap.pixel(x: x, y: y), let want = reference.pixel(x: x, y: y) else {
                            continue
                        }
                        XCTAssertEqual(got[3], want[3], "alpha at (\(x), \(y))")
                        if want[3] >= 128 {
                            worst = max(worst, (0..<3).map { abs(Int(got[$0]) - Int(want[$0])) }.max() ?? 0)
                        }
                    }
                }
                XCTAssertLessThanOrEqual(worst, 2)
            } else {
                XCTAssertEqual(bitmap.pixelData, reference.pixelData)
            }
            let info = try decoder.info(.file(planar.path))
            XCTAssertEqual(bitmap.source?.info, info, "info and decode read one header")
            let thumb = try decoder.decode(.file(planar.path), size: .maxPixelSize(32))
            XCTAssertEqual([thumb.width, thumb.height], [32, 21])
        }
    }

    /// Separate planes in strips whose second strip has a byte count of 0 (libvips: a read error):
    /// lenient decodes what is there, strict says why it cannot.
    func testAStripByteCountOfZero() throws {
        let data = Self.tiff(
            width: 8, height: 4, bits: 8, samples: 1, photometric: 1, rowsPerStrip: 2, zeroSecondStrip: true)
        let bitmap = try decoder.decode(.data(data))
        XCTAssertEqual([bitmap.width, bitmap.height], [8, 4])
        XCTAssertEqual(bitmap.pixel(x: 3, y: 1), [UInt8(3 * 8 + 1), UInt8(3 * 8 + 1), UInt8(3 * 8 + 1)])
        XCTAssertEqual(bitmap.pixel(x: 3, y: 3), [0, 0, 0])
    }

    /// 12-bit grey (libvips: "samples_per_pixel not a whole number of bytes"), scaled from its range.
    func testTwelveBitSamples() throws {
        let data = Self.tiff(width: 6, height: 3, bits: 12, samples: 1, photometric: 1, rowsPerStrip: 3)
        let bitmap = try decoder.decode(.data(data))
        XCTAssertEqual([bitmap.width, bitmap.height], [6, 3])
        for (x, y) in [(0, 0), (5, 2), (2, 1)] {
            let value = Self.sample(x, y, width: 6, bits: 12)
            let expected = UInt8((Double(value) * 255 / 4095).rounded())
            XCTAssertEqual(bitmap.pixel(x: x, y: y), [expected, expected, expected], "(\(x), \(y))")
        }
    }

    /// One 32-bit float sample and no PhotometricInterpretation (libvips: "required field 262
    /// missing"): grey, each value rounded and clipped to 0…255 as libvips casts floats.
    func testMissingPhotometricInterpretationWithFloatSamples() throws {
        let data = Self.tiff(width: 5, height: 4, bits: 32, samples: 1, photometric: nil, rowsPerStrip: 4)
        let bitmap = try decoder.decode(.data(data))
        for (x, y) in [(0, 0), (4, 3), (2, 1)] {
            let value = Self.floatSample(y * 5 + x)
            let expected = UInt8(max(0, min(255, value.rounded())))
            XCTAssertEqual(bitmap.pixel(x: x, y: y), [expected, expected, expected], "(\(x), \(y)) = \(value)")
        }
        XCTAssertEqual(try decoder.info(.data(data)).format, .tiff)
    }

    /// The float test TIFF's samples: below 0, within and above 255.
    private static func floatSample(_ n: Int) -> Float { Float(n) * 17.5 - 20.25 }

    func testPixelLimitAndCancellation() throws {
        let data = Self.tiff(width: 64, height: 64, bits: 12, samples: 1, photometric: 1, rowsPerStrip: 8)
        let small = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxPixelCount: 1000)))
        assertThrowsKind(.tooLarge) { () throws(VipsError) in try small.decode(.data(data)) }
        let cancellation = DecodeCancellation()
        cancellation.cancel()
        assertThrowsKind(.cancelled) { () throws(VipsError) in
            try cancellation.run { () throws(VipsError) in try decoder.decode(.data(data)) }
        }
    }

    /// Sample n of the test TIFFs' rows: a ramp that uses the whole range.
    private static func sample(_ n: Int, _ row: Int, width: Int, bits: Int) -> Int {
        ((row * width + n) * 37) & ((1 << bits) - 1)
    }

    /// A little-endian, uncompressed, striped TIFF with the given tags (photometric nil: the tag left out).
    private static func tiff(
        width: Int, height: Int, bits: Int, samples: Int, photometric: Int?, rowsPerStrip: Int,
        zeroSecondStrip: Bool = false
    ) -> Data {
        let rowBytes = (width * samples * bits + 7) / 8
        var pixels = Data()
        if bits == 32 {
            for n in 0..<(width * height * samples) {
                let raw = floatSample(n).bitPattern
                pixels.append(contentsOf: (0..<4).map { UInt8(truncatingIfNeeded: raw >> (8 * $0)) })
            }
        }
        for row in 0..<height where bits != 32 {
            var bytes = [UInt8](repeating: 0, count: rowBytes)
            for n in 0..<(width * samples) {
                let value =
                    bits == 8 && zeroSecondStrip ? n * 8 + row : sample(n, row, width: width * samples, bits: bits)
                for bit in 0..<bits where value >> (bits - 1 - bit) & 1 == 1 {
                    let at = n * bits + bit
                    bytes[at / 8] |= 0x80 >> UInt8(at % 8)
                }
            }
            pixels.append(contentsOf: bytes)
        }
        let strips = (height + rowsPerStrip - 1) / rowsPerStrip
        var entries: [(tag: Int, type: Int, count: Int, value: [Int])] = [
            (256, 3, 1, [width]), (257, 3, 1, [height]), (258, 3, 1, [bits]), (259, 3, 1, [1])
        ]
        if let photometric { entries.append((262, 3, 1, [photometric])) }
        if bits == 32 { entries.append((339, 3, 1, [3])) } // SampleFormat: IEEE floating point
        let header = 8
        let offsetsAt = header + 2 + 12 * (entries.count + 4) + 4
        let countsAt = offsetsAt + 4 * strips
        let dataAt = countsAt + 4 * strips
        let offsets = (0..<strips).map { dataAt + $0 * rowsPerStrip * rowBytes }
        let counts = (0..<strips).map { index in
            zeroSecondStrip && index == 1 ? 0 : min(rowsPerStrip, height - index * rowsPerStrip) * rowBytes
        }
        entries.append((273, 4, strips, offsets))
        entries.append((277, 3, 1, [samples]))
        entries.append((278, 3, 1, [rowsPerStrip]))
        entries.append((279, 4, strips, counts))
        var file = Data([0x49, 0x49, 0x2A, 0x00, 0x08, 0x00, 0x00, 0x00])
        func u16(_ value: Int) { file.append(contentsOf: [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF)]) }
        func u32(_ value: Int) { u16(value & 0xFFFF); u16(value >> 16) }
        u16(entries.count)
        for entry in entries.sorted(by: { $0.tag < $1.tag }) {
            u16(entry.tag)
            u16(entry.type)
            u32(entry.count)
            if entry.count == 1 {
                if entry.type == 3 { u16(entry.value[0]); u16(0) } else { u32(entry.value[0]) }
            } else {
                u32(entry.tag == 273 ? offsetsAt : countsAt)
            }
        }
        u32(0)
        for offset in offsets { u32(offset) }
        for count in counts { u32(count) }
        file.append(pixels)
        return file
    }
}
