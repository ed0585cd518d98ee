import Foundation
import TestSupport
import VipsCore
import VipsSynthesis
import XCTest

/// `vipsload serve`'s watermark as an imgproxy deployment configures it: the
/// `IMGPROXY_WATERMARK_*` variables and the flags over them, a real child
/// process, real connections, real files; a bad watermark stops the start.
final class ServeWatermarkTests: XCTestCase {
    private var children: [ServeChild] = []
    private var root: URL!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("vipsload-wm-\(UUID())")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try ImageSynthesizer.data(width: 64, height: 48, seed: 3, format: .png())
            .write(to: root.appendingPathComponent("photo.png"))
        try ImageSynthesizer.data(width: 16, height: 8, seed: 41, format: .png())
            .write(to: root.appendingPathComponent("one.png"))
        try ImageSynthesizer.data(width: 16, height: 8, seed: 42, format: .png())
            .write(to: root.appendingPathComponent("other.png"))
    }

    override func tearDown() {
        for child in children { child.stop() }
        children = []
        if let root { try? FileManager.default.removeItem(at: root) }
    }

    private func start(_ arguments: [String], environment: [String: String] = [:]) throws -> ServeChild {
        let child = try ServeChild(["--root", root.path] + arguments, environment: environment)
        children.append(child)
        return child
    }

    private func path(_ name: String) -> String { root.appendingPathComponent(name).path }

    private let marked = "/insecure/wm:1:soea/plain/local:///photo.png@png"

    /// The response to `marked` and its decoded pixels.
    private func fetch(_ child: ServeChild) throws -> (etag: String?, bitmap: Bitmap) {
        let response = try TestConnection(port: child.port).request(marked)
        XCTAssertEqual(response.status, 200, response.text)
        return (response.header("ETag"), try ImageDecoder().decode(.data(response.body)))
    }

    func testImgproxysVariablesDrawTheWatermarkAndFlagsOverrideThem() throws {
        let one = try ImageDecoder().decode(.file(path("one.png")))
        let other = try ImageDecoder().decode(.file(path("other.png")))
        let fromPath = try fetch(try start([], environment: ["IMGPROXY_WATERMARK_PATH": path("one.png")]))
        XCTAssertEqual(fromPath.bitmap.pixel(x: 63, y: 47), one.pixel(x: 15, y: 7), "its corner at the result's")
        XCTAssertEqual(fromPath.bitmap.pixel(x: 48, y: 40), one.pixel(x: 0, y: 0))
        // The same image as base64 data: the same ETag (the identity is the bytes').
        let base64 = try Data(contentsOf: URL(fileURLWithPath: path("one.png"))).base64EncodedString()
        let fromData = try fetch(try start([], environment: ["IMGPROXY_WATERMARK_DATA": base64]))
        XCTAssertEqual(fromData.etag, fromPath.etag)
        // A flag wins over the variables; another image, another ETag.
        let flagged = try fetch(
            try start(
                ["--watermark-url", "local:///other.png"], environment: ["IMGPROXY_WATERMARK_DATA": base64]))
        XCTAssertEqual(flagged.bitmap.pixel(x: 63, y: 47), other.pixel(x: 15, y: 7))
        XCTAssertNotEqual(flagged.etag, fromPath.etag)
        // The configured opacity, and a warning naming the variable imgproxy's order leaves out.
        let child = try start(
            [],
            environment: [
                "IMGPROXY_WATERMARK_DATA": base64, "IMGPROXY_WATERMARK_URL": "local:///other.png",
                "IMGPROXY_WATERMARK_OPACITY": "0.5"
            ])
        let half = try fetch(child)
        XCTAssertNotEqual(half.etag, fromPath.etag)
        XCTAssertNotEqual(half.bitmap.pixel(x: 63, y: 47), one.pixel(x: 15, y: 7))
        XCTAssertTrue(
            child.stderr.contains("warning: IMGPROXY_WATERMARK_URL ignored: IMGPROXY_WATERMARK_DATA is the watermark"),
            child.stderr)
    }

    func testABadWatermarkStopsTheStartNamingItsOrigin() throws {
        try Data("not an image".utf8).write(to: root.appendingPathComponent("page.png"))
        let usage: [([String], [String: String], String)] = [
            ([], ["IMGPROXY_WATERMARK_DATA": "%%%"], "IMGPROXY_WATERMARK_DATA: not base64-encoded data"),
            (["--watermark-opacity", "0"], [:], "--watermark-opacity takes a number above 0 and at most 1"),
            ([], ["IMGPROXY_WATERMARK_OPACITY": "1.5"], "IMGPROXY_WATERMARK_OPACITY takes a number above 0"),
            (
                ["--watermark-path", path("one.png"), "--watermark-url", "local:///one.png"], [:],
                "give the watermark one source"
            )
        ]
        for (arguments, environment, expected) in usage {
            let result = try CLIHarness.run(
                ["serve", "--port", "0", "--root", root.path] + arguments, environment: environment)
            XCTAssertEqual(result.status, 2, "\(arguments) \(environment): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains(expected), "\(arguments) \(environment): \(result.stderr)")
        }
        let failures: [([String], [String: String], String)] = [
            ([], ["IMGPROXY_WATERMARK_PATH": path("missing.png")], "IMGPROXY_WATERMARK_PATH: watermark: "),
            (["--watermark-path", path("page.png")], [:], "--watermark-path: watermark: "),
            (["--watermark-url", "http://127.0.0.1:9/mark.png"], [:], "--watermark-url: watermark URL: "),
            ([], ["IMGPROXY_WATERMARK_URL": "local:///../one.png"], "IMGPROXY_WATERMARK_URL: watermark URL: ")
        ]
        for (arguments, environment, expected) in failures {
            let result = try CLIHarness.run(
                ["serve", "--port", "0", "--root", root.path] + arguments, environment: environment)
            XCTAssertEqual(result.status, 1, "\(arguments) \(environment): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains(expected), "\(arguments) \(environment): \(result.stderr)")
            XCTAssertFalse(result.stderr.contains("listening on"), result.stderr)
        }
    }
}
