import Foundation
import VipsBench
import VipsCore
import XCTest

/// The fuzzer's seed corpus (`vipsload corpus --fuzz-seeds DIR`, scripts/fuzz.sh).
final class FuzzSeedCorpusTests: XCTestCase {
    func testSeedsAreSmallRealImagesOfEveryFormatAndTheSameEveryRun() throws {
        let folders = (0..<2).map { _ in
            FileManager.default.temporaryDirectory.appendingPathComponent("fuzz-seeds-\(UUID().uuidString)")
        }
        defer { for folder in folders { try? FileManager.default.removeItem(at: folder) } }
        let counts = try folders.map { try FuzzSeedCorpus.write(to: $0) }
        XCTAssertEqual(counts[0], counts[1])
        let names = try FileManager.default.contentsOfDirectory(atPath: folders[0].path).sorted()
        XCTAssertEqual(names.count, counts[0])
        var formats: Set<ImageFormat> = []
        for name in names {
            let data = try Data(contentsOf: folders[0].appendingPathComponent(name))
            // Within the fuzzer's -max_len (scripts/fuzz.sh), and deterministic.
            XCTAssertLessThanOrEqual(data.count, 65_536, name)
            XCTAssertEqual(data, try Data(contentsOf: folders[1].appendingPathComponent(name)), name)
            let format = try XCTUnwrap(ImageFormat.sniff(data), name)
            formats.insert(format)
            guard ImageFormat.defaultAllowed.contains(format) else { continue }
            let info = try ImageDecoder().info(.data(data))
            XCTAssertEqual(info.format, format, name)
        }
        XCTAssertEqual(formats, [.jpeg, .png, .webp, .gif, .tiff, .svg, .ppm, .bmp, .ico, .cur, .tga])
    }
}
