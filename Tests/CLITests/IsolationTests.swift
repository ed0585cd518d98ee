import Foundation
import TestSupport
import VipsCore
import VipsSynthesis
import XCTest

/// Isolated decodes (issue 16): `thumb` and `info` decode in worker processes,
/// so a worker that crashes, hangs or balloons fails only its input and the
/// batch goes on. The faults are real: with the test-only
/// `VIPSLOAD_WORKER_TEST_FAULTS=1`, a worker given an input named
/// `…__crash-SIGSEGV__…` raises that signal, `…__hang__…` spins, and
/// `…__balloon__…` allocates until its memory cap stops it.
final class IsolationTests: XCTestCase {
    private let faults = ["VIPSLOAD_WORKER_TEST_FAULTS": "1"]

    private func writePNG(_ name: String, in folder: URL, seed: Int = 1) throws -> String {
        let url = folder.appendingPathComponent(name)
        try ImageSynthesizer.data(width: 200, height: 100, seed: seed, format: .png()).write(to: url)
        return url.path
    }

    private func error(_ object: [String: Any]?) -> (kind: String, message: String)? {
        guard let error = object?["error"] as? [String: Any] else { return nil }
        return (error["kind"] as? String ?? "", error["message"] as? String ?? "")
    }

    func testWorkersKilledBySIGSEGVSIGABRTAndSIGKILLFailOnlyTheirInputsAndTheRestAreWritten() throws {
        let folder = try CLIHarness.temporaryFolder(for: self)
        let names = [
            "a.png", "b__crash-SIGSEGV__.png", "c.png", "d__crash-SIGABRT__.png", "e__crash-SIGKILL__.png", "f.png"
        ]
        let paths = try names.enumerated().map { try writePNG($0.element, in: folder, seed: $0.offset + 1) }
        let out = folder.appendingPathComponent("out")
        // One worker: every crash must be followed by a fresh worker for the next input.
        let result = try CLIHarness.run(
            ["thumb", "--isolate", "all", "-j", "1", "-s", "50", "--json", "-o", out.path] + paths,
            environment: faults)
        XCTAssertEqual(result.status, 1, result.stderr)
        let (inputs, summary) = try result.jsonReport()
        for (path, signal) in [(paths[1], "SIGSEGV"), (paths[3], "SIGABRT"), (paths[4], "SIGKILL")] {
            let failure = error(inputs[path])
            XCTAssertEqual(failure?.kind, "crashed", "\(path): \(result.stdout)")
            XCTAssertTrue(
                failure?.message.contains("killed by \(signal)") ?? false, "\(path): \(failure?.message ?? "")")
        }
        for index in [0, 2, 5] {
            XCTAssertEqual(inputs[paths[index]]?["status"] as? String, "written", result.stdout)
        }
        XCTAssertEqual(summary["written"] as? Int, 3)
        XCTAssertEqual(summary["failed"] as? Int, 3)

        // The isolated thumbnail is the one the pipeline makes in-process.
        let inProcess = folder.appendingPathComponent("in-process")
        let plain = try CLIHarness.run(
            ["thumb", "--isolate", "none", "-s", "50", "-o", inProcess.path, paths[0], paths[2]],
            environment: faults)
        XCTAssertEqual(plain.status, 0, plain.stderr)
        for name in ["a.jpg", "c.jpg"] {
            let isolated = try ImageDecoder().decode(.file(out.appendingPathComponent(name).path))
            let direct = try ImageDecoder().decode(.file(inProcess.appendingPathComponent(name).path))
            XCTAssertEqual([isolated.width, isolated.height], [50, 25])
            XCTAssertEqual(isolated.pixelData, direct.pixelData, name)
        }
    }

