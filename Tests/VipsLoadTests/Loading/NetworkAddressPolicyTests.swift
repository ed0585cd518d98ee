import Foundation
import TestSupport
import VipsLoad
import XCTest

/// `HTTPDataLoader.Configuration.addressPolicy` against real servers on the
/// loopback: refused before any connection under `.publicOnly` (the
/// transport judges each address it is about to connect to), allowed by an
/// exception, and checked again for every redirect's target. No public host is
/// reachable here, so the redirect tests allow exactly the first server's
/// address and send the redirect to a second server on another loopback
/// address (127.0.0.2) that would answer: without the check the load would succeed.
final class NetworkAddressPolicyTests: NetworkTestCase {
    private var second: TestHTTPServer!

    override func setUpWithError() throws {
        try super.setUpWithError()
        second = try TestHTTPServer(host: "127.0.0.2")
    }

    override func tearDown() {
        second?.stop()
        second = nil
        super.tearDown()
    }

    private func policy(allowing networks: String...) throws -> SourceAddressPolicy {
        SourceAddressPolicy(
            allowedScopes: [.public], allowedNetworks: try networks.map { try XCTUnwrap(IPNetwork($0)) })
    }

    func testTheDefaultAllowsLoopback() async throws {
        XCTAssertTrue(HTTPDataLoader.Configuration().addressPolicy.isUnrestricted)
        server.route("/a.jpg", .ok(try NetworkFixtures.jpeg()))
        _ = try await load(makeLoader(), "/a.jpg")
        XCTAssertEqual(server.requestCount("/a.jpg"), 1)
    }

    func testPublicOnlyRefusesLoopbackBeforeConnecting() async throws {
        server.route("/a.jpg", .ok(try NetworkFixtures.jpeg()))
        let loader = makeLoader { $0.addressPolicy = .publicOnly }
        await assertLoadFails(loader, "/a.jpg", kind: .sourceNotAllowed, containing: "127.0.0.1, a loopback address")
        XCTAssertEqual(server.totalRequestCount, 0, "the refused request never reaches the server")
        XCTAssertEqual(loader.metrics.httpRequests, 0)
        XCTAssertEqual(loader.metrics.failures, 1)
        XCTAssertEqual(leftoverFiles(), [])
    }

