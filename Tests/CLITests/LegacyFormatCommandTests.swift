import Foundation
import TestSupport
import VipsCore
import VipsSynthesis
import XCTest

/// `vipsload info` and `thumb` on BMP, ICO, CUR and TGA files, which VipsCore decodes itself.
final class LegacyFormatCommandTests: XCTestCase {
    func testInfoAndThumbOfEachFormatInAFolder() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let photo = try LegacyFormatWriter.Pixels.generated(width: 300, height: 200, alpha: true)
        let icon = try LegacyFormatWriter.Pixels.generated(width: 48, height: 48, alpha: true)
        let small = try LegacyFormatWriter.Pixels.generated(width: 16, height: 16, seed: 3, alpha: true)
        let inputs = dir.appendingPathComponent("in")
        try FileManager.default.createDirectory(at: inputs, withIntermediateDirectories: true)
        try LegacyFormatWriter.bmp(photo, layout: .twentyFour).data.write(
            to: inputs.appendingPathComponent("photo.bmp"))
        try LegacyFormatWriter.ico([.init(small, layout: .palette(bits: 8)), .init(icon, png: true)]).data
            .write(to: inputs.appendingPathComponent("favicon.ico"))
        try LegacyFormatWriter.ico([.init(small, layout: .palette(bits: 1))], cursor: true).data
            .write(to: inputs.appendingPathComponent("pointer.cur"))
        try LegacyFormatWriter.tga(photo, layout: .trueColour(bits: 32), rle: true).data
            .write(to: inputs.appendingPathComponent("render.tga"))

        let info = try CLIHarness.run(["info", "--json", inputs.path])
        XCTAssertEqual(info.status, 0, info.stderr)
        let objects = try info.stdoutLines.map {
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        let byName = Dictionary(
            uniqueKeysWithValues: objects.map {
                (URL(fileURLWithPath: $0["input"] as? String ?? "").lastPathComponent, $0)
            })
        XCTAssertEqual(byName["photo.bmp"]?["format"] as? String, "bmp")
        XCTAssertEqual(byName["photo.bmp"]?["width"] as? Int, 300)
        XCTAssertEqual(byName["favicon.ico"]?["format"] as? String, "ico")
        XCTAssertEqual(byName["favicon.ico"]?["width"] as? Int, 48, "the largest entry")
        XCTAssertEqual(byName["pointer.cur"]?["format"] as? String, "cur")
        XCTAssertEqual(byName["render.tga"]?["format"] as? String, "tga")
        XCTAssertEqual(byName["render.tga"]?["hasAlpha"] as? Bool, true)

        let out = dir.appendingPathComponent("out")
        let thumb = try CLIHarness.run(["thumb", "-q", "-s", "32", "-f", "png", "-o", out.path, inputs.path])
        XCTAssertEqual(thumb.status, 0, thumb.stderr)
        for name in ["photo", "favicon", "pointer", "render"] {
            let written = out.appendingPathComponent("\(name).png")
            let bitmap = try ImageDecoder().decode(.file(written.path))
            XCTAssertEqual(max(bitmap.width, bitmap.height), name == "pointer" ? 16 : 32, name)
        }
    }
}
