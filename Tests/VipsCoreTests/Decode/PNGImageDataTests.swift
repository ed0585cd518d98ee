import CDeflate
import Foundation
import XCTest

@testable import VipsCore

/// The direct PNG path's whole-stream inflate (`PNGImageData`): every filter
/// in every layout it takes gives the pixels the rows hold (checked against
/// the test's own filtering and against libvips), whatever the IDAT chunking,
/// from a file or memory; anything unexpected in the stream goes back to
/// libspng's path, whose answer is the codec's.
final class PNGImageDataTests: XCTestCase {
    let fast = ImageDecoder()
    let strict = ImageDecoder(options: DecodeOptions(strict: true))
    let libvipsFast = ImageDecoder.libvipsOnly()

    /// 0 grey, 4 grey + alpha, 2 RGB, 6 RGBA.
    let layouts: [(colourType: UInt8, channels: Int)] = [(0, 1), (4, 2), (2, 3), (6, 4)]

    func testEveryFilterInEveryLayoutGivesTheRowsPixels() throws {
        for (colourType, channels) in layouts {
            for width in [1, 2, 5, 61] {
                for chunkSize in [Int?.none, 7, 1000] {
                    let image = FilteredPNG(
                        width: width, height: 23, colourType: colourType, channels: channels,
                        seed: width * 31 + Int(colourType), chunkSize: chunkSize)
                    let what =
                        "type \(colourType), \(width) wide, IDAT chunks of \(chunkSize.map(String.init) ?? "all")"
                    let header = try XCTUnwrap(try DirectPNGTests.chunks(of: image.data), what)
                    XCTAssertNotNil(PNGImageData.layout(of: header), what)
                    for strictness in [false, true] {
                        XCTAssertNotNil(
                            PNGImageData.inflate(.data(image.data), header: header, strict: strictness),
                            "\(what): inflated whole, strict \(strictness)")
                    }
                    let direct = try XCTUnwrap(try fast.decodeDirectly(.data(image.data), size: .original), what)
                    XCTAssertEqual(direct.bytes, image.expectedBitmapBytes, what)
                    XCTAssertEqual(try strict.decode(.data(image.data)).bytes, image.expectedBitmapBytes, what)
                    XCTAssertEqual(
                        try libvipsFast.decode(.data(image.data)).bytes, image.expectedBitmapBytes,
                        "\(what): libvips reads the rows so too")
                }
            }
        }
    }

    func testFilesAreReadWholeAndDecodeLikeTheirBytes() throws {
        let folder = try TemporaryFolder()
        for (colourType, channels) in layouts {
            let image = FilteredPNG(
                width: 77, height: 40, colourType: colourType, channels: channels, seed: 5, chunkSize: 300)
            let path = try folder.write(image.data, named: "filtered-\(colourType).png")
            let header = try XCTUnwrap(try DirectPNGTests.chunks(of: image.data))
            XCTAssertNotNil(PNGImageData.inflate(.file(path), header: header, strict: true), "type \(colourType)")
            XCTAssertEqual(try fast.decode(.file(path)).bytes, image.expectedBitmapBytes, "type \(colourType)")
            XCTAssertEqual(
                try fast.decode(.file(path), size: .maxPixelSize(20)).bytes,
                try fast.decode(.data(image.data), size: .maxPixelSize(20)).bytes, "type \(colourType)")
        }
    }

