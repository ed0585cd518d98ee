import Foundation
import TestSupport
import XCTest

@testable import VipsLoad

/// The libcurl transport under `HTTPDataLoader` (`HTTPTransport`): large
/// receive buffers, many transfers on its one thread, cancellation and
/// sub-second timeouts, redirects under the loader's control, and the
/// thread's end with its loader. Against the real server on 127.0.0.1.
final class NetworkTransportTests: NetworkTestCase {
    func testABodyIsWrittenInPiecesLargerThanSixteenKilobytes() async throws {
        let size = 8 * 1024 * 1024
        // Written in 1 MiB pieces, so the socket holds far more than 16 KiB at a time.
        let body = NetworkFixtures.versionedBody(version: 1, size: size)
        server.route("/big.jpg", TestHTTPServer.Response(body: .data(body), chunkSize: 1024 * 1024))
        let loader = makeLoader()
        let steps = LockedState((last: 0, largest: 0, calls: 0))
        let data = try await loader.download(
            .url(server.url("/big.jpg")), key: "big",
            progress: { completed, _, _ in
                steps.withLock { state in
                    state.largest = max(state.largest, completed - state.last)
                    state.last = completed
                    state.calls += 1
                }
            },
            cache: nil, revalidating: nil)
        XCTAssertEqual(NetworkFixtures.contents(of: data), body)
        let (last, largest, calls) = steps.withLock { ($0.last, $0.largest, $0.calls) }
        XCTAssertEqual(last, size)
        // One progress report per write to the file: gathered, the pieces pass the 16 KiB that
        // libcurl hands its write callback (and URLSession its delegate).
        XCTAssertGreaterThan(largest, 16 * 1024, "\(calls) reads")
        XCTAssertLessThanOrEqual(largest, HTTPTransport.defaultReceiveBufferSize)
    }

