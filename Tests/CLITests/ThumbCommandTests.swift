import Foundation
import VipsCore
import VipsSynthesis
import XCTest

final class ThumbCommandTests: XCTestCase {
    /// libvips is opened by the first image that needs it, not at start-up:
    /// JPEG thumbnails (the default output) of JPEGs, PNGs and WebPs never load it; an
    /// AVIF output (libvips' HEIF saver) does. Seen by the dynamic linker
    /// itself (`LD_DEBUG=files` lists every library it loads, on stderr).
    func testJPEGThumbnailsOfJPEGPNGAndWebPNeverLoadLibvipsAndAnAVIFOutputDoes() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let inputs = [
            ("photo.jpg", ImageSynthesizer.Format.jpeg()), ("alpha.png", .png()), ("lossy.webp", .webp())
        ]
        for (name, format) in inputs {
            try ImageSynthesizer.data(width: 600, height: 400, alpha: name == "alpha.png", format: format)
                .write(to: dir.appendingPathComponent(name))
        }
        let out = dir.appendingPathComponent("thumbs")
        let direct = try CLIHarness.run(
            ["thumb", "--size", "64", "--out", out.path] + inputs.map { dir.appendingPathComponent($0.0).path },
            environment: ["LD_DEBUG": "files"])
        XCTAssertEqual(direct.status, 0, direct.stderr)
        XCTAssertTrue(
            direct.stderr.contains("file=libturbojpeg.so"), "the loader's list is there: \(direct.stderr.prefix(500))")
        XCTAssertFalse(direct.stderr.contains("libvips.so"), "libvips was loaded")
        for name in ["photo.jpg", "alpha.jpg", "lossy.jpg"] {
            let info = try ImageDecoder().info(.file(out.appendingPathComponent(name).path))
            XCTAssertEqual(max(info.width, info.height), 64, name)
        }

        let avif = try CLIHarness.run(
            [
                "thumb", "--size", "64", "--format", "avif", "--out", out.path,
                dir.appendingPathComponent("photo.jpg").path
            ],
            environment: ["LD_DEBUG": "files"])
        XCTAssertEqual(avif.status, 0, avif.stderr)
        let opened = avif.stderr.split(separator: "\n").filter { $0.contains("file=libvips.so") }
        XCTAssertTrue(opened.contains { $0.contains("dynamically loaded") }, "libvips opened at run time: \(opened)")
        let info = try ImageDecoder().info(.file(out.appendingPathComponent("photo.avif").path))
        XCTAssertEqual(info.format, .avif)
    }

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

    /// A folder `relative` below `dir` holding `files` (name: contents).
    @discardableResult
    private func folder(_ relative: String, in dir: URL, holding files: [String: Data]) throws -> URL {
        let folder = dir.appendingPathComponent(relative)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for (name, contents) in files { try contents.write(to: folder.appendingPathComponent(name)) }
        return folder
    }

    /// In a folder, the name says what is meant to be an image: a file named
    /// like one that is not one (empty, an HTML page) fails and is named on
    /// stderr; a file with another extension is skipped, and `-v` says so.
    func testFilesInAFolderNamedLikeImagesThatAreNotOnesFailAndOthersAreSkippedOutLoud() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let input = try folder(
            "in", in: dir,
            holding: [
                "good.jpg": try ImageSynthesizer.data(width: 120, height: 90, format: .jpeg()), "empty.jpg": Data(),
                "page.jpg": Data("<!DOCTYPE html><html><body>Not found</body></html>\n".utf8),
                "notes.txt": Data("some notes\n".utf8)
            ])
        let out = dir.appendingPathComponent("out")

        let result = try CLIHarness.run(["thumb", "-s", "60", "-o", out.path, input.path])
        XCTAssertEqual(result.status, 1, "a file named like an image that is not one is a failure: \(result.stderr)")
        let empty = input.appendingPathComponent("empty.jpg").path
        let page = input.appendingPathComponent("page.jpg").path
        XCTAssertTrue(result.stderr.contains("vipsload thumb: \(empty): emptyInput"), result.stderr)
        XCTAssertTrue(result.stderr.contains("vipsload thumb: \(page): unsupportedFormat"), result.stderr)
        XCTAssertTrue(result.stderr.contains("1 written, 0 skipped, 2 failed"), result.stderr)
        XCTAssertFalse(result.stderr.contains("notes.txt"), "without -v a skipped file is not mentioned")

        let verbose = try CLIHarness.run(["thumb", "-v", "--force", "-s", "60", "-o", out.path, input.path])
        XCTAssertEqual(verbose.status, 1)
        XCTAssertTrue(
            verbose.stderr.contains("vipsload thumb: \(input.appendingPathComponent("notes.txt").path): skipped: "),
            "-v names the file it skipped: \(verbose.stderr)")
        XCTAssertTrue(
            verbose.stderr.contains("1 written, 0 skipped, 2 failed"), "not counted as an input: \(verbose.stderr)")
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

    /// Files found under a relative folder argument are reported relative, as
    /// the folder was given, by `thumb` and `info` alike.
    func testFilesFoundUnderARelativeFolderAreReportedByRelativePath() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        try folder(
            "photos/trip", in: dir,
            holding: [
                "a.jpg": try ImageSynthesizer.data(width: 100, height: 50, format: .jpeg()),
                "b.png": Data("<html></html>".utf8)
            ])

        let thumb = try CLIHarness.run(["thumb", "--json", "-s", "20", "-o", "out", "photos/"], currentDirectory: dir)
        XCTAssertEqual(thumb.status, 1, thumb.stderr)
        let inputs = thumb.stdoutLines.compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["input"] as? String
        }
        XCTAssertEqual(inputs.sorted(), ["photos/trip/a.jpg", "photos/trip/b.png"], thumb.stdout)
        XCTAssertTrue(thumb.stderr.contains("vipsload thumb: photos/trip/b.png: unsupportedFormat"), thumb.stderr)
        XCTAssertFalse(thumb.stderr.contains(dir.path), "no absolute path: \(thumb.stderr)")

        let info = try CLIHarness.run(["info", "./photos"], currentDirectory: dir)
        XCTAssertEqual(info.status, 1)
        XCTAssertTrue(info.stdout.hasPrefix("./photos/trip/a.jpg: 100x50 jpeg"), info.stdout)
        XCTAssertTrue(info.stderr.hasPrefix("vipsload info: ./photos/trip/b.png: unsupportedFormat"), info.stderr)
    }
}
