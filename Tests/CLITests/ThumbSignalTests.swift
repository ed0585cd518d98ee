import Foundation
import TestSupport
import VipsCore
import VipsSynthesis
import XCTest

/// `vipsload thumb` leaves no temporary file behind (issue 13, item 1): not
/// when SIGINT or SIGTERM stop it mid-download, not after a SIGKILL once the
/// next run has started, and not at a normal exit on one busy core. Real
/// child processes, real signals, the real server on 127.0.0.1.
final class ThumbSignalTests: XCTestCase {
    private var server: TestHTTPServer!

    override func setUpWithError() throws {
        server = try TestHTTPServer()
    }

    override func tearDown() {
        server?.stop()
        server = nil
    }

    /// A `vipsload` child process with its own `TMPDIR`, its stderr collected.
    private final class Child: @unchecked Sendable {
        let process = Process()
        private let errors = Pipe()
        private let collected = DispatchGroup()
        private var stderrData = Data()

        init(_ arguments: [String], temporaryFolder: URL, onOneCore: Bool = false) throws {
            if onOneCore {
                process.executableURL = URL(fileURLWithPath: "/usr/bin/taskset")
                process.arguments = ["-c", "0", CLIHarness.binary.path] + arguments
            } else {
                process.executableURL = CLIHarness.binary
                process.arguments = arguments
            }
            var environment = ProcessInfo.processInfo.environment
            environment["TMPDIR"] = temporaryFolder.path
            process.environment = environment
            process.standardOutput = FileHandle.nullDevice
            process.standardError = errors
            process.standardInput = FileHandle.nullDevice
            try process.run()
            collected.enter()
            DispatchQueue.global().async { [self] in
                stderrData = errors.fileHandleForReading.readDataToEndOfFile()
                collected.leave()
            }
        }

        /// Waits for the exit: how it ended, its status, and its stderr.
        func wait() -> (reason: Process.TerminationReason, status: Int32, stderr: String) {
            process.waitUntilExit()
            collected.wait()
            return (process.terminationReason, process.terminationStatus, String(decoding: stderrData, as: UTF8.self))
        }
    }