    func testTheInflatedBlockIsKeptForTheThreadsNextImage() throws {
        let image = FilteredPNG(width: 300, height: 200, colourType: 2, channels: 3, seed: 8, chunkSize: 4096)
        let data = image.data
        // On a thread of its own, which holds no block before this decode.
        struct Kept: Sendable { var before = [0, 0], after = [0, 0], decoded = false }
        let kept = LockedState(Kept())
        let done = DispatchSemaphore(value: 0)
        let thread = Thread { [fast] in
            let uses: [ScratchMemory.Use] = [.inflatedPNG, .compressedPNG]
            let before = uses.map(ScratchMemory.keptBytes)
            let decoded = (try? fast.decodeDirectly(.data(data), size: .maxPixelSize(64))) != nil
            let after = uses.map(ScratchMemory.keptBytes)
            kept.withLock { $0 = Kept(before: before, after: after, decoded: decoded) }
            done.signal()
        }
        thread.start()
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success)
        let result = kept.withLock { $0 }
        XCTAssertTrue(result.decoded)
        XCTAssertEqual(result.before, [0, 0])
        XCTAssertEqual(
            result.after, [ScratchMemory.Use.inflatedPNG.keptLimit, ScratchMemory.Use.compressedPNG.keptLimit],
            "the inflated data and the gathered IDAT data, kept for the thread's next image")
    }

    func testOnlyPlainEightBitLayoutsWithinTheBudgetAreInflatedWhole() {
        func header(
            _ width: Int, _ height: Int, depth: Int = 8, type: Int = 2, interlaced: Bool = false, trns: Bool = false
        ) -> PNGHeader {
            PNGHeader(
                width: width, height: height, bitDepth: depth, colourType: type, interlaced: interlaced,
                hasTRNS: trns, animated: false, iccProfile: nil, orientation: 1)
        }
        XCTAssertEqual(PNGImageData.layout(of: header(2000, 1500))?.inflatedSize, 1500 * 6001)
        XCTAssertEqual(PNGImageData.layout(of: header(2000, 2000, type: 6))?.inflatedSize, 2000 * 8001)
        XCTAssertNil(PNGImageData.layout(of: header(3000, 2000)), "18 MB inflated: streamed")
        XCTAssertNil(PNGImageData.layout(of: header(Int(Int32.max), Int(Int32.max))), "no overflow")
        XCTAssertNil(PNGImageData.layout(of: header(100, 100, depth: 16)))
        XCTAssertNil(PNGImageData.layout(of: header(100, 100, depth: 4, type: 0)))
        XCTAssertNil(PNGImageData.layout(of: header(100, 100, type: 3)), "palette")
        XCTAssertNil(PNGImageData.layout(of: header(100, 100, trns: true)))
        XCTAssertNil(PNGImageData.layout(of: header(100, 100, interlaced: true)))
    }

    /// A filter type that does not exist, a stream too short or too long, a
    /// broken zlib header: never inflated whole, so libspng's path answers,
    /// as it did before this path (for damage: typed when strict, libvips'
    /// image when lenient).
    func testAnythingUnexpectedGoesBackToTheStreamedPath() throws {
        let good = FilteredPNG(width: 40, height: 30, colourType: 2, channels: 3, seed: 3, chunkSize: 256)
        var badFilter = good
        badFilter.rows[17][0] = 5
        var short = good
        short.rows.removeLast(4)
        var long = good
        long.rows.append(long.rows[0])
        var badHeader = good
        badHeader.zlibHeader = [0x78, 0x9D] // not a multiple of 31
        for (label, image) in [("filter type 5", badFilter), ("short", short), ("header", badHeader)] {
            let data = image.encoded()
            let header = try XCTUnwrap(try DirectPNGTests.chunks(of: data), label)
            XCTAssertNil(PNGImageData.inflate(.data(data), header: header, strict: false), label)
            XCTAssertNil(PNGImageData.inflate(.data(data), header: header, strict: true), label)
            XCTAssertThrowsError(try strict.decode(.data(data), size: .maxPixelSize(16)), label)
            XCTAssertEqual(
                try? fast.decode(.data(data), size: .maxPixelSize(16)).bytes,
                try? libvipsFast.decode(.data(data), size: .maxPixelSize(16)).bytes, "\(label): libvips' answer")
        }
        // More rows than the header's: libspng reads the rows it needs and stops, in both modes.
        let longData = long.encoded()
        let longHeader = try XCTUnwrap(try DirectPNGTests.chunks(of: longData))
        XCTAssertNil(PNGImageData.inflate(.data(longData), header: longHeader, strict: false))
        for decoder in [fast, strict] {
            XCTAssertEqual(
                try decoder.decode(.data(longData), size: .maxPixelSize(16)).bytes,
                try decoder.decode(.data(good.data), size: .maxPixelSize(16)).bytes, "long")
        }
        // A wrong Adler-32: strict does not inflate it whole; libspng's path ignores it (as it always has).
        var wrongAdler = good
        wrongAdler.adlerXOR = 0xFFFF
        let data = wrongAdler.encoded()
        let header = try XCTUnwrap(try DirectPNGTests.chunks(of: data))
        XCTAssertNil(PNGImageData.inflate(.data(data), header: header, strict: true))
        XCTAssertNotNil(PNGImageData.inflate(.data(data), header: header, strict: false))
        XCTAssertEqual(try strict.decode(.data(data)).bytes, good.expectedBitmapBytes)
        XCTAssertEqual(try fast.decode(.data(data)).bytes, good.expectedBitmapBytes)
    }
}