    /// The policy judges the address of the connection before it is made: a
    /// refused address gets no TCP connection at all (a check once connected,
    /// such as libcurl's pre-request callback, would leave one in the
    /// listener's queue).
    func testARefusedAddressIsNeverConnectedTo() async throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(listener, 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.3")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(listener, pointer, length) == 0 && listen(listener, 16) == 0
                    && getsockname(listener, pointer, &length) == 0
            }
        }
        XCTAssertTrue(bound, "listening on 127.0.0.3")
        XCTAssertEqual(fcntl(listener, F_SETFL, fcntl(listener, F_GETFL) | O_NONBLOCK), 0)
        let port = UInt16(bigEndian: address.sin_port)
        let loader = makeLoader { $0.addressPolicy = .publicOnly }
        let url = try XCTUnwrap(URL(string: "http://127.0.0.3:\(port)/a.jpg"))
        do {
            let data = try await loader.loadData(for: .url(url))
            XCTFail("loaded \(data.byteCount) bytes")
        } catch {
            XCTAssertEqual(error.kind, .sourceNotAllowed, "\(error)")
            XCTAssertTrue(error.message.contains("127.0.0.3, a loopback address"), error.message)
        }
        // The kernel completes a handshake without accept(): a connection made would be waiting here.
        let accepted = accept(listener, nil, nil)
        let reason = errno
        if accepted >= 0 { close(accepted) }
        XCTAssertEqual(accepted, -1, "a connection reached the refused address")
        XCTAssertTrue(reason == EAGAIN || reason == EWOULDBLOCK, "accept: errno \(reason)")
    }

    /// A proxy named by the environment is not used under a policy: it would
    /// resolve and connect to the origin itself, out of the policy's sight.
    /// The "proxy" is the first server (its address allowed); the origin,
    /// 127.0.0.2, is not allowed. In a child process, whose environment names
    /// the proxy (libcurl reads `http_proxy` for each transfer).
    func testAProxyFromTheEnvironmentIsNotUsedUnderAPolicy() throws {
        second.route("/b.jpg", .ok(try NetworkFixtures.jpeg()))
        let proxy = "http://127.0.0.1:\(server.port)"
        let child = try TestChildProcess(
            role: "policy-load",
            environment: [
                "http_proxy": proxy, "all_proxy": proxy, "VIPSLOAD_TEST_URL": second.url("/b.jpg").absoluteString,
                "VIPSLOAD_TEST_ALLOW": "127.0.0.1/32", "VIPSLOAD_TEST_DIR": downloadDirectory.path
            ])
        defer { child.kill() }
        let line = try XCTUnwrap(
            child.waitForReport { $0.hasPrefix("LOADED") || $0.hasPrefix("FAILED") }, "child:\n\(child.transcript)")
        XCTAssertTrue(line.hasPrefix("FAILED sourceNotAllowed"), line)
        XCTAssertEqual(server.totalRequestCount, 0, "nothing went through the proxy")
        XCTAssertEqual(second.totalRequestCount, 0)
    }

    func testPublicOnlyRefusesEveryLoopbackSpelling() async throws {
        let loader = makeLoader { $0.addressPolicy = .publicOnly }
        // IPv6 loopback, IPv4-mapped, and numeric forms getaddrinfo reads as 127.0.0.1.
        for host in ["[::1]", "[::ffff:127.0.0.1]", "localhost", "0x7f000001", "2130706433", "0177.0.0.1", "127.1"] {
            let url = try XCTUnwrap(URL(string: "http://\(host):\(server.port)/a.jpg"))
            do throws(VipsError) {
                let data = try await loader.loadData(for: .url(url))
                XCTFail("\(host): loaded \(data.byteCount) bytes")
            } catch {
                XCTAssertEqual(error.kind, .sourceNotAllowed, "\(host): \(error)")
            }
        }
        XCTAssertEqual(server.totalRequestCount, 0)
    }

    func testAnExceptionAllowsExactlyItsNetwork() async throws {
        let jpeg = try NetworkFixtures.jpeg()
        server.route("/a.jpg", .ok(jpeg))
        second.route("/b.jpg", .ok(jpeg))
        let policy = try policy(allowing: "127.0.0.1/32")
        let loader = makeLoader { $0.addressPolicy = policy }
        let data = try await load(loader, "/a.jpg")
        XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg)
        do throws(VipsError) {
            _ = try await loader.loadData(for: .url(second.url("/b.jpg")))
            XCTFail("127.0.0.2 is outside the exception")
        } catch {
            XCTAssertEqual(error.kind, .sourceNotAllowed, "\(error)")
        }
        XCTAssertEqual(second.totalRequestCount, 0)
    }

    func testARedirectToARefusedAddressIsNotFollowed() async throws {
        let jpeg = try NetworkFixtures.jpeg()
        second.route("/b.jpg", .ok(jpeg))
        server.route("/r", .redirect(to: second.url("/b.jpg").absoluteString))
        let first = try policy(allowing: "127.0.0.1/32"), both = try policy(allowing: "127.0.0.1/32", "127.0.0.2/32")
        let refusing = makeLoader { $0.addressPolicy = first }
        await assertLoadFails(refusing, "/r", kind: .sourceNotAllowed, containing: "redirect refused")
        XCTAssertEqual(server.requestCount("/r"), 1, "the first request is allowed")
        XCTAssertEqual(second.totalRequestCount, 0, "the redirect target is never contacted")
        XCTAssertEqual(leftoverFiles(), [])

        // The same redirect, with the target's address allowed too: followed.
        let allowing = makeLoader { $0.addressPolicy = both }
        let data = try await load(allowing, "/r")
        XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg)
        XCTAssertEqual(second.requestCount("/b.jpg"), 1)
    }

    func testRedirectsToLoopbackSpellingsAreRefused() async throws {
        let policy = try policy(allowing: "127.0.0.1/32")
        let loader = makeLoader { $0.addressPolicy = policy }
        let targets = [
            "http://[::1]:\(second.port)/b.jpg", "http://[::ffff:127.0.0.2]:\(second.port)/b.jpg",
            "http://127.0.0.2:\(second.port)/b.jpg", "http://[64:ff9b::7f00:2]:\(second.port)/b.jpg"
        ]
        for (index, target) in targets.enumerated() {
            server.route("/r\(index)", .redirect(to: target, status: 307))
            await assertLoadFails(loader, "/r\(index)", kind: .sourceNotAllowed, containing: "redirect refused")
        }
        XCTAssertEqual(second.totalRequestCount, 0)
    }

    func testEveryHopOfARedirectChainIsChecked() async throws {
        let jpeg = try NetworkFixtures.jpeg()
        // 127.0.0.1 → 127.0.0.1 (allowed) → 127.0.0.2 (refused).
        server.route("/a", .redirect(to: "/b"))
        server.route("/b", .redirect(to: second.url("/c.jpg").absoluteString))
        second.route("/c.jpg", .ok(jpeg))
        let policy = try policy(allowing: "127.0.0.1/32")
        let loader = makeLoader { $0.addressPolicy = policy }
        await assertLoadFails(loader, "/a", kind: .sourceNotAllowed)
        XCTAssertEqual(server.requestCount("/a"), 1)
        XCTAssertEqual(server.requestCount("/b"), 1)
        XCTAssertEqual(second.totalRequestCount, 0)
    }

    func testAPipelineWithAPublicOnlyLoaderRefusesTheRequestAndCachesNothing() async throws {
        let jpeg = try NetworkFixtures.jpeg()
        server.route("/p.jpg", .ok(jpeg))
        let cache = try makeCache()
        var http = HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory)
        http.addressPolicy = .publicOnly
        let pipeline = ImagePipeline(configuration: .init(decodeConcurrency: 1, dataCache: cache, http: http))
        let request = ImageRequest(url: server.url("/p.jpg"), size: .maxPixelSize(64))
        for _ in 0..<2 {
            do throws(VipsError) {
                _ = try await pipeline.image(for: request)
                XCTFail("the pipeline loaded a loopback URL")
            } catch {
                XCTAssertEqual(error.kind, .sourceNotAllowed, "\(error)")
            }
        }
        XCTAssertEqual(server.totalRequestCount, 0)
        XCTAssertEqual(cache.currentSize(), 0, "nothing is stored")
    }

    func testAnUnresolvableHostIsANetworkFailure() async throws {
        let loader = makeLoader { $0.addressPolicy = .publicOnly }
        let url = try XCTUnwrap(URL(string: "http://no-such-host.invalid/a.jpg"))
        do throws(VipsError) {
            _ = try await loader.loadData(for: .url(url))
            XCTFail("resolved a .invalid name")
        } catch {
            XCTAssertEqual(error.kind, .network, "\(error)")
        }
    }
}
