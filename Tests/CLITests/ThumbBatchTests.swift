import Foundation
import VipsCore
import VipsSynthesis
import XCTest

/// `vipsload thumb` as a batch worker, on real files: stable names, clashes,
/// atomic writes under SIGKILL, resumable runs, JSON reports.
final class ThumbBatchTests: XCTestCase {
    private func write(_ width: Int, _ height: Int, seed: Int, _ format: ImageSynthesizer.Format, to url: URL) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try ImageSynthesizer.data(width: width, height: height, seed: seed, format: format).write(to: url)
    }

    private func size(of file: URL) throws -> [Int] {
        let info = try ImageDecoder().info(.file(file.path))
        return [info.width, info.height]
    }

    /// The files below `folder` (relative paths), without the journal and temporary folder.
    private func outputs(_ folder: URL) -> [String] {
        let all = (try? FileManager.default.subpathsOfDirectory(atPath: folder.path)) ?? []
        return all.filter { path in
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(
                atPath: folder.appendingPathComponent(path).path, isDirectory: &isDirectory)
            return !isDirectory.boolValue && !path.hasPrefix(".vipsload")
        }.sorted()
    }

    private func jsonObjects(_ result: CLIHarness.Result) throws -> [[String: Any]] {
        try result.stdoutLines.map { line in
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], line)
        }
    }

    private func modified(_ url: URL) throws -> Date {
        try XCTUnwrap(FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as? Date)
    }

    func testNamesStayWhenFilesAreAddedAndAClashWritesNeitherButSuggestsATemplate() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let photos = dir.appendingPathComponent("photos")
        try write(300, 200, seed: 1, .png(), to: photos.appendingPathComponent("coffee.png"))
        try write(120, 240, seed: 2, .jpeg(), to: photos.appendingPathComponent("tea.jpg"))
        try write(100, 100, seed: 3, .jpeg(), to: photos.appendingPathComponent("trip/tea.jpg"))
        let out = dir.appendingPathComponent("out")
        let first = try CLIHarness.run(["thumb", "-s", "60", "-o", out.path, photos.path])
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertEqual(outputs(out), ["coffee.jpg", "tea.jpg", "trip/tea.jpg"], "sub-folders kept, no -2 suffixes")
        XCTAssertEqual(try size(of: out.appendingPathComponent("coffee.jpg")), [60, 40])

        // New files, one sorting first and one with the same stem as the PNG.
        try write(200, 200, seed: 4, .jpeg(), to: photos.appendingPathComponent("apple.jpg"))
        try write(200, 300, seed: 5, .gif, to: photos.appendingPathComponent("coffee.gif"))
        let second = try CLIHarness.run(["thumb", "-s", "60", "-o", out.path, photos.path])
        XCTAssertEqual(second.status, 1, "a clash fails the run: \(second.stderr)")
        let png = photos.appendingPathComponent("coffee.png").path,
            gif = photos.appendingPathComponent("coffee.gif").path
        XCTAssertTrue(second.stderr.contains("\(png): nameClash: coffee.jpg is also the name of \(gif)"), second.stderr)
        XCTAssertTrue(second.stderr.contains("\(gif): nameClash: coffee.jpg is also the name of \(png)"), second.stderr)
        XCTAssertTrue(
            second.stderr.contains(
                "2 inputs clash on 1 output name; none of them was written. Separate them with --name '%d/%s.%e'"),
            second.stderr)
        XCTAssertTrue(second.stderr.contains("1 written, 2 skipped, 2 failed"), second.stderr)
        XCTAssertEqual(
            try size(of: out.appendingPathComponent("coffee.jpg")), [60, 40], "still the PNG's thumbnail, not the GIF's"
        )
        XCTAssertEqual(outputs(out), ["apple.jpg", "coffee.jpg", "tea.jpg", "trip/tea.jpg"])

        let separated = try CLIHarness.run(["thumb", "-s", "60", "-o", out.path, "--name", "%d/%s.%e", photos.path])
        XCTAssertEqual(separated.status, 0, separated.stderr)
        XCTAssertEqual(try size(of: out.appendingPathComponent("coffee.png.jpg")), [60, 40])
        XCTAssertEqual(try size(of: out.appendingPathComponent("coffee.gif.jpg")), [40, 60])
        XCTAssertEqual(try size(of: out.appendingPathComponent("trip/tea.jpg.jpg")), [60, 60])
    }

    func testTemplatePlaceholdersAndLeadingDotsAreSanitised() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let album = dir.appendingPathComponent("album")
        try write(80, 40, seed: 6, .webp(), to: album.appendingPathComponent("2024/.beach.webp"))
        try write(40, 80, seed: 7, .jpeg(), to: dir.appendingPathComponent(".hidden.jpg"))
        let out = dir.appendingPathComponent("out")
        // Hidden files are not collected from folders, but a hidden file named on the command line is read.
        let direct = try CLIHarness.run(["thumb", "-o", out.path, dir.appendingPathComponent(".hidden.jpg").path])
        XCTAssertEqual(direct.status, 0, direct.stderr)
        XCTAssertEqual(outputs(out), ["_hidden.jpg"], "no output starts with a dot")

        let beach = album.appendingPathComponent("2024/.beach.webp").path
        let templated = try CLIHarness.run(["thumb", "-o", out.path, "-n", "%p/%s_%e_thumb_%h_100%%", beach])
        XCTAssertEqual(templated.status, 0, templated.stderr)
        let hashed = try XCTUnwrap(outputs(out).first { $0.hasPrefix("2024/") }, "\(outputs(out))")
        XCTAssertTrue(hashed.hasPrefix("2024/_beach_webp_thumb_") && hashed.hasSuffix("_100%.jpg"), hashed)
        XCTAssertEqual(
            hashed.count, "2024/_beach_webp_thumb_".count + 8 + "_100%.jpg".count, "%h is 8 hex digits: \(hashed)")
        let again = try CLIHarness.run(["thumb", "-F", "-o", out.path, "-n", "%p/%s_%e_thumb_%h_100%%", beach])
        XCTAssertEqual(again.status, 0)
        XCTAssertEqual(outputs(out).filter { $0.hasPrefix("2024/") }, [hashed], "%h is stable across runs")

        let unknown = try CLIHarness.run(["thumb", "-o", out.path, "-n", "%s_%z", beach])
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.stderr.contains("unknown placeholder '%z'"), unknown.stderr)
    }

    func testRerunSkipsUpToDateOutputsAndRedoesChangedOptionsSourcesAndForce() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let input = dir.appendingPathComponent("in")
        for index in 0..<3 {
            try write(400, 300, seed: 10 + index, .jpeg(), to: input.appendingPathComponent("p\(index).jpg"))
        }
        let out = dir.appendingPathComponent("out")
        let first = try CLIHarness.run(["thumb", "--json", "-s", "100", "-o", out.path, input.path])
        XCTAssertEqual(first.status, 0, first.stderr)
        let firstObjects = try jsonObjects(first)
        XCTAssertEqual(firstObjects.compactMap { $0["status"] as? String }, ["written", "written", "written"])
        let stamp = try modified(out.appendingPathComponent("p0.jpg"))

        let second = try CLIHarness.run(["thumb", "--json", "-s", "100", "-o", out.path, input.path])
        XCTAssertEqual(second.status, 0, second.stderr)
        let skipped = try jsonObjects(second).filter { $0["status"] as? String == "skipped" }
        XCTAssertEqual(skipped.count, 3)
        XCTAssertEqual(skipped.first?["reason"] as? String, "up to date")
        XCTAssertEqual(try modified(out.appendingPathComponent("p0.jpg")), stamp, "a skipped output is not touched")
        XCTAssertTrue(second.stderr.contains("0 written, 3 skipped, 0 failed"), second.stderr)

        let resized = try CLIHarness.run(["thumb", "-s", "50", "-o", out.path, input.path])
        XCTAssertTrue(resized.stderr.contains("3 written, 0 skipped"), "a new --size is not skipped: \(resized.stderr)")
        XCTAssertEqual(try size(of: out.appendingPathComponent("p0.jpg")), [50, 37])
        let reformatted = try CLIHarness.run(["thumb", "-s", "50", "-Q", "40", "-o", out.path, input.path])
        XCTAssertTrue(
            reformatted.stderr.contains("3 written, 0 skipped"), "a new --quality is not skipped: \(reformatted.stderr)"
        )

        // A source rewritten after its thumbnail is made again; the others are not.
        try write(300, 300, seed: 20, .jpeg(), to: input.appendingPathComponent("p1.jpg"))
        let changed = try CLIHarness.run(["thumb", "-v", "-s", "50", "-Q", "40", "-o", out.path, input.path])
        XCTAssertTrue(changed.stderr.contains("1 written, 2 skipped"), changed.stderr)
        XCTAssertTrue(
            changed.stderr.contains("\(input.appendingPathComponent("p1.jpg").path) -> p1.jpg (50x50"), changed.stderr)
        XCTAssertEqual(try size(of: out.appendingPathComponent("p1.jpg")), [50, 50])

        // An output replaced by hand is made again, and --force redoes everything.
        try Data("not a thumbnail".utf8).write(to: out.appendingPathComponent("p2.jpg"))
        let repaired = try CLIHarness.run(["thumb", "-s", "50", "-Q", "40", "-o", out.path, input.path])
        XCTAssertTrue(repaired.stderr.contains("1 written, 2 skipped"), repaired.stderr)
        XCTAssertEqual(try size(of: out.appendingPathComponent("p2.jpg")), [50, 37])
        let forced = try CLIHarness.run(["thumb", "--force", "-s", "50", "-Q", "40", "-o", out.path, input.path])
        XCTAssertTrue(forced.stderr.contains("3 written, 0 skipped"), forced.stderr)
    }

    func testAnOutputFolderInsideTheInputFolderIsNotTakenAsInput() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let library = dir.appendingPathComponent("library")
        try write(200, 100, seed: 50, .jpeg(), to: library.appendingPathComponent("a.jpg"))
        try write(100, 200, seed: 51, .png(), to: library.appendingPathComponent("b/c.png"))
        let out = library.appendingPathComponent("thumbs")
        for run in 1...2 {
            let result = try CLIHarness.run(["thumb", "-s", "50", "-o", out.path, library.path])
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertTrue(
                result.stderr.contains(run == 1 ? "2 written, 0 skipped" : "0 written, 2 skipped"), result.stderr)
        }
        XCTAssertEqual(outputs(out), ["a.jpg", "b/c.jpg"], "no thumbnails of thumbnails")
    }

    func testSIGKILLLeavesNoPartialOutputAndTheRerunCompletesWithNoTemporaryFile() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let input = dir.appendingPathComponent("in")
        let count = 16
        let image = try ImageSynthesizer.data(width: 1600, height: 1200, seed: 100, format: .png())
        try FileManager.default.createDirectory(at: input, withIntermediateDirectories: true)
        for index in 0..<count {
            try image.write(to: input.appendingPathComponent(String(format: "big%02d.png", index)))
        }
        let out = dir.appendingPathComponent("out")
        // PNG output at a large size keeps each image busy long enough to be killed mid-run.
        // Killed once -v has reported two outputs written (read from its stderr as they come).
        let process = Process()
        process.executableURL = CLIHarness.binary
        process.arguments = ["thumb", "-v", "-j", "1", "-s", "1200", "-f", "png", "-o", out.path, input.path]
        process.environment = CLIHarness.environment()
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        var reported = ""
        while reported.components(separatedBy: " -> ").count - 1 < 2 {
            let chunk = errors.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            reported += String(decoding: chunk, as: UTF8.self)
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? errors.fileHandleForReading.close()
        XCTAssertEqual(process.terminationReason, .uncaughtSignal, "killed mid-run")

        let written = outputs(out)
        XCTAssertLessThan(written.count, count, "the run was cut short")
        for name in written {
            // Strict decoding fails on any truncated file: every final name holds a whole thumbnail.
            var options = DecodeOptions()
            options.strict = true
            let bitmap = try ImageDecoder(options: options).decode(.file(out.appendingPathComponent(name).path))
            XCTAssertEqual(bitmap.width, 1200, name)
        }

        // What a kill between write and rename leaves: a temporary file of the dead process.
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, 255)
        let hostName = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            .replacingOccurrences(of: ".", with: "_")
        let temporary = out.appendingPathComponent(".vipsload-tmp")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        try Data("half a PNG".utf8).write(
            to: temporary.appendingPathComponent("\(hostName).\(process.processIdentifier).99.tmp"))

        let rerun = try CLIHarness.run(["thumb", "-j", "1", "-s", "1200", "-f", "png", "-o", out.path, input.path])
        XCTAssertEqual(rerun.status, 0, rerun.stderr)
        XCTAssertEqual(outputs(out).count, count, "the rerun finished the rest")
        XCTAssertFalse(
            rerun.stderr.contains("\(count) written"), "what the killed run finished is skipped: \(rerun.stderr)")
        let leftovers =
            (try? FileManager.default.contentsOfDirectory(atPath: out.appendingPathComponent(".vipsload-tmp").path))
            ?? []
        XCTAssertEqual(leftovers, [], "no temporary file is left after the rerun")
        XCTAssertFalse(FileManager.default.fileExists(atPath: out.appendingPathComponent(".vipsload-tmp").path))
    }

    func testJSONReportsEveryInputAndASummaryAndProgressShowsOnRequest() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let good = dir.appendingPathComponent("good.jpg")
        try write(640, 480, seed: 30, .jpeg(), to: good)
        let bad = dir.appendingPathComponent("bad.png")
        try Data("not a png".utf8).write(to: bad)
        let out = dir.appendingPathComponent("out")
        let result = try CLIHarness.run([
            "thumb", "--json", "--progress", "-s", "64", "-o", out.path, good.path, bad.path
        ])
        XCTAssertEqual(result.status, 1)
        let objects = try jsonObjects(result)
        XCTAssertEqual(objects.count, 3, result.stdout)
        let written = try XCTUnwrap(objects.first { $0["status"] as? String == "written" })
        XCTAssertEqual(written["input"] as? String, good.path)
        XCTAssertEqual(written["output"] as? String, "good.jpg")
        XCTAssertEqual(written["width"] as? Int, 64)
        XCTAssertEqual(written["height"] as? Int, 48)
        let bytes = try XCTUnwrap(written["bytes"] as? Int)
        XCTAssertEqual(
            bytes,
            try XCTUnwrap(
                FileManager.default.attributesOfItem(atPath: out.appendingPathComponent("good.jpg").path)[.size] as? Int
            ))
        XCTAssertNotNil(written["ms"] as? Double)
        let failed = try XCTUnwrap(objects.first { $0["status"] as? String == "failed" })
        XCTAssertEqual(failed["input"] as? String, bad.path)
        let error = try XCTUnwrap(failed["error"] as? [String: Any])
        XCTAssertEqual(error["kind"] as? String, "unsupportedFormat")
        XCTAssertEqual(error["message"] as? String, "not a recognised image format")
        let summary = try XCTUnwrap(objects.last?["summary"] as? [String: Any], "the summary comes last")
        XCTAssertEqual(summary["written"] as? Int, 1)
        XCTAssertEqual(summary["skipped"] as? Int, 0)
        XCTAssertEqual(summary["failed"] as? Int, 1)
        XCTAssertEqual(summary["retries"] as? Int, 0)
        XCTAssertNotNil(summary["imagesPerSecond"] as? Double)

        XCTAssertTrue(result.stderr.contains("thumb: 2/2 100%"), "--progress on a pipe: \(result.stderr)")
        XCTAssertTrue(result.stderr.contains("\(bad.path): unsupportedFormat"), result.stderr)
        let silent = try CLIHarness.run(["thumb", "-F", "-s", "64", "-o", out.path, good.path])
        XCTAssertFalse(silent.stderr.contains("thumb: 1/1"), "no progress line on a pipe by default: \(silent.stderr)")
        XCTAssertTrue(silent.stderr.hasPrefix("vipsload thumb: 1 written, 0 skipped, 0 failed"), silent.stderr)
        let quiet = try CLIHarness.run(["thumb", "-q", "-F", "-s", "64", "-o", out.path, good.path])
        XCTAssertEqual(quiet.stderr, "", "--quiet prints nothing when all is well")
        XCTAssertEqual(quiet.status, 0)
    }

    func testStandardInputToStandardOutputAndRefusedWithSeveralInputs() throws {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let image = try ImageSynthesizer.data(width: 500, height: 250, seed: 40, format: .jpeg())
        let piped = try CLIHarness.run(["thumb", "-s", "100", "-f", "png", "-o", "-", "-"], stdin: image)
        XCTAssertEqual(piped.status, 0, piped.stderr)
        let bitmap = try ImageDecoder().decode(.data(piped.stdoutData))
        XCTAssertEqual([bitmap.width, bitmap.height], [100, 50])
        XCTAssertEqual(ImageFormat.sniff(piped.stdoutData.prefix(32)), .png)

        let toFolder = try CLIHarness.run(
            ["thumb", "-s", "100", "-o", dir.appendingPathComponent("out").path, "-"], stdin: image)
        XCTAssertEqual(toFolder.status, 0, toFolder.stderr)
        XCTAssertEqual(try size(of: dir.appendingPathComponent("out/stdin.jpg")), [100, 50])

        let other = dir.appendingPathComponent("other.jpg")
        try image.write(to: other)
        let twoInputs = try CLIHarness.run(["thumb", "-o", dir.path, "-", other.path], stdin: image)
        XCTAssertEqual(twoInputs.status, 2)
        XCTAssertTrue(
            twoInputs.stderr.contains("'-' (an image on standard input) must be the only input"), twoInputs.stderr)
        let twoToStdout = try CLIHarness.run(["thumb", "-o", "-", other.path, dir.appendingPathComponent("out").path])
        XCTAssertEqual(twoToStdout.status, 2)
        XCTAssertTrue(twoToStdout.stderr.contains("--out - writes the thumbnail of a single input"), twoToStdout.stderr)
        XCTAssertEqual(twoToStdout.stdoutData.count, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "-"), "no folder named '-'")

        let empty = try CLIHarness.run(["thumb", "-o", "-", "-"])
        XCTAssertEqual(empty.status, 1)
        XCTAssertTrue(empty.stderr.contains("-: emptyInput"), empty.stderr)
    }

    func testVersionHelpForACommandAndShortOptions() throws {
        for spelling in [["--version"], ["-V"], ["version"]] {
            let result = try CLIHarness.run(spelling)
            XCTAssertEqual(result.status, 0, "\(spelling)")
            XCTAssertTrue(result.stdout.hasPrefix("vipsload "), result.stdout)
            XCTAssertTrue(result.stdout.contains("VipsLoad "), result.stdout)
            XCTAssertTrue(result.stdout.contains("libvips \(VipsRuntime.libraryVersion)"), result.stdout)
        }
        let help = try CLIHarness.run(["help", "thumb"])
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.stdout.hasPrefix("usage: vipsload thumb"), help.stdout)
        XCTAssertTrue(help.stdout.contains("Exit status: 0"), help.stdout)
        XCTAssertTrue(try CLIHarness.run(["help", "info"]).stdout.hasPrefix("usage: vipsload info"))
        XCTAssertTrue(
            try CLIHarness.run(["help"]).stdout.contains(
                "Exit status: 0 on success, 1 when any input failed, 2 on usage errors"))
        let unknown = try CLIHarness.run(["help", "thumbs"])
        XCTAssertEqual(unknown.status, 2)

        let dir = try CLIHarness.temporaryFolder(for: self)
        let image = dir.appendingPathComponent("i.jpg")
        try write(300, 100, seed: 41, .jpeg(), to: image)
        let short = try CLIHarness.run([
            "thumb", "-qs30", "-f", "webp", "-Q", "50", "-j", "1", "-o", dir.appendingPathComponent("o").path,
            image.path
        ])
        XCTAssertEqual(short.status, 0, short.stderr)
        XCTAssertEqual(short.stderr, "")
        XCTAssertEqual(try size(of: dir.appendingPathComponent("o/i.webp")), [30, 10])
        for bad in [["thumb", "-x", image.path], ["thumb", "-s"], ["thumb", "-q", "-v", image.path]] {
            let result = try CLIHarness.run(bad)
            XCTAssertEqual(result.status, 2, "\(bad): \(result.stderr)")
        }
    }
}