    /// Every regular file below `folder` (relative paths), and every private download folder.
    private func leftovers(below folder: URL) -> [String] {
        var found: [String] = []
        let enumerator = FileManager.default.enumerator(atPath: folder.path)
        while let relative = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            guard
                FileManager.default.fileExists(
                    atPath: folder.appendingPathComponent(relative).path, isDirectory: &isDirectory)
            else {
                continue
            }
            // The shared `vipsload-downloads` folder itself may stay; nothing in it may.
            if !isDirectory.boolValue || relative.hasPrefix("vipsload-downloads/") { found.append(relative) }
        }
        return found.sorted()
    }

    /// The partial downloads in the child's private folder that have bytes in them.
    private func partialDownloads(in temporaryFolder: URL) -> [String] {
        leftovers(below: temporaryFolder).filter { path in
            guard path.contains("/download-") else { return false }
            let size =
                (try? FileManager.default.attributesOfItem(atPath: temporaryFolder.appendingPathComponent(path).path)[
                    .size]) as? Int
            return (size ?? 0) > 0
        }
    }

    private func jpeg(_ size: Int, seed: Int) throws -> Data {
        try ImageSynthesizer.data(width: size, height: size, seed: seed, format: .jpeg(quality: 85))
    }

    /// Routes `/quick.jpg` (sent at once) and `/stalled.jpg` (one chunk, then a minute's pause).
    private func routeQuickAndStalled() throws {
        server.route("/quick.jpg", .ok(try jpeg(64, seed: 1)))
        server.route(
            "/stalled.jpg",
            TestHTTPServer.Response(
                headers: [("Content-Type", "image/jpeg")], body: .data(try jpeg(512, seed: 2)),
                chunkSize: 4096, chunkDelay: 60))
    }

    /// Starts `thumb` on both URLs and waits until the quick one is written and
    /// the stalled one is a partial file.
    private func startMidDownload(out: URL, temporaryFolder: URL) throws -> Child {
        let child = try Child(
            [
                "thumb", "--size", "32", "--out", out.path, server.url("/quick.jpg").absoluteString,
                server.url("/stalled.jpg").absoluteString
            ], temporaryFolder: temporaryFolder)
        let midDownload = server.wait(timeout: 60) { [self] _ in
            FileManager.default.fileExists(atPath: out.appendingPathComponent("quick.jpg").path)
                && !partialDownloads(in: temporaryFolder).isEmpty
        }
        if !midDownload {
            child.process.terminate()
            XCTFail("never mid-download: \(child.wait().stderr)")
        }
        return child
    }

    func testSIGINTAndSIGTERMMidDownloadExit130And143KeepOutputsAndLeaveNoFile() throws {
        try routeQuickAndStalled()
        for (number, expected) in [(SIGINT, Int32(130)), (SIGTERM, Int32(143))] {
            let folder = try CLIHarness.temporaryFolder(for: self)
            let temporary = folder.appendingPathComponent("tmp")
            let out = folder.appendingPathComponent("out")
            try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
            let child = try startMidDownload(out: out, temporaryFolder: temporary)
            let closesBefore = server.clientCloseCount("/stalled.jpg")

            kill(child.process.processIdentifier, number)
            let result = child.wait()
            XCTAssertEqual(result.reason, .exit, "signal \(number): exits, is not killed: \(result.stderr)")
            XCTAssertEqual(result.status, expected, "signal \(number): \(result.stderr)")
            XCTAssertEqual(leftovers(below: temporary), [], "signal \(number): no temporary file is left")
            // The run's journal stays too: it records the output, so a rerun skips it.
            XCTAssertEqual(
                leftovers(below: out).filter { $0 != ".vipsload-journal" }, ["quick.jpg"],
                "signal \(number): the output already written stays, nothing else")
            XCTAssertEqual(try ImageDecoder().info(.file(out.appendingPathComponent("quick.jpg").path)).width, 32)
            XCTAssertTrue(
                server.wait(timeout: 30) { $0.clientCloseCount("/stalled.jpg") > closesBefore },
                "signal \(number): the stalled download was cancelled")
        }
    }

    func testAFolderLeftByASIGKILLIsSweptByTheNextRun() throws {
        try routeQuickAndStalled()
        let folder = try CLIHarness.temporaryFolder(for: self)
        let temporary = folder.appendingPathComponent("tmp")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        let child = try startMidDownload(out: folder.appendingPathComponent("out"), temporaryFolder: temporary)
        kill(child.process.processIdentifier, SIGKILL)
        let killed = child.wait()
        XCTAssertEqual(killed.reason, .uncaughtSignal)
        XCTAssertFalse(partialDownloads(in: temporary).isEmpty, "a SIGKILL leaves the partial download")

        let next = try Child(
            [
                "thumb", "--size", "32", "--out", folder.appendingPathComponent("next").path,
                server.url("/quick.jpg").absoluteString
            ], temporaryFolder: temporary)
        let result = next.wait()
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(leftovers(below: temporary), [], "the next run swept the dead process's folder")
    }

    func testManySmallDownloadsOnOneCoreLeaveNoFileAtANormalExit() throws {
        let count = 12
        for index in 0..<count { server.route("/small-\(index).jpg", .ok(try jpeg(48 + index, seed: 10 + index))) }
        let folder = try CLIHarness.temporaryFolder(for: self)
        let temporary = folder.appendingPathComponent("tmp")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        for round in 0..<3 {
            // Three processes at once on one core, as in the reproduction.
            let children = try (0..<3).map { process in
                try Child(
                    ["thumb", "--size", "16", "--out", folder.appendingPathComponent("out-\(round)-\(process)").path]
                        + (0..<count).map { server.url("/small-\($0).jpg").absoluteString },
                    temporaryFolder: temporary, onOneCore: true)
            }
            for child in children {
                let result = child.wait()
                XCTAssertEqual(result.status, 0, result.stderr)
                XCTAssertTrue(
                    result.stderr.contains("\(count) written,") && result.stderr.contains(" 0 failed"), result.stderr)
            }
            XCTAssertEqual(leftovers(below: temporary), [], "round \(round): no download is left")
        }
        XCTAssertEqual(server.totalRequestCount, 3 * 3 * count)
    }
}