    func testSixtyFourConcurrentTransfersRunOnTheLoadersOneThread() async throws {
        let count = 64
        for index in 0..<count {
            var response = TestHTTPServer.Response.ok(NetworkFixtures.versionedBody(version: index, size: 300_000))
            response.chunkSize = 32 * 1024
            server.route("/many/\(index).jpg", response)
        }
        let loader = makeLoader { $0.maxConcurrentDownloads = count }
        // Every body byte is written from the write callback: the progress report comes from there.
        let threads = LockedState<Set<String>>([])
        let progress: HTTPTransfer.Progress = { _, _, _ in
            let thread = Self.currentThread()
            threads.withLock { _ = $0.insert("\(thread.task) \(thread.name)") }
        }
        let versions = try await withThrowingTaskGroup(of: (Int, Int?).self) { group in
            for index in 0..<count {
                let url = server.url("/many/\(index).jpg")
                group.addTask {
                    let data = try await loader.download(
                        .url(url), key: "many-\(index)", progress: progress, cache: nil, revalidating: nil)
                    return (index, NetworkFixtures.contents(of: data).flatMap(NetworkFixtures.version))
                }
            }
            return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        XCTAssertEqual(versions.count, count)
        for index in 0..<count { XCTAssertEqual(versions[index] ?? nil, index, "body \(index) is its own") }
        XCTAssertEqual(server.totalRequestCount, count)
        XCTAssertEqual(loader.metrics.downloads, count)
        XCTAssertEqual(loader.metrics.bytesDownloaded, count * 300_000)
        let seen = threads.withLock { $0 }
        XCTAssertEqual(seen.count, 1, "every body was written on one thread: \(seen)")
        XCTAssertTrue(seen.first?.hasSuffix(" vipsload-http") == true, "\(seen)")
    }

    func testCancellingMidBodyRemovesTheFileBeforeTheCallerHearsOfIt() async throws {
        var slow = TestHTTPServer.Response(body: .pattern(count: 50_000_000))
        slow.chunkSize = 64 * 1024
        slow.chunkDelay = 0.02
        server.route("/slow.jpg", slow)
        let loader = makeLoader()
        let received = LockedState(0)
        let url = server.url("/slow.jpg")
        let task = Task {
            try await loader.download(
                .url(url), key: "slow", progress: { completed, _, _ in received.withLock { $0 = completed } },
                cache: nil, revalidating: nil)
        }
        XCTAssertTrue(server.wait { _ in received.withLock { $0 } > 256 * 1024 }, "body bytes are arriving")
        XCTAssertEqual(NetworkFixtures.files(in: downloadDirectory).count, 1, "the partial file exists")
        task.cancel()
        do {
            _ = try await task.value
            XCTFail("a cancelled download must not return data")
        } catch {
            XCTAssertEqual((error as? VipsError)?.kind, .cancelled, "\(error)")
        }
        // Not eventually: by the time the caller hears of the cancellation, the file is gone.
        XCTAssertEqual(NetworkFixtures.files(in: downloadDirectory), [])
        XCTAssertTrue(server.wait { $0.clientCloseCount("/slow.jpg") == 1 }, "the connection is closed")
    }

    func testSubSecondIdleAndWholeTransferTimeouts() async throws {
        var silent = TestHTTPServer.Response.ok(try NetworkFixtures.jpeg())
        silent.headerDelay = 20
        server.route("/silent.jpg", silent)
        var stalling = TestHTTPServer.Response(body: .pattern(count: 1_000_000))
        stalling.chunkSize = 100_000
        stalling.chunkDelay = 20
        server.route("/stalling.jpg", stalling)
        var trickle = TestHTTPServer.Response(body: .pattern(count: 1_000_000))
        trickle.chunkSize = 1000
        trickle.chunkDelay = 0.05
        server.route("/trickle.jpg", trickle)
        let idle = makeLoader {
            $0.requestTimeout = 0.3
            $0.resourceTimeout = 60
        }
        await assertLoadFails(idle, "/silent.jpg", kind: .timedOut, containing: "no data for 0.3 s")
        await assertLoadFails(idle, "/stalling.jpg", kind: .timedOut, containing: "no data for 0.3 s")
        let whole = makeLoader {
            $0.requestTimeout = 30
            $0.resourceTimeout = 0.4
        }
        await assertLoadFails(whole, "/trickle.jpg", kind: .timedOut, containing: "no complete response within 0.4 s")
        for path in ["/silent.jpg", "/stalling.jpg", "/trickle.jpg"] {
            XCTAssertTrue(server.wait { $0.clientCloseCount(path) == 1 }, "\(path): the connection is closed")
        }
        XCTAssertEqual(leftoverFiles(), [])
    }

    func testCredentialsAreNotForwardedToAnotherOriginButHeadersAre() async throws {
        let other = try TestHTTPServer()
        defer { other.stop() }
        let jpeg = try NetworkFixtures.jpeg(seed: 31)
        other.route("/elsewhere.jpg", .ok(jpeg))
        server.route("/here.jpg", .ok(jpeg))
        server.route("/same", .redirect(to: "/here.jpg"))
        server.route("/away", .redirect(to: other.url("/elsewhere.jpg").absoluteString))
        let loader = makeLoader {
            $0.headers["Authorization"] = "Bearer secret"
            $0.headers["X-Trace"] = "t1"
        }
        _ = try await load(loader, "/same")
        XCTAssertEqual(server.requests("/here.jpg").first?.header("Authorization"), "Bearer secret", "same origin")
        _ = try await load(loader, "/away")
        let forwarded = try XCTUnwrap(other.requests("/elsewhere.jpg").first)
        XCTAssertNil(forwarded.header("Authorization"), "another origin gets no credentials")
        XCTAssertEqual(forwarded.header("X-Trace"), "t1", "other fields follow the redirect")
    }

    func testAHeaderFieldNameThatWouldBeReadAsAnotherFieldIsRefusedBeforeSending() async throws {
        server.route("/photo.jpg", .ok(try NetworkFixtures.jpeg()))
        // URLRequest keeps these names (it drops values with line breaks itself); sent, the
        // first would arrive as a field "X-Role" with the value "admin: 1".
        for name in ["X-Role:admin", "X Role"] {
            let loader = makeLoader { $0.headers[name] = "1" }
            await assertLoadFails(loader, "/photo.jpg", kind: .invalidArgument, containing: "cannot be sent")
        }
        XCTAssertEqual(server.totalRequestCount, 0)
    }

    func testHTTPSGoesThroughTLS() async throws {
        // No https server runs here. A listener that answers every connection with plain
        // HTTP makes the TLS handshake fail: https is allowed, and reaches libcurl's OpenSSL.
        let plain = try PlainAnswerListener()
        defer { plain.stop() }
        let loader = makeLoader()
        let url = URL(string: "https://127.0.0.1:\(plain.port)/photo.jpg")!
        do {
            let data = try await loader.loadData(for: .url(url))
            XCTFail("loaded \(data.byteCount) bytes over plain HTTP as https")
        } catch {
            XCTAssertEqual(error.kind, .network, "\(error)")
            XCTAssertTrue(error.message.contains("SSL") || error.message.contains("TLS"), error.message)
        }
        XCTAssertGreaterThan(plain.connections, 0)
    }

    func testTheTransportThreadEndsWithItsLoader() async throws {
        server.route("/photo.jpg", .ok(try NetworkFixtures.jpeg()))
        var loader: HTTPDataLoader? = makeLoader()
        let task = LockedState<String?>(nil)
        let data = try await loader?.download(
            .url(server.url("/photo.jpg")), key: "photo",
            progress: { _, _, _ in task.withLock { $0 = Self.currentThread().task } }, cache: nil, revalidating: nil)
        let tid = try XCTUnwrap(task.withLock { $0 })
        XCTAssertTrue(FileManager.default.fileExists(atPath: "/proc/self/task/\(tid)"), "the thread runs")
        loader = nil
        XCTAssertTrue(
            server.wait { _ in !FileManager.default.fileExists(atPath: "/proc/self/task/\(tid)") },
            "the transport's thread ended with its loader")
        // The download it made outlives it.
        XCTAssertEqual(data.flatMap(NetworkFixtures.contents), try NetworkFixtures.jpeg())
    }

    func testALoaderStartsItsThreadWithItsFirstDownload() async throws {
        server.route("/photo.jpg", .ok(try NetworkFixtures.jpeg()))
        let before = Self.transportThreads()
        let loader = makeLoader()
        XCTAssertEqual(loader.metrics.httpRequests, 0)
        XCTAssertTrue(Self.transportThreads().isSubset(of: before), "no thread for a loader that has not downloaded")
        _ = try await load(loader, "/photo.jpg")
        XCTAssertFalse(Self.transportThreads().isSubset(of: before), "the first download started one")
    }

    /// An option libcurl refuses (a URL over its 8 MB input limit) fails
    /// that transfer with a typed error, before anything is sent, and only
    /// that one: its handle is freed, and the loads after it succeed.
    func testAnOptionLibcurlRefusesFailsThatTransferOnly() async throws {
        let jpeg = try NetworkFixtures.jpeg()
        server.route("/photo.jpg", .ok(jpeg))
        let loader = makeLoader()
        let long = try XCTUnwrap(
            URL(string: server.url("/photo.jpg").absoluteString + "?" + String(repeating: "a", count: 8_000_001)))
        for round in 0..<3 {
            do throws(VipsError) {
                let data = try await loader.loadData(for: .url(long))
                XCTFail("round \(round): loaded \(data.byteCount) bytes")
            } catch {
                XCTAssertEqual(error.kind, .invalidArgument, "round \(round): \(error.message.prefix(200))")
                XCTAssertTrue(error.message.contains("libcurl refused the URL"), "\(error.message.prefix(200))")
            }
            let data = try await load(loader, "/photo.jpg")
            XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg, "round \(round)")
        }
        XCTAssertEqual(server.requestCount("/photo.jpg"), 3, "the long URL was never sent")
    }

    /// The task IDs of this process's threads named `vipsload-http`.
    private static func transportThreads() -> Set<String> {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return Set(
            tasks.filter {
                let name = try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8)
                return name?.trimmingCharacters(in: .whitespacesAndNewlines) == "vipsload-http"
            })
    }

    /// The calling thread's kernel task ID and name (`/proc/thread-self`).
    private static func currentThread() -> (task: String, name: String) {
        let link = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")) ?? ""
        let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
        return (String(link.split(separator: "/").last ?? ""), name.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}

/// A TCP listener on 127.0.0.1 that writes a plain-HTTP answer to every
/// connection at once, without reading: what a TLS client meets when it
/// speaks to a server without TLS.
private final class PlainAnswerListener: Sendable {
    let port: UInt16
    private let listener: Int32
    private let accepted = LockedState(0)

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 8) == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = UInt16(bigEndian: actual.sin_port)
        Thread.detachNewThread { [self] in
            let answer = Array("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
            while true {
                let client = accept(listener, nil, nil)
                if client < 0 { return }
                accepted.withLock { $0 += 1 }
                _ = answer.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                shutdown(client, Int32(SHUT_WR))
                close(client)
            }
        }
    }

    var connections: Int { accepted.withLock { $0 } }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }
}
