import Foundation
import TestSupport
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsLoad

/// `ImageTask.events` and `progress`, over the loopback server.
final class ImageTaskEventsTests: NetworkTestCase {
    private func makePipeline(cache: DiskCache? = nil) -> ImagePipeline {
        ImagePipeline(
            configuration: .init(
                decodeConcurrency: 2, memoryCache: MemoryCache(costLimit: 64 << 20),
                dataCache: cache,
                http: HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory)))
    }

    /// A JPEG of a few hundred KiB, so its body arrives in many reads.
    private func largeJPEG() throws -> Data {
        try ImageSynthesizer.data(width: 600, height: 400, seed: 71, format: .jpeg(quality: 98))
    }

    /// Checks a download's event list: rising progress ending at the body's
    /// size with `total`, then `finished` with a bitmap.
    private func assertDownloadEvents(
        _ events: [ImageTask.Event], size: Int, total: Int?,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        var progress: [(Int, Int?)] = []
        for event in events.dropLast() {
            guard case .progress(let completed, let declared) = event else {
                return XCTFail("unexpected \(event) in \(events)", file: file, line: line)
            }
            progress.append((completed, declared))
        }
        XCTAssertFalse(progress.isEmpty, "no progress", file: file, line: line)
        XCTAssertEqual(
            progress.map(\.0), progress.map(\.0).sorted(), "progress never goes back", file: file, line: line)
        XCTAssertEqual(progress.last?.0, size, file: file, line: line)
        XCTAssertTrue(progress.allSatisfy { $0.1 == total }, "\(progress)", file: file, line: line)
        guard case .finished(.success(let bitmap))? = events.last else {
            return XCTFail("last event \(String(describing: events.last))", file: file, line: line)
        }
        XCTAssertGreaterThan(bitmap.width, 0, file: file, line: line)
    }

    func testAContentLengthBodyReportsProgressWithItsTotalToEveryCoalescedTask() async throws {
        let jpeg = try largeJPEG()
        let gate = ServerGate()
        server.route("/large.jpg") { _ in
            gate.pass()
            return TestHTTPServer.Response(
                status: 200, headers: [("Content-Type", "image/jpeg")], body: .data(jpeg),
                chunkSize: 8192)
        }
        let pipeline = makePipeline()
        let first = pipeline.imageTask(with: ImageRequest(url: server.url("/large.jpg"), size: .maxPixelSize(100)))
        let second = pipeline.imageTask(with: ImageRequest(url: server.url("/large.jpg"), size: .maxPixelSize(50)))
        // Subscribed before any byte is sent.
        let firstStream = first.events
        let secondStream = second.events
        async let firstEvents = collectEvents(firstStream)
        async let secondEvents = collectEvents(secondStream)
        await waitUntil("the shared download reached the server") { self.server.requestCount("/large.jpg") == 1 }
        gate.open()
        assertDownloadEvents(await firstEvents, size: jpeg.count, total: jpeg.count)
        assertDownloadEvents(await secondEvents, size: jpeg.count, total: jpeg.count)
        XCTAssertEqual(server.requestCount("/large.jpg"), 1)
        XCTAssertEqual(first.progress, ImageTask.Progress(completed: jpeg.count, total: jpeg.count))
        XCTAssertEqual(first.progress.fraction, 1)
        XCTAssertEqual(second.progress.completed, jpeg.count)
    }

    func testAChunkedBodyReportsProgressWithoutATotal() async throws {
        let jpeg = try largeJPEG()
        // Transfer-Encoding: chunked, 8 KiB chunks.
        var body = Data()
        var offset = 0
        while offset < jpeg.count {
            let end = min(offset + 8192, jpeg.count)
            body.append(Data(String(end - offset, radix: 16).utf8) + Data("\r\n".utf8))
            body.append(jpeg[offset..<end])
            body.append(Data("\r\n".utf8))
            offset = end
        }
        body.append(Data("0\r\n\r\n".utf8))
        let head =
            "HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        let gate = ServerGate()
        let encoded = body
        server.route("/chunked.jpg") { _ in
            gate.pass()
            return TestHTTPServer.Response(body: .data(encoded), chunkSize: 8192, rawHead: Data(head.utf8))
        }
        let pipeline = makePipeline()
        let task = pipeline.imageTask(with: ImageRequest(url: server.url("/chunked.jpg"), size: .maxPixelSize(80)))
        let stream = task.events
        async let events = collectEvents(stream)
        await waitUntil("the download reached the server") { self.server.requestCount("/chunked.jpg") == 1 }
        gate.open()
        assertDownloadEvents(await events, size: jpeg.count, total: nil)
        XCTAssertEqual(task.progress, ImageTask.Progress(completed: jpeg.count, total: nil))
        XCTAssertNil(task.progress.fraction)
    }

    func testCacheHitsAreReportedAsMemoryOrDisk() async throws {
        let jpeg = try NetworkFixtures.jpeg(width: 80, height: 40, seed: 72)
        server.route("/hit.jpg", .ok(jpeg, headers: [("Cache-Control", "max-age=3600")]))
        let request = ImageRequest(url: server.url("/hit.jpg"), size: .maxPixelSize(40))
        let pipeline = makePipeline(cache: try makeCache())
        _ = try await pipeline.image(for: request)

        // A memory hit: a task that has already completed.
        let memory = await collectEvents(pipeline.imageTask(with: request))
        XCTAssertEqual(memory.count, 2, "\(memory)")
        guard case .cacheHit(.memory)? = memory.first, case .finished(.success)? = memory.last else {
            return XCTFail("\(memory)")
        }

        // A disk hit in a new pipeline: no progress (nothing downloaded).
        let next = makePipeline(cache: try makeCache())
        let disk = await collectEvents(next.imageTask(with: request))
        XCTAssertEqual(disk.count, 2, "\(disk)")
        guard case .cacheHit(.disk)? = disk.first, case .finished(.success)? = disk.last else {
            return XCTFail("\(disk)")
        }
        XCTAssertEqual(server.requestCount("/hit.jpg"), 1)

        // A failure finishes the sequence too.
        server.route("/missing.jpg", .status(404))
        let failed = await collectEvents(next.imageTask(with: ImageRequest(url: server.url("/missing.jpg"))))
        guard failed.count == 1, case .finished(.failure(let error))? = failed.last else { return XCTFail("\(failed)") }
        XCTAssertEqual(error.kind, .httpStatus)
    }
}

/// Every event of `task`, until its sequence ends.
func collectEvents(_ task: ImageTask) async -> [ImageTask.Event] {
    await collectEvents(task.events)
}

/// Every event of `stream`, until it ends.
func collectEvents(_ stream: AsyncStream<ImageTask.Event>) async -> [ImageTask.Event] {
    var events: [ImageTask.Event] = []
    for await event in stream { events.append(event) }
    return events
}
