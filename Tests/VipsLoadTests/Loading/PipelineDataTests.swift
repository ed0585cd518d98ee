import Foundation
import TestSupport
import VipsCore
import VipsLoad
import XCTest

/// `ImagePipeline.data(for:)`: a source's bytes through the pipeline's
/// loading (disk cache, coalescing) with no decode, and cancellation.
final class PipelineDataTests: NetworkTestCase {
    private func makePipeline(cache: DiskCache? = nil) -> ImagePipeline {
        let http = HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory)
        return ImagePipeline(configuration: .init(decodeConcurrency: 1, dataCache: cache, http: http))
    }

    private func bytes(_ data: ImageData) throws -> Data {
        switch data.input {
        case .file(let path): return try Data(contentsOf: URL(fileURLWithPath: path))
        case .data(let bytes): return bytes
        }
    }

    func testADownloadIsReturnedUndecodedAndServedFromTheDiskCacheNextTime() async throws {
        let jpeg = try NetworkFixtures.jpeg()
        server.route("/photo.jpg", .ok(jpeg, headers: [("Cache-Control", "max-age=3600")]))
        let pipeline = makePipeline(cache: try makeCache())
        let request = ImageRequest(url: server.url("/photo.jpg"))
        let first = try await pipeline.data(for: request)
        XCTAssertEqual(try bytes(first), jpeg)
        XCTAssertEqual(first.byteCount, jpeg.count)
        let second = try await pipeline.data(for: request)
        XCTAssertEqual(try bytes(second), jpeg)
        XCTAssertEqual(server.requestCount("/photo.jpg"), 1, "the second call is a disk-cache hit")
        XCTAssertEqual(pipeline.metrics.decodesStarted, 0)
    }

    func testAFailedDownloadFailsWithItsKindAndIsNotCached() async throws {
        server.route("/missing.jpg", .init(status: 404))
        let pipeline = makePipeline(cache: try makeCache())
        for _ in 1...2 {
            await assertThrows(kind: .httpStatus, "a 404") {
                _ = try await pipeline.data(for: ImageRequest(url: self.server.url("/missing.jpg")))
            }
        }
        XCTAssertEqual(server.requestCount("/missing.jpg"), 2)
    }

    func testCancellingTheCallerEndsTheCallAtOnceAndTheDownload() async throws {
        let gate = ServerGate()
        server.route("/slow.jpg") { _ in
            gate.pass()
            return .ok(Data(repeating: 0xFF, count: 10))
        }
        defer { gate.open() }
        let pipeline = makePipeline()
        let request = ImageRequest(url: server.url("/slow.jpg"))
        let task = Task { try await pipeline.data(for: request) }
        await waitUntil("the download reached the server") { self.server.requestCount("/slow.jpg") == 1 }
        task.cancel()
        do {
            let data = try await task.value
            XCTFail("a cancelled call returned \(data.byteCount) bytes")
        } catch {
            XCTAssertEqual((error as? VipsError)?.kind, .cancelled, "\(error)")
        }
        await waitUntil("the download is cancelled") { pipeline.inFlight.isIdle && pipeline.inFlight.tablesAreEmpty }
    }

    func testACallCancelledBeforeItStartsLoadsNothing() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("local", width: 32, height: 32)
        let pipeline = makePipeline()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await pipeline.data(for: ImageRequest(path: path))
        }
        await assertThrows(kind: .cancelled, "cancelled first") { _ = try await task.value }
        XCTAssertEqual(pipeline.metrics.dataLoadsStarted, 0, "a call cancelled before it started loads nothing")
        let data = try await pipeline.data(for: ImageRequest(path: path))
        XCTAssertEqual(data.input, .file(URL(fileURLWithPath: path).standardizedFileURL.path))
    }
}
