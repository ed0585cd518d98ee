import Foundation
@_spi(Testing) import VipsCore
import XCTest

final class ThumbCommandTests: XCTestCase {
    func testFoldersRecursedFailuresReportedOthersWritten() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let input = dir.appendingPathComponent("in")
        let nested = input.appendingPathComponent("nested")
        try FileManager.default.createDirectory(at: nested, withIntermediateDirectories: true)
        try ImageSynthesizer.data(width: 800, height: 600, format: .jpeg()).write(
            to: input.appendingPathComponent("wide.jpg"))
        try ImageSynthesizer.data(width: 300, height: 900, alpha: true, format: .png()).write(
            to: nested.appendingPathComponent("tall.png"))
        try ImageSynthesizer.data(width: 100, height: 80, format: .webp()).write(
            to: nested.appendingPathComponent("small.webp"))
        try Data("README".utf8).write(to: input.appendingPathComponent("README.txt"))
        let random = dir.appendingPathComponent("random.jpg")
        var generator = SystemRandomNumberGenerator()
        try Data((0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) }).write(to: random)

        let out = dir.appendingPathComponent("thumbs")
        let result = try CLIHarness.run([
            "thumb", "--size", "128", "--format", "png", "--out", out.path, input.path, random.path
        ])
        XCTAssertEqual(result.status, 1, "the random-bytes input fails")
        XCTAssertTrue(result.stderr.contains(random.path) && result.stderr.contains("unsupportedFormat"), result.stderr)

        let decoder = ImageDecoder()
        let wide = try decoder.info(.file(out.appendingPathComponent("wide.png").path))
        XCTAssertEqual([wide.width, wide.height], [128, 96])
        let tall = try decoder.info(.file(out.appendingPathComponent("nested/tall.png").path))
        XCTAssertEqual([tall.width, tall.height], [43, 128])
        XCTAssertTrue(tall.hasAlpha, "alpha kept in PNG output")
        let small = try decoder.info(.file(out.appendingPathComponent("nested/small.png").path))
        XCTAssertEqual([small.width, small.height], [100, 80], "never upscaled")
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: out.appendingPathComponent("README.png").path),
            "non-image files found in folders are skipped")
    }

    func testSymlinkedFilesAreReadAndSymlinkedFoldersNotFollowed() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let store = dir.appendingPathComponent("store")
        let input = dir.appendingPathComponent("in")
        try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: input, withIntermediateDirectories: true)
        let photo = store.appendingPathComponent("photo.jpg")
        try ImageSynthesizer.data(width: 400, height: 300, format: .jpeg()).write(to: photo)
        try FileManager.default.createSymbolicLink(
            at: input.appendingPathComponent("linked.jpg"), withDestinationURL: photo)
        try FileManager.default.createSymbolicLink(
            at: input.appendingPathComponent("dangling.jpg"),
            withDestinationURL: store.appendingPathComponent("missing.jpg"))
        try FileManager.default.createSymbolicLink(at: input.appendingPathComponent("loop"), withDestinationURL: input)
        try FileManager.default.createSymbolicLink(at: input.appendingPathComponent("store"), withDestinationURL: store)

        let out = dir.appendingPathComponent("thumbs")
        let result = try CLIHarness.run(["thumb", "--size", "64", "--out", out.path, input.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        let written = try FileManager.default.subpathsOfDirectory(atPath: out.path).filter {
            !$0.hasPrefix(".vipsload")
        }.sorted()
        XCTAssertEqual(written, ["linked.jpg"], "the linked file once; no loop, no followed folder, no dangling link")

        // A folder argument that is itself a symlink is walked (it found nothing before).
        let linkedFolder = try CLIHarness.run([
            "thumb", "--size", "64", "--out", out.path, input.appendingPathComponent("store").path
        ])
        XCTAssertEqual(linkedFolder.status, 0, linkedFolder.stderr)
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: out.appendingPathComponent("photo.jpg").path), linkedFolder.stderr)
    }

    /// Without `--out`, `./thumbnails` is made only when a thumbnail is written.
    func testNoOutputFolderIsMadeWhenEveryInputFails() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        try Data("not an image".utf8).write(to: dir.appendingPathComponent("bad.jpg"))
        let failed = try CLIHarness.run(["thumb", "bad.jpg", "missing.png"], currentDirectory: dir)
        XCTAssertEqual(failed.status, 1, failed.stderr)
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: dir.appendingPathComponent("thumbnails").path),
            "every input failed: no output folder")
        let named = dir.appendingPathComponent("named/out")
        XCTAssertEqual(try CLIHarness.run(["thumb", "-o", named.path, "bad.jpg"], currentDirectory: dir).status, 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appendingPathComponent("named").path))

        try ImageSynthesizer.data(width: 80, height: 60, format: .jpeg()).write(
            to: dir.appendingPathComponent("ok.jpg"))
        let written = try CLIHarness.run(["thumb", "bad.jpg", "ok.jpg"], currentDirectory: dir)
        XCTAssertEqual(written.status, 1)
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: dir.appendingPathComponent("thumbnails/ok.jpg").path), written.stderr
        )

        // An output path that exists and is not a folder is still refused before any work.
        let file = dir.appendingPathComponent("file")
        try Data("x".utf8).write(to: file)
        let refused = try CLIHarness.run(["thumb", "-o", file.path, "ok.jpg"], currentDirectory: dir)
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.contains("not a folder"), refused.stderr)
    }
}
