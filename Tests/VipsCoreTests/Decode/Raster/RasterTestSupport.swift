import Foundation
import VipsCore
import VipsSynthesis
import XCTest

/// Shared checks of the BMP, ICO and TGA decoder tests.
enum RasterAssert {
    /// Asserts that `bitmap` holds `expected` (RGBA; a 3-channel bitmap is compared opaque), exactly.
    static func equal(
        _ bitmap: Bitmap, _ expected: LegacyFormatWriter.Pixels, _ what: String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(bitmap.width, expected.width, what, file: file, line: line)
        XCTAssertEqual(bitmap.height, expected.height, what, file: file, line: line)
        guard bitmap.width == expected.width, bitmap.height == expected.height else { return }
        var mismatches = 0
        var first = ""
        for y in 0..<expected.height {
            for x in 0..<expected.width {
                var got = bitmap.pixel(x: x, y: y) ?? []
                if got.count == 3 { got.append(255) }
                let want = expected.pixel(x, y)
                if got != want {
                    if mismatches == 0 { first = "(\(x), \(y)): \(got) != \(want)" }
                    mismatches += 1
                }
            }
        }
        XCTAssertEqual(mismatches, 0, "\(what): \(mismatches) pixels differ, first \(first)", file: file, line: line)
    }
}
