import Foundation
import TestSupport
import VipsCore
import VipsLoad
import VipsSynthesis
import XCTest

/// A large body never sits whole in memory: downloaded to a file and decoded
/// from there, a ~60 MB JPEG thumbnailed over HTTP keeps the process's peak
/// RSS far below the body's size. Measured in fresh child processes
/// (`/proc/self/status`: VmRSS after a small warm-up download and decode,
/// VmHWM after the large one), so nothing this test allocated (the image it
/// generates) counts.
final class NetworkMemoryTests: NetworkTestCase {
    private struct Report {
        let baselineKB: Int
        let downloadPeakKB: Int
        let peakKB: Int
        let bytes: Int
        let thumbnail: String

        init?(_ line: String) {
            var fields: [String: String] = [:]
            for pair in line.split(separator: " ").dropFirst() {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
            }
            guard let baseline = fields["baseline"].flatMap(Int.init),
                let download = fields["download-peak"].flatMap(Int.init),
                let peak = fields["peak"].flatMap(Int.init), let bytes = fields["bytes"].flatMap(Int.init),
                let thumbnail = fields["thumbnail"]
            else { return nil }
            (baselineKB, downloadPeakKB, peakKB, self.bytes, self.thumbnail) = (
                baseline, download, peak, bytes, thumbnail
            )
        }

        /// How far the peak rose above the process's size before the download, in bytes.
        var growth: Int { (peakKB - baselineKB) * 1024 }
    }

    private func measure(role: String, path: String, environment: [String: String] = [:]) throws -> Report {
        var env = environment
        env["VIPSLOAD_TEST_URL"] = server.url(path).absoluteString
        env["VIPSLOAD_TEST_WARMUP_URL"] = server.url("/small.jpg").absoluteString
        env["VIPSLOAD_TEST_DIR"] = downloadDirectory.path
        let child = try TestChildProcess(role: role, environment: env)
        defer { child.kill() }
        let line = try XCTUnwrap(
            child.waitForReport(timeout: 300) { $0.hasPrefix("RSS ") }, "\(role) reported:\n\(child.transcript)")
        XCTAssertEqual(child.waitForExit(), 0, "\(role) ended normally")
        return try XCTUnwrap(Report(line), line)
    }

    func testThumbnailingASixtyMegabyteDownloadKeepsPeakMemoryFarBelowTheBodySize() throws {
        let fixtures = NetworkFixtures.makeDirectory("large")
        defer { try? FileManager.default.removeItem(at: fixtures) }
        let file = fixtures.appendingPathComponent("large.jpg")
        // A 9000×7000 photo-like JPEG at quality 97: about 60 MB.
        try ImageSynthesizer.data(width: 9000, height: 7000, seed: 7, format: .jpeg(quality: 97)).write(to: file)
        let size = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int)
        XCTAssertGreaterThan(size, 50_000_000)
        server.route("/small.jpg", .ok(try NetworkFixtures.jpeg(width: 800, height: 600)))
        // Served from the file in 64 KiB chunks: the server holds no copy either.
        server.route(
            "/large.jpg",
            TestHTTPServer.Response(
                headers: [("Content-Type", "image/jpeg"), ("Cache-Control", "max-age=3600")],
                body: .file(file.path)))

        let streamed = try measure(role: "rss-thumbnail", path: "/large.jpg")
        let cached = try measure(
            role: "rss-thumbnail", path: "/large.jpg", environment: ["VIPSLOAD_TEST_CACHE": cacheDirectory.path])
        let inMemory = try measure(role: "rss-in-memory", path: "/large.jpg")
        for (name, report) in [("temporary file", streamed), ("disk cache", cached), ("in memory", inMemory)] {
            print(
                "RSS \(name): body \(report.bytes / 1_048_576) MiB, baseline \(report.baselineKB / 1024) MiB, "
                    + "peak after download \(report.downloadPeakKB / 1024) MiB, peak after thumbnail \(report.peakKB / 1024) MiB "
                    + "(+\(report.growth / 1_048_576) MiB), thumbnail \(report.thumbnail)")
            XCTAssertEqual(report.bytes, size)
            XCTAssertEqual(report.thumbnail, "256x199")
        }
        // The claim: streamed to disk, the peak grows by far less than the body.
        XCTAssertLessThan(streamed.growth, size / 3)
        XCTAssertLessThan(cached.growth, size / 3)
        // And the measurement can tell: the same body held in memory shows up in full.
        XCTAssertGreaterThan(inMemory.growth, size * 9 / 10)
        XCTAssertEqual(server.requestCount("/large.jpg"), 3)
    }
}
