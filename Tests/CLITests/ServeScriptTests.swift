import Foundation
import XCTest

/// `vipsload serve` exercised from outside by the scripts that drive it as its users do:
/// - `Tests/Browser/serve_browser.py`: headless Chromium scrolls a gallery of 240 lazy-loaded
///   thumbnails to the end (every image that came into view loaded, none broken), then reuses a
///   few `<img>` cells while their requests are still in flight (held by an origin the script
///   controls); the server must count each abandoned request as cancelled, cancel its download
///   and be idle again. Screenshots go to `.build/browser-test/`.
/// - `scripts/check-serve-scale-out.py`: docs/serve.md's Deployment and nginx load balancer,
///   run as replicas on 127.0.0.1; one drained with a request in flight, then restarted on its
///   disk cache.
/// Each script bounds every wait it makes and fails with the reason; these tests fail with it.
final class ServeScriptTests: XCTestCase {
    /// The package folder (three levels above this file).
    static let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    func testBrowserGalleryLoadsEveryImageInViewAndRecycledCellsCancelTheirRequests() throws {
        // Debian's chromium, chromium-driver and python3-selenium: scripts/test.sh installs them.
        for tool in ["/usr/lib/chromium/chromium", "/usr/bin/chromedriver"] {
            XCTAssertTrue(
                FileManager.default.isExecutableFile(atPath: tool),
                "\(tool) is missing: scripts/test.sh installs chromium, chromium-driver and python3-selenium")
        }
        let out = Self.package.appendingPathComponent(".build/browser-test")
        for name in ["gallery.png", "gallery-end.png", "recycle.png"] {
            try? FileManager.default.removeItem(at: out.appendingPathComponent(name))
        }
        try runScript("Tests/Browser/serve_browser.py", ["--out", out.path])
        for name in ["gallery.png", "gallery-end.png", "recycle.png"] {
            let data = try Data(contentsOf: out.appendingPathComponent(name))
            XCTAssertEqual(Array(data.prefix(8)), [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], "\(name) is a PNG")
        }
    }

    func testScaleOutManifestRunsAsReplicasBehindNginxAndOneDrains() throws {
        // nginx and python3-yaml: scripts/test.sh installs them.
        XCTAssertTrue(
            FileManager.default.isExecutableFile(atPath: "/usr/sbin/nginx"),
            "nginx is missing: scripts/test.sh installs it")
        try runScript("scripts/check-serve-scale-out.py", [])
    }

    /// Runs a script of the package with Debian's python3 (where python3-selenium and
    /// python3-yaml are) against the built `vipsload`, and fails with its output unless it exits 0.
    private func runScript(
        _ script: String, _ arguments: [String], file: StaticString = #filePath, line: UInt = #line
    )
        throws
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments =
            [Self.package.appendingPathComponent(script).path, "--vipsload", CLIHarness.binary.path] + arguments
        process.environment = CLIHarness.environment()
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        let finished = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in finished.signal() }
        try process.run()
        nonisolated(unsafe) var text = Data()
        let read = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            text = output.fileHandleForReading.readDataToEndOfFile()
            read.signal()
        }
        // Only a hung browser or server could keep it past this; SIGTERM lets the script end
        // everything it started.
        if finished.wait(timeout: .now() + .seconds(600)) == .timedOut {
            process.terminate()
            finished.wait()
            XCTFail("\(script) did not finish within 10 minutes", file: file, line: line)
        }
        read.wait()
        let log = String(decoding: text, as: UTF8.self)
        print(log)
        XCTAssertEqual(process.terminationStatus, 0, "\(script) failed:\n\(log)", file: file, line: line)
    }
}
