import Foundation
import TestSupport
import VipsCore
import VipsSynthesis
import XCTest

/// `vipsload serve`'s `/info/…` in a real child process, with its decode
/// workers (`--isolate all`): the header and placeholders of a source the
/// server never parses itself are the worker's, and equal the in-process ones.
final class ServeInfoTests: XCTestCase {
    private var children: [ServeChild] = []
    private var folder: URL!

    override func setUpWithError() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("vipsload-serve-info-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try ImageSynthesizer.data(width: 240, height: 160, seed: 9, alpha: true, format: .png())
            .write(to: folder.appendingPathComponent("alpha.png"))
    }

    override func tearDown() {
        for child in children { child.stop() }
        children = []
        if let folder { try? FileManager.default.removeItem(at: folder) }
    }

    private func info(isolate: String) throws -> [String: Any] {
        let child = try ServeChild(["--root", folder.path, "--isolate", isolate])
        children.append(child)
        let body = try ServeCommandTests.runCurl(["-s", child.url("/info/_/plain/local:///alpha.png").absoluteString])
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any], body)
    }

    func testTheIsolatedInfoIsTheWorkersAndEqualsTheInProcessOne() throws {
        let isolated = try info(isolate: "all")
        XCTAssertEqual(isolated["width"] as? Int, 240)
        XCTAssertEqual(isolated["height"] as? Int, 160)
        XCTAssertEqual(isolated["alpha"] as? Bool, true)
        let inProcess = try info(isolate: "none")
        for field in ["width", "height", "format", "pages", "orientation", "alpha", "size", "blurhash", "thumbhash"] {
            XCTAssertEqual("\(isolated[field] ?? "-")", "\(inProcess[field] ?? "-")", field)
        }
    }
}
