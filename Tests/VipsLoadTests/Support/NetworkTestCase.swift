import Foundation
import TestSupport
import VipsLoad
import XCTest

/// A test case with a `TestHTTPServer` on 127.0.0.1 and private folders for
/// the disk cache and uncached downloads, all removed in `tearDown`.
class NetworkTestCase: XCTestCase {
    var server: TestHTTPServer!
    var cacheDirectory: URL!
    var downloadDirectory: URL!

    override func setUpWithError() throws {
        server = try TestHTTPServer()
        cacheDirectory = NetworkFixtures.makeDirectory("cache")
        downloadDirectory = NetworkFixtures.makeDirectory("downloads")
    }

    override func tearDown() {
        server?.stop()
        server = nil
        for directory in [cacheDirectory, downloadDirectory].compactMap({ $0 }) {
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// A loader downloading to this test's folder, optionally into a disk cache.
    func makeLoader(
        cache: DiskCache? = nil, _ adjust: (inout HTTPDataLoader.Configuration) -> Void = { _ in }
    ) -> HTTPDataLoader {
        var configuration = HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory)
        adjust(&configuration)
        return HTTPDataLoader(configuration: configuration, cache: cache)
    }

    func makeCache(sizeLimit: Int = 512 * 1024 * 1024) throws -> DiskCache {
        try DiskCache(directory: cacheDirectory, sizeLimit: sizeLimit)
    }

    func load(_ loader: HTTPDataLoader, _ path: String) async throws -> ImageData {
        try await loader.loadData(for: .url(server.url(path)))
    }

    /// Loads `path`, expecting a `VipsError` of `kind` whose message contains `text`.
    func assertLoadFails(
        _ loader: HTTPDataLoader, _ path: String, kind: VipsError.Kind, containing text: String? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) async {
        do {
            let data = try await load(loader, path)
            XCTFail("\(path) loaded \(data.byteCount) bytes; expected \(kind)", file: file, line: line)
        } catch let error as VipsError {
            XCTAssertEqual(error.kind, kind, "\(error)", file: file, line: line)
            if let text { XCTAssertTrue(error.message.contains(text), "\(error)", file: file, line: line) }
        } catch {
            XCTFail("\(path): \(error); expected \(kind)", file: file, line: line)
        }
    }

    /// Files a failed download must not leave: partial downloads and cache writes in progress.
    func leftoverFiles() -> [String] {
        NetworkFixtures.files(in: downloadDirectory)
            + NetworkFixtures.files(in: cacheDirectory.appendingPathComponent("tmp")).filter {
                $0.split(separator: "/").last?.hasPrefix("w-") == true
            }
    }
}
