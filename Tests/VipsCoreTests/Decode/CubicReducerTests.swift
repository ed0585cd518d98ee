import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// `CubicReducer.reduce` sums in floats, unrolled by tap count; these tests
/// hold it to the plain 14-bit integer arithmetic it stands for, bit for bit.
final class CubicReducerTests: XCTestCase {
    /// The reduce written the obvious way: integer sums of the fixed-point taps, rows then columns.
    func reference(_ input: [UInt8], width: Int, height: Int, outWidth: Int, outHeight: Int) -> [UInt8] {
        let horizontal = CubicReducer.taps(input: width, output: outWidth)
        let vertical = CubicReducer.taps(input: height, output: outHeight)
        let half = Int32(1) << (CubicReducer.precision - 1)
        func clamp(_ sum: Int32) -> UInt8 { UInt8(min(255, max(0, sum >> CubicReducer.precision))) }
        var intermediate = [UInt8](repeating: 0, count: outWidth * 3 * height)
        for y in 0..<height {
            for x in 0..<outWidth {
                for c in 0..<3 {
                    var sum = half
                    for k in 0..<horizontal.count {
                        let weight = horizontal.weights[x * horizontal.count + k]
                        sum += weight * Int32(input[(y * width + horizontal.start[x] + k) * 3 + c])
                    }
                    intermediate[(y * outWidth + x) * 3 + c] = clamp(sum)
                }
            }
        }
        var output = [UInt8](repeating: 0, count: outWidth * 3 * outHeight)
        for y in 0..<outHeight {
            for i in 0..<(outWidth * 3) {
                var sum = half
                for k in 0..<vertical.count {
                    sum +=
                        vertical.weights[y * vertical.count + k]
                        * Int32(intermediate[(vertical.start[y] + k) * outWidth * 3 + i])
                }
                output[y * outWidth * 3 + i] = clamp(sum)
            }
        }
        return output
    }

    func reduced(_ input: [UInt8], width: Int, height: Int, outWidth: Int, outHeight: Int) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: outWidth * 3 * outHeight)
        input.withUnsafeBufferPointer { source in
            output.withUnsafeMutableBufferPointer { target in
                guard let source = source.baseAddress, let target = target.baseAddress else { return }
                CubicReducer.reduce(
                    source, width: width, height: height, into: target, outWidth: outWidth, outHeight: outHeight)
            }
        }
        return output
    }

    func testFloatSumsAreTheIntegerArithmeticBitForBit() {
        var random = SplitMix64(seed: 15)
        // Every unrolled tap count (4–8: reductions up to 2×), the general loop beyond,
        // unchanged sides, tiny images and odd sizes.
        let cases = [
            (320, 240, 256, 192), (500, 375, 256, 192), (375, 500, 192, 256), (640, 480, 320, 240),
            (100, 80, 100, 80), (100, 80, 99, 41), (37, 23, 29, 17), (17, 9, 3, 2), (3, 2, 1, 1),
            (1, 1, 1, 1), (2, 50, 1, 12), (1000, 10, 97, 10), (260, 260, 256, 256), (301, 207, 151, 200)
        ]
        for (width, height, outWidth, outHeight) in cases {
            // Photo-like values (smooth with noise) and full-range extremes, where clamping matters.
            for pattern in 0..<2 {
                let input = (0..<(width * height * 3)).map { index -> UInt8 in
                    if pattern == 1 { return random.next() % 2 == 0 ? 0 : 255 }
                    let x = (index / 3) % width, y = index / 3 / width
                    return UInt8(truncatingIfNeeded: (x * 255 / max(1, width - 1) + y + Int(random.next() % 24)) & 0xFF)
                }
                let expected = reference(input, width: width, height: height, outWidth: outWidth, outHeight: outHeight)
                let actual = reduced(input, width: width, height: height, outWidth: outWidth, outHeight: outHeight)
                XCTAssertEqual(actual, expected, "\(width)×\(height) → \(outWidth)×\(outHeight), pattern \(pattern)")
            }
        }
    }

    func testFlatImagesStayFlat() {
        for value: UInt8 in [0, 1, 127, 128, 254, 255] {
            let input = [UInt8](repeating: value, count: 77 * 51 * 3)
            XCTAssertEqual(Set(reduced(input, width: 77, height: 51, outWidth: 40, outHeight: 30)), [value])
        }
    }
}