/// An 8-bit PNG written by the test: pixels from a seed, each row filtered
/// with filter `(row × 3 + width) % 5` by the specification's own formulas,
/// compressed by libdeflate and cut into IDAT chunks of `chunkSize` bytes.
struct FilteredPNG {
    let width: Int, height: Int, colourType: UInt8, channels: Int
    let chunkSize: Int?
    /// The unfiltered pixels, row by row.
    let pixels: [[UInt8]]
    /// The filtered rows, each its filter type then its bytes.
    var rows: [[UInt8]]
    var zlibHeader: [UInt8] = [0x78, 0x9C]
    var adlerXOR: UInt32 = 0

    init(width: Int, height: Int, colourType: UInt8, channels: Int, seed: Int, chunkSize: Int?) {
        (self.width, self.height, self.colourType, self.channels, self.chunkSize) =
            (width, height, colourType, channels, chunkSize)
        var state = UInt64(truncatingIfNeeded: seed) &* 0x9E37_79B9_7F4A_7C15 | 1
        var pixels: [[UInt8]] = []
        for y in 0..<height {
            var row: [UInt8] = []
            for x in 0..<(width * channels) {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                // Mostly a smooth gradient (so the predictors matter), some noise, some extremes.
                let smooth = (x * 3 + y * 5) & 0xFF
                let noise = Int(state % 23) - 11
                row.append(state % 17 == 0 ? UInt8(state >> 60 == 0 ? 0 : 255) : UInt8(clamping: smooth + noise))
            }
            pixels.append(row)
        }
        self.pixels = pixels
        let bpp = channels
        rows = []
        for y in 0..<height {
            let type = UInt8((y * 3 + width) % 5)
            let row = pixels[y]
            let above = y > 0 ? pixels[y - 1] : [UInt8](repeating: 0, count: row.count)
            var filtered: [UInt8] = [type]
            for i in 0..<row.count {
                let a = i >= bpp ? Int(row[i - bpp]) : 0
                let b = Int(above[i])
                let c = i >= bpp ? Int(above[i - bpp]) : 0
                let predictor: Int
                switch type {
                case 1: predictor = a
                case 2: predictor = b
                case 3: predictor = (a + b) / 2
                case 4:
                    // PNG specification §9.4, as written there.
                    let p = a + b - c
                    let (pa, pb, pc) = (abs(p - a), abs(p - b), abs(p - c))
                    predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c
                default: predictor = 0
                }
                filtered.append(UInt8(truncatingIfNeeded: Int(row[i]) - predictor))
            }
            rows.append(filtered)
        }
    }

    var data: Data { encoded() }

    /// The bitmap the decoder gives: grey repeated to RGB, grey + alpha to RGBA.
    var expectedBitmapBytes: [UInt8] {
        var out: [UInt8] = []
        for row in pixels {
            for x in 0..<width {
                let pixel = row[(x * channels)..<((x + 1) * channels)].map { $0 }
                switch channels {
                case 1: out += [pixel[0], pixel[0], pixel[0]]
                case 2: out += [pixel[0], pixel[0], pixel[0], pixel[1]]
                default: out += pixel
                }
            }
        }
        return out
    }

    func encoded() -> Data {
        let raw = rows.flatMap { $0 }
        // A raw DEFLATE stream by libdeflate, framed by hand so the header and Adler-32 can be damaged.
        var deflated = [UInt8](repeating: 0, count: raw.count + raw.count / 2 + 1024)
        let compressor = libdeflate_alloc_compressor(6)
        defer { libdeflate_free_compressor(compressor) }
        let size = raw.withUnsafeBytes { input in
            deflated.withUnsafeMutableBytes { output in
                libdeflate_deflate_compress(
                    compressor, input.baseAddress, input.count, output.baseAddress, output.count)
            }
        }
        let adler = raw.withUnsafeBytes { libdeflate_adler32(1, $0.baseAddress, $0.count) } ^ adlerXOR
        let stream = zlibHeader + deflated.prefix(size) + bigEndian(adler)
        func chunk(_ type: String, _ payload: some Collection<UInt8>) -> [UInt8] {
            let body = Array(type.utf8) + payload
            return bigEndian(UInt32(payload.count)) + body + bigEndian(crc32(body))
        }
        let ihdr = bigEndian(UInt32(width)) + bigEndian(UInt32(height)) + [8, colourType, 0, 0, 0]
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", ihdr)
        let step = chunkSize ?? stream.count
        var start = 0
        while start < stream.count {
            png += chunk("IDAT", stream[start..<min(stream.count, start + step)])
            start += step
        }
        return Data(png + chunk("IEND", []))
    }
}