    /// `--isolate all` takes URLs too: each is downloaded by the parent
    /// (through the pipeline: disk cache, retries, one connection pool) and
    /// its bytes decoded in a worker, so a download that crashes or hangs its
    /// decoder, or is hostile, fails alone and the batch goes on.
    func testDownloadsThatCrashOrHangTheirWorkerFailAloneAndTheBatchGoesOn() throws {
        let folder = try CLIHarness.temporaryFolder(for: self)
        let server = try TestHTTPServer()
        defer { server.stop() }
        let names = ["a.png", "b__crash-SIGSEGV__.png", "c__hang__.png", "d.png", "e__crash-SIGABRT__.png", "f.png"]
        for (index, name) in names.enumerated() {
            server.route(
                "/\(name)",
                .ok(
                    try ImageSynthesizer.data(width: 200, height: 100, seed: index + 1, format: .png()),
                    contentType: "image/png"))
        }
        // Hostile without any fault: a PNG signature and header, then junk.
        let valid = try ImageSynthesizer.data(width: 200, height: 100, seed: 9, format: .png())
        server.route(
            "/hostile.png", .ok(valid.prefix(40) + Data(repeating: 0xA5, count: 4000), contentType: "image/png"))
        let urls = (names + ["hostile.png"]).map { server.url("/\($0)").absoluteString }
        let out = folder.appendingPathComponent("out")
        let result = try CLIHarness.run(
            ["thumb", "--isolate", "all", "-j", "1", "--timeout", "2", "-s", "50", "--json", "-o", out.path] + urls,
            environment: faults)
        XCTAssertEqual(result.status, 1, result.stderr)
        let (inputs, summary) = try result.jsonReport()
        XCTAssertEqual(error(inputs[urls[1]])?.kind, "crashed", result.stdout)
        XCTAssertTrue(error(inputs[urls[1]])?.message.contains("killed by SIGSEGV") ?? false, result.stdout)
        XCTAssertEqual(error(inputs[urls[4]])?.kind, "crashed", result.stdout)
        XCTAssertEqual(error(inputs[urls[2]])?.kind, "timedOut", result.stdout)
        let hostile = try XCTUnwrap(error(inputs[urls[6]]), result.stdout)
        XCTAssertNotEqual(hostile.kind, "crashed", "the junk is refused by the decoder, in its worker")
        XCTAssertTrue(
            result.stderr.contains("vipsload thumb: \(urls[6]): \(hostile.kind): \(hostile.message)"),
            "named by its URL, never its downloaded file: \(result.stderr)")
        XCTAssertEqual(summary["written"] as? Int, 3, result.stdout)
        XCTAssertEqual(summary["decoded"] as? Int, 7, "every download was decoded, in a worker")

        // The isolated thumbnails are the ones made in-process from the same URLs.
        let inProcess = folder.appendingPathComponent("in-process")
        let kept = [urls[0], urls[3], urls[5]]
        let plain = try CLIHarness.run(["thumb", "--isolate", "none", "-s", "50", "-o", inProcess.path] + kept)
        XCTAssertEqual(plain.status, 0, plain.stderr)
        for name in ["a.jpg", "d.jpg", "f.jpg"] {
            XCTAssertEqual(
                try Data(contentsOf: out.appendingPathComponent(name)),
                try Data(contentsOf: inProcess.appendingPathComponent(name)), name)
        }
    }

