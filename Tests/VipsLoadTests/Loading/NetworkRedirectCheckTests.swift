import Foundation
import TestSupport
import XCTest

@testable import VipsLoad

/// `HTTPDataLoader.Configuration.allowsRedirect` and
/// `ImageRequest.allowsRedirect`: the owner vets every redirect's target
/// before it is requested. Origin A (the case's `server`) redirects to
/// origin B (`other`, another port of 127.0.0.1); a check that admits only
/// A's port must refuse the redirect with `.sourceNotAllowed`, and B must
/// never see a connection (issue 30, finding 4: the address policy alone let
/// the redirect through, since both origins share an address).
final class NetworkRedirectCheckTests: NetworkTestCase {
    private var other: TestHTTPServer!
    private var jpeg: Data!

    override func setUpWithError() throws {
        try super.setUpWithError()
        other = try TestHTTPServer()
        jpeg = try NetworkFixtures.jpeg()
        other.route("/b.jpg", .ok(jpeg))
        server.route("/a.jpg", .ok(jpeg))
    }

    override func tearDown() {
        other?.stop()
        other = nil
        super.tearDown()
    }

    /// Admits origin A's port only, recording every URL it is asked about.
    private func onlyOriginA(_ asked: LockedState<[URL]>) -> @Sendable (URL) -> Bool {
        let port = Int(server.port)
        return { url in
            asked.withLock { $0.append(url) }
            return url.port == port
        }
    }

    /// Every redirect status, to B by an absolute URL and by a network-path
    /// reference (`//host:port/path`, resolved against A's URL): refused
    /// before B is contacted, with an error whose underlying one names the target.
    func testARedirectTheCheckRefusesIsNeverRequested() async throws {
        let asked = LockedState<[URL]>([])
        let loader = makeLoader { $0.allowsRedirect = onlyOriginA(asked) }
        let targets = [other.url("/b.jpg").absoluteString, "//127.0.0.1:\(other.port)/b.jpg"]
        var index = 0
        for status in [301, 302, 307, 308] {
            for target in targets {
                index += 1
                server.route("/r\(index)", .redirect(to: target, status: status))
                do throws(VipsError) {
                    let data = try await loader.loadData(for: .url(server.url("/r\(index)")))
                    XCTFail("\(status) to \(target): loaded \(data.byteCount) bytes")
                } catch {
                    XCTAssertEqual(error.kind, .sourceNotAllowed, "\(status) to \(target): \(error)")
                    XCTAssertTrue(error.message.contains("redirect to"), error.message)
                    XCTAssertEqual(
                        (error.underlying as? VipsError)?.source, other.url("/b.jpg").absoluteString, "\(error)")
                }
                XCTAssertEqual(server.requestCount("/r\(index)"), 1, "the first request is sent")
            }
        }
        XCTAssertEqual(other.connectionCount, 0, "origin B was never connected to")
        XCTAssertEqual(other.totalRequestCount, 0)
        // The check saw each target resolved to an absolute URL.
        XCTAssertEqual(asked.withLock { $0 }, Array(repeating: other.url("/b.jpg"), count: index))
        XCTAssertEqual(loader.metrics.failures, index)
        XCTAssertEqual(leftoverFiles(), [])
    }

    /// A relative `Location` on an allowed origin is resolved before it is
    /// checked: a check refusing a path prefix refuses it, and allows the rest.
    func testARelativeRedirectIsCheckedResolved() async throws {
        server.route("/private/secret.jpg", .ok(jpeg))
        server.route("/to-private", .redirect(to: "private/secret.jpg", status: 302))
        server.route("/to-public", .redirect(to: "/a.jpg", status: 301))
        let asked = LockedState<[URL]>([])
        let loader = makeLoader { configuration in
            configuration.allowsRedirect = { url in
                asked.withLock { $0.append(url) }
                return !url.path.hasPrefix("/private/")
            }
        }
        await assertLoadFails(loader, "/to-private", kind: .sourceNotAllowed, containing: "redirect to")
        XCTAssertEqual(server.requestCount("/private/secret.jpg"), 0)
        let data = try await load(loader, "/to-public")
        XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg)
        XCTAssertEqual(asked.withLock { $0 }, [server.url("/private/secret.jpg"), server.url("/a.jpg")])
    }

    /// With both origins allowed the redirects are followed; without a
    /// check (the default) too.
    func testARedirectTheCheckAllowsIsFollowed() async throws {
        XCTAssertNil(HTTPDataLoader.Configuration().allowsRedirect)
        let ports = [Int(server.port), Int(other.port)]
        let checked = makeLoader { $0.allowsRedirect = { url in url.port.map(ports.contains) ?? false } }
        let unchecked = makeLoader()
        for (index, status) in [301, 302, 307, 308].enumerated() {
            server.route("/r\(index)", .redirect(to: "//127.0.0.1:\(other.port)/b.jpg", status: status))
            for loader in [checked, unchecked] {
                let data = try await load(loader, "/r\(index)")
                XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg, "\(status)")
            }
        }
        XCTAssertEqual(other.requestCount("/b.jpg"), 8)
    }

    /// In a pipeline, the request's own check applies to its download, after
    /// the pipeline's: a redirect must pass both.
    func testAPipelineRequestsCheckAppliesBesideThePipelines() async throws {
        server.route("/r", .redirect(to: other.url("/b.jpg").absoluteString, status: 302))
        var configuration = ImagePipeline.Configuration(memoryCache: nil)
        configuration.http.temporaryDirectory = downloadDirectory
        configuration.http.allowsRedirect = { _ in true }
        let pipeline = ImagePipeline(configuration: configuration)
        let asked = LockedState<[URL]>([])
        var request = ImageRequest(url: server.url("/r"))
        request.allowsRedirect = onlyOriginA(asked)
        do throws(VipsError) {
            let data = try await pipeline.data(for: request)
            XCTFail("loaded \(data.byteCount) bytes")
        } catch {
            XCTAssertEqual(error.kind, .sourceNotAllowed, "\(error)")
        }
        XCTAssertEqual(asked.withLock { $0 }, [other.url("/b.jpg")])
        XCTAssertEqual(other.connectionCount, 0)

        // The pipeline's check refuses what the request's would allow.
        var refusing = configuration
        refusing.http.allowsRedirect = { _ in false }
        var allowed = ImageRequest(url: server.url("/r"))
        allowed.allowsRedirect = { _ in true }
        do throws(VipsError) {
            let data = try await ImagePipeline(configuration: refusing).data(for: allowed)
            XCTFail("loaded \(data.byteCount) bytes")
        } catch {
            XCTAssertEqual(error.kind, .sourceNotAllowed, "\(error)")
        }
        XCTAssertEqual(other.connectionCount, 0)

        // Both allow: followed.
        let data = try await pipeline.data(for: allowed)
        XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg)
        XCTAssertEqual(other.requestCount("/b.jpg"), 1)
    }
}