    /// Every worker message carries the protocol's version: a worker sent
    /// one of another version (here an unversioned one, as before version 2)
    /// answers with a typed error instead of guessing, and stays up.
    func testAWorkerRefusesARequestOfAnotherProtocolVersion() throws {
        let folder = try CLIHarness.temporaryFolder(for: self)
        let png = try writePNG("a.png", in: folder)
        let worker = Process()
        worker.executableURL = CLIHarness.binary
        worker.arguments = ["__decode-worker", "--size", "50"]
        let requests = Pipe(), replies = Pipe()
        worker.standardInput = requests
        worker.standardOutput = replies
        worker.standardError = FileHandle.nullDevice
        try worker.run()
        defer {
            try? requests.fileHandleForWriting.close()
            worker.waitUntilExit()
        }
        func frame(_ header: String) -> Data {
            var bytes = Data()
            withUnsafeBytes(of: UInt32(header.utf8.count).littleEndian) { bytes.append(contentsOf: $0) }
            bytes.append(Data(header.utf8))
            withUnsafeBytes(of: UInt64(0).littleEndian) { bytes.append(contentsOf: $0) }
            return bytes
        }
        /// The next reply's header (its body read and dropped).
        func reply() throws -> [String: Any] {
            let reader = replies.fileHandleForReading
            func integer(_ size: Int) throws -> Int {
                let bytes = reader.readData(ofLength: size)
                guard bytes.count == size else { throw CocoaError(.fileReadCorruptFile) }
                return bytes.reversed().reduce(0) { $0 << 8 | Int($1) }
            }
            let header = reader.readData(ofLength: try integer(4))
            _ = reader.readData(ofLength: try integer(8))
            return try XCTUnwrap(JSONSerialization.jsonObject(with: header) as? [String: Any])
        }
        let path = try XCTUnwrap(String(data: try JSONEncoder().encode(png), encoding: .utf8))
        try requests.fileHandleForWriting.write(contentsOf: frame(#"{"operation":"thumb","path":\#(path)}"#))
        let refused = try reply()
        XCTAssertEqual(refused["errorKind"] as? String, "internal", "\(refused)")
        XCTAssertTrue(
            (refused["errorMessage"] as? String ?? "").contains("worker protocol 1, not 2"), "\(refused)")
        XCTAssertEqual(refused["version"] as? Int, 2, "the worker says its own version")

        try requests.fileHandleForWriting.write(
            contentsOf: frame(#"{"version":2,"operation":"thumb","path":\#(path)}"#))
        let decoded = try reply()
        XCTAssertNil(decoded["errorKind"], "\(decoded)")
        XCTAssertEqual(decoded["width"] as? Int, 50, "\(decoded)")
    }

    func testAHangingWorkerHitsTheTimeLimitAndIsReplaced() throws {
        let folder = try CLIHarness.temporaryFolder(for: self)
        let hang = try writePNG("a__hang__.png", in: folder)
        let next = try writePNG("b.png", in: folder, seed: 2)
        let out = folder.appendingPathComponent("out")
        let result = try CLIHarness.run(
            ["thumb", "--isolate", "all", "-j", "1", "--timeout", "2", "--json", "-o", out.path, hang, next],
            environment: faults)
        XCTAssertEqual(result.status, 1, result.stderr)
        let (inputs, _) = try result.jsonReport()
        XCTAssertEqual(error(inputs[hang])?.kind, "timedOut", result.stdout)
        XCTAssertTrue(error(inputs[hang])?.message.contains("longer than 2 s") ?? false, result.stdout)
        XCTAssertEqual(
            inputs[next]?["status"] as? String, "written",
            "the replacement worker decoded the next input: \(result.stdout)")
        XCTAssertTrue(FileManager.default.fileExists(atPath: out.appendingPathComponent("b.jpg").path))
    }

    func testTheMemoryCapStopsAWorkerThatAllocatesWithoutEnd() throws {
        let folder = try CLIHarness.temporaryFolder(for: self)
        let balloon = try writePNG("a__balloon__.png", in: folder)
        let next = try writePNG("b.png", in: folder, seed: 2)
        let out = folder.appendingPathComponent("out")
        let result = try CLIHarness.run(
            [
                "thumb", "--isolate", "all", "-j", "1", "--worker-memory", "512", "--timeout", "600",
                "--json", "-o", out.path, balloon, next
            ], environment: faults)
        XCTAssertEqual(result.status, 1, result.stderr)
        let (inputs, _) = try result.jsonReport()
        let failure = error(inputs[balloon])
        XCTAssertEqual(failure?.kind, "crashed", result.stdout)
        XCTAssertTrue(failure?.message.contains("capped at 512 MB") ?? false, failure?.message ?? "")
        // The worker's own word that allocation failed below the cap (not a timeout, not the machine's memory).
        let reached = try XCTUnwrap(
            result.stderr.range(of: #"out of memory after (\d+) MB"#, options: .regularExpression),
            result.stderr)
        let megabytes = try XCTUnwrap(Int(result.stderr[reached].split(separator: " ")[4]))
        XCTAssertLessThan(megabytes, 512)
        XCTAssertEqual(inputs[next]?["status"] as? String, "written", result.stdout)
    }

    func testOptInFormatsAreIsolatedByDefaultAndHardenedOnesAreNot() throws {
        let folder = try CLIHarness.temporaryFolder(for: self)
        let svg = folder.appendingPathComponent("a__crash-SIGSEGV__.svg")
        try Data(
            #"<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect width="40" height="20" fill="red"/></svg>"#
                .utf8
        )
        .write(to: svg)
        let png = try writePNG("b__crash-SIGSEGV__.png", in: folder)
        let out = folder.appendingPathComponent("out")
        let result = try CLIHarness.run(
            ["thumb", "--allow", "svg", "--json", "-o", out.path, svg.path, png], environment: faults)
        XCTAssertEqual(result.status, 1, result.stderr)
        let (inputs, _) = try result.jsonReport()
        XCTAssertEqual(error(inputs[svg.path])?.kind, "crashed", "SVG goes to a worker: \(result.stdout)")
        XCTAssertEqual(inputs[png]?["status"] as? String, "written", "PNG decodes in-process: \(result.stdout)")

        // Off: the SVG decodes in-process too.
        let off = try CLIHarness.run(
            ["thumb", "--allow", "svg", "--isolate", "none", "-o", out.path, svg.path], environment: faults)
        XCTAssertEqual(off.status, 0, off.stderr)

        // `info` isolates the same way.
        let info = try CLIHarness.run(["info", "--allow", "svg", svg.path, png], environment: faults)
        XCTAssertEqual(info.status, 1, info.stderr)
        XCTAssertTrue(info.stderr.contains("\(svg.path): crashed:"), info.stderr)
        XCTAssertTrue(info.stdout.contains("\(png): 200x100 png"), info.stdout)
        // A worker's typed error is the one the in-process decoder gives.
        let missing = folder.appendingPathComponent("missing.svg").path
        let isolatedInfo = try CLIHarness.run(["info", "--isolate", "all", "--allow", "svg", missing])
        let inProcessInfo = try CLIHarness.run(["info", "--isolate", "none", "--allow", "svg", missing])
        XCTAssertEqual(isolatedInfo.status, 1, isolatedInfo.stderr)
        XCTAssertFalse(isolatedInfo.stderr.isEmpty)
        XCTAssertEqual(isolatedInfo.stderr, inProcessInfo.stderr)

        let bad = try CLIHarness.run(["thumb", "--isolate", "some", svg.path])
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.stderr.contains("--isolate takes one of optin, all, none"), bad.stderr)
    }

    /// `--keep-metadata` and `--animated` mean the same for an isolated input
    /// as for one decoded in-process: the outputs are byte for byte the same.
    func testIsolatedDecodesKeepMetadataAndEveryFrameAsInProcessOnesDo() throws {
        let folder = try CLIHarness.temporaryFolder(for: self)
        let rotated = folder.appendingPathComponent("rotated.jpg")
        try ImageSynthesizer.data(width: 120, height: 80, seed: 5, iccProfile: "p3", format: .jpeg(orientation: 6))
            .write(to: rotated)
        let frames = try [UInt8(0), 120, 240].map { level in
            try Bitmap(width: 90, height: 60, channels: 3, pixels: [UInt8](repeating: level, count: 90 * 60 * 3))
        }
        let gif = folder.appendingPathComponent("clip.gif")
        try ImageEncoder().encode(try AnimatedBitmap(frames: frames, delays: [50, 60, 70], loopCount: 3), as: .gif).data
            .write(to: gif)

        for (flags, input, output) in [
            (["--keep-metadata"], rotated, "rotated.jpg"),
            (["--animated", "--format", "gif"], gif, "clip.gif")
        ] {
            var outputs: [Data] = []
            for isolate in ["all", "none"] {
                let out = folder.appendingPathComponent("out-\(isolate)")
                let result = try CLIHarness.run(
                    ["thumb", "--isolate", isolate, "-s", "40", "-o", out.path] + flags + [input.path])
                XCTAssertEqual(result.status, 0, result.stderr)
                outputs.append(try Data(contentsOf: out.appendingPathComponent(output)))
            }
            XCTAssertEqual(outputs[0], outputs[1], "\(flags): isolated and in-process outputs differ")
        }
        // And what they kept is really there: the EXIF block (orientation reset) and three frames.
        let kept = try ImageDecoder().metadata(.file(folder.appendingPathComponent("out-all/rotated.jpg").path))
        XCTAssertNotNil(kept.exif)
        let animation = try ImageDecoder().decodeAnimation(
            .file(folder.appendingPathComponent("out-all/clip.gif").path))
        XCTAssertEqual(animation.frameCount, 3)
    }

    /// Each worker that hangs says so on the stderr it shares with its parent;
    /// that pipe reaches its end once the parent and every worker are gone (a
    /// process's descriptors close when it ends), so both are events to wait on.
    func testWorkersEndWithTheirParentOnSIGTERMSIGINTAndSIGKILL() throws {
        let folder = try CLIHarness.temporaryFolder(for: self)
        let hang = try writePNG("a__hang__.png", in: folder)
        for (number, status) in [(SIGTERM, Int32(143)), (SIGINT, Int32(130)), (SIGKILL, Int32(-1))] {
            let parent = Process()
            parent.executableURL = CLIHarness.binary
            parent.arguments = [
                "thumb", "--isolate", "all", "--timeout", "600", "-o", folder.appendingPathComponent("out").path, hang
            ]
            parent.environment = CLIHarness.environment(faults)
            parent.standardOutput = FileHandle.nullDevice
            let errors = Pipe()
            parent.standardError = errors
            try parent.run()
            let hanging = expectation(description: "a worker started and hangs")
            let closed = expectation(description: "the parent and its workers ended")
            DispatchQueue.global().async {
                var text = ""
                var announced = false
                while true {
                    let chunk = errors.fileHandleForReading.availableData
                    if chunk.isEmpty { break }
                    text += String(decoding: chunk, as: UTF8.self)
                    if !announced, text.contains("hanging on a__hang__.png") {
                        announced = true
                        hanging.fulfill()
                    }
                }
                closed.fulfill()
            }
            wait(for: [hanging], timeout: 120)
            kill(parent.processIdentifier, number)
            parent.waitUntilExit()
            if status >= 0 {
                XCTAssertEqual(parent.terminationStatus, status)
            } else {
                XCTAssertEqual(parent.terminationReason, .uncaughtSignal)
            }
            // Killed by its parent (SIGTERM, SIGINT), or ending itself once the parent is gone (SIGKILL).
            wait(for: [closed], timeout: 120)
        }
    }

    /// Random and mutated bytes under `--allow svg,pdf,jp2k --isolate all`:
    /// whatever the decoders do with them, the parent reports every input and exits normally.
    func testRandomBytesThroughTheIsolatedPathNeverKillTheParent() throws {
        let folder = try CLIHarness.temporaryFolder(for: self)
        var generator = SplitMix64(seed: 16)
        let png = try ImageSynthesizer.data(width: 64, height: 48, seed: 3, format: .png())
        let jpeg = try ImageSynthesizer.data(width: 64, height: 48, seed: 4, format: .jpeg())
        let svg = Data(
            #"<svg xmlns="http://www.w3.org/2000/svg" width="64" height="48"><circle cx="32" cy="24" r="20" fill="blue"/></svg>"#
                .utf8)
        let prefixes: [Data] = [
            Data("%PDF-1.4\n".utf8), Data([0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20, 0x0D, 0x0A, 0x87, 0x0A]),
            Data([0xFF, 0x4F, 0xFF, 0x51]), Data("<svg ".utf8), Data()
        ]
        var paths: [String] = []
        for index in 0..<60 {
            var bytes: Data
            switch index % 4 {
            case 0: bytes = prefixes[index / 4 % prefixes.count] + generator.bytes(Int(generator.next() % 4096))
            case 1: bytes = generator.mutate(svg)
            case 2: bytes = generator.mutate(png)
            default: bytes = generator.mutate(jpeg)
            }
            if index % 4 != 0, generator.next() % 3 == 0 {
                bytes = bytes.prefix(Int(generator.next() % UInt64(bytes.count + 1)))
            }
            let url = folder.appendingPathComponent(String(format: "input-%02d", index))
            try bytes.write(to: url)
            paths.append(url.path)
        }
        let out = folder.appendingPathComponent("out")
        let result = try CLIHarness.run(
            [
                "thumb", "--allow", "svg,pdf,jp2k", "--isolate", "all", "--timeout", "60", "-s", "32",
                "--json", "-o", out.path
            ] + paths)
        XCTAssertTrue(
            result.status == 0 || result.status == 1,
            "the parent exited normally, not \(result.status): \(result.stderr)")
        let (inputs, summary) = try result.jsonReport()
        XCTAssertEqual(Set(inputs.keys), Set(paths), "every input reported")
        XCTAssertEqual(
            (summary["written"] as? Int ?? -1) + (summary["failed"] as? Int ?? -1), paths.count, result.stdout)
        XCTAssertGreaterThan(summary["failed"] as? Int ?? 0, 0, "random bytes fail")
    }
}

/// The stress test's bytes, from a deterministic generator.
private extension SplitMix64 {
    mutating func bytes(_ count: Int) -> Data {
        Data((0..<count).map { _ in UInt8(truncatingIfNeeded: next()) })
    }

    /// `data` with a few bytes overwritten at random.
    mutating func mutate(_ data: Data) -> Data {
        var copy = data
        guard !copy.isEmpty else { return copy }
        for _ in 0..<(1 + Int(next() % 8)) {
            copy[copy.startIndex + Int(next() % UInt64(copy.count))] = UInt8(truncatingIfNeeded: next())
        }
        return copy
    }
}
