import Foundation
import TestSupport
import VipsCore
import VipsLoad
import VipsSynthesis
import XCTest

@testable import VipsHTTP
@testable import VipsServe

/// Image URLs end to end: a real `ImageServer` on 127.0.0.1 over a real
/// pipeline, real files under a root, a real origin (`TestHTTPServer`) for
/// remote sources, and real connections. Every status of the server's table,
/// signatures, traversal, SSRF, `304`, `Accept` negotiation, `HEAD`,
/// coalescing, hang-ups and the queue bound.
final class ImageServingTests: XCTestCase {
    private var root: URL!
    private var servers: [ImageServer] = []
    private var origins: [TestHTTPServer] = []
    /// Origin responses held until the test opens this gate (released in tearDown).
    private let gate = DispatchSemaphore(value: 0)
    private var gateOpened = false

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("vipsserve-images-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try ImageSynthesizer.data(width: 800, height: 600, seed: 1, format: .jpeg(quality: 90))
            .write(to: root.appendingPathComponent("photo.jpg"))
        try ImageSynthesizer.data(width: 300, height: 200, seed: 2, alpha: true, format: .png())
            .write(to: root.appendingPathComponent("alpha.png"))
        let jpeg = try Data(contentsOf: root.appendingPathComponent("photo.jpg"))
        try jpeg.prefix(jpeg.count / 3).write(to: root.appendingPathComponent("truncated.jpg"))
        try Data("<html>not an image</html>".utf8).write(to: root.appendingPathComponent("page.jpg"))
        try Data([0xFF, 0xD8, 0xFF, 0xE0] + [UInt8](repeating: 0x41, count: 600))
            .write(to: root.appendingPathComponent("corrupt.jpg"))
    }

    override func tearDown() async throws {
        if !gateOpened { openGate() }
        for server in servers { await server.shutdown() }
        servers = []
        for origin in origins { origin.stop() }
        origins = []
        if let root { try? FileManager.default.removeItem(at: root) }
    }

    private func openGate() {
        gateOpened = true
        for _ in 0..<256 { gate.signal() }
    }

    private func makeServer(
        key: URLSigningKey? = nil, allowing hosts: [String] = [], privateSources: Bool = true,
        _ configure: (inout ImageServer.Configuration) -> Void = { _ in },
        pipeline change: (inout ImagePipeline.Configuration) -> Void = { _ in }
    ) throws -> ImageServer {
        var pipeline = ImagePipeline.Configuration(decodeConcurrency: 1)
        pipeline.http.addressPolicy = privateSources ? .unrestricted : .publicOnly
        change(&pipeline)
        var configuration = ImageServer.Configuration()
        configuration.port = 0
        configuration.urls = ProcessingURLParser(
            signingKeys: key.map { [$0] } ?? [],
            sources: try SourcePolicy(localRoot: root.path, allowedSources: hosts.map { try SourcePattern($0) }))
        configure(&configuration)
        let server = try ImageServer(pipeline: ImagePipeline(configuration: pipeline), configuration: configuration)
        servers.append(server)
        return server
    }

    /// An origin serving `photo.jpg` at `/photo.jpg` and `/held.jpg` (held at the gate), and a 500 at `/broken.jpg`.
    private func makeOrigin(arrived: XCTestExpectation? = nil) throws -> TestHTTPServer {
        let origin = try TestHTTPServer()
        origins.append(origin)
        // A retried or repeated download arrives again: only the first one matters.
        arrived?.assertForOverFulfill = false
        let photo = try Data(contentsOf: root.appendingPathComponent("photo.jpg"))
        origin.route("/photo.jpg", .ok(photo, contentType: "image/jpeg"))
        origin.route("/broken.jpg", .status(500, body: "origin failure"))
        let gate = self.gate
        origin.route("/held.jpg") { _ in
            arrived?.fulfill()
            gate.wait()
            return .ok(photo, contentType: "image/jpeg")
        }
        return origin
    }

    private func get(
        _ server: ImageServer, _ target: String, method: String = "GET", headers: [String: String] = [:]
    ) throws -> TestConnection.Response {
        try TestConnection(port: server.port).request(target, method: method, headers: headers)
    }

    /// A counter's value in `/metrics` (the whole line's name, labels included).
    private func metric(_ server: ImageServer, _ name: String) -> Double {
        let line = server.metricsText.split(separator: "\n").first { $0.hasPrefix(name + " ") }
        return Double(line?.split(separator: " ").last ?? "") ?? -1
    }

    /// Waits until `condition` holds (the server's own counters change as requests move).
    private func waitFor(_ what: String, _ condition: () -> Bool) async {
        let deadline = Date().addingTimeInterval(60)
        while !condition(), Date() < deadline { await Task.yield() }
        XCTAssertTrue(condition(), what)
    }

    private func assertNoMachinePath(_ response: TestConnection.Response, line: UInt = #line) {
        XCTAssertFalse(response.text.contains(root.path), "no path of the machine: \(response.text)", line: line)
        XCTAssertFalse(response.text.contains("/tmp"), "no path of the machine: \(response.text)", line: line)
        XCTAssertFalse(response.text.contains("vips_"), "no libvips internals: \(response.text)", line: line)
    }

    // MARK: - Statuses

    func testEveryStatusOfTheTableOverHTTP() async throws {
        let origin = try makeOrigin()
        let server = try makeServer(
            allowing: ["127.0.0.1:*"],
            pipeline: { pipeline in pipeline.decodeOptions.limits.maxPixelCount = 400 * 400 })
        let photo = "/insecure/rs:fit:100:100/plain/local:///photo.jpg@jpg"
        let ok = try get(server, "/insecure/rs:fit:100:100/plain/local:///alpha.png@png")
        XCTAssertEqual(ok.status, 200)
        XCTAssertEqual(ok.header("Content-Type"), "image/png")
        XCTAssertEqual(Int(ok.header("Content-Length") ?? ""), ok.body.count)
        origin.route("/forbidden.jpg", .status(403, body: "no"))
        // imgproxy's codes: 404 for a malformed URL, option or disallowed source, 422 for a source it
        // will not process (its size, its format), an origin's 4xx passed on, 502 for its 5xx.
        let cases: [(String, Int)] = [
            ("/insecure/rs:fit:100:nope/plain/local:///alpha.png", 404),
            ("/insecure/bogus:1/plain/local:///alpha.png", 404),
            ("/insecure/w:100/plain/ftp://127.0.0.1/x.jpg", 404),
            ("/insecure/w:100/plain/http://example.invalid/x.jpg", 404),
            ("/insecure/w:100/plain/local:///missing.jpg", 404),
            (photo, 422),
            ("/insecure/w:100/plain/local:///page.jpg", 422),
            ("/insecure/w:100/plain/local:///corrupt.jpg", 422),
            ("/insecure/w:100/plain/local:///alpha.png@svg", 422),
            ("/insecure/w:100/plain/\(origin.url("/broken.jpg").absoluteString)", 502),
            ("/insecure/w:100/plain/\(origin.url("/absent.jpg").absoluteString)", 404),
            ("/insecure/w:100/plain/\(origin.url("/forbidden.jpg").absoluteString)", 403)
        ]
        for (target, status) in cases {
            let response = try get(server, target)
            XCTAssertEqual(response.status, status, "\(target): \(response.text)")
            XCTAssertEqual(response.header("Content-Type"), "text/plain; charset=utf-8", target)
            XCTAssertFalse(response.text.isEmpty, target)
            assertNoMachinePath(response)
        }
        // A truncated JPEG: libvips' lenient default decodes what is there (422 only in strict mode)
        // or refuses it; either way it is never a 5xx.
        let truncated = try get(server, "/insecure/w:100/plain/local:///truncated.jpg")
        XCTAssertTrue([200, 422].contains(truncated.status), "\(truncated.status) \(truncated.text)")
        // No failure was cached: the same URL fails again and renders again.
        let renders = metric(server, "vipsload_renders_total")
        XCTAssertEqual(try get(server, "/insecure/w:100/plain/local:///corrupt.jpg").status, 422)
        XCTAssertEqual(metric(server, "vipsload_renders_total"), renders + 1)
    }

    func testATimedOutRenderIs504AndAFullQueueIs429WithRetryAfter() async throws {
        let arrived = XCTestExpectation(description: "the origin has the held request")
        let origin = try makeOrigin(arrived: arrived)
        let server = try makeServer(allowing: ["127.0.0.1:*"]) { configuration in
            configuration.queueLimit = 1
            configuration.requestTimeout = .seconds(1)
        }
        let held = try TestConnection(port: server.port)
        try held.sendRequest("/insecure/w:100/plain/\(origin.url("/held.jpg").absoluteString)")
        await fulfillment(of: [arrived], timeout: 60)
        // The one render the queue admits is taken: another image is refused at once.
        let refused = try get(server, "/insecure/w:120/plain/local:///photo.jpg")
        XCTAssertEqual(refused.status, 429)
        XCTAssertEqual(refused.header("Retry-After"), "1")
        XCTAssertEqual(metric(server, "vipsload_rejected_total"), 1)
        // The held request's time runs out.
        let timedOut = try held.readResponse()
        XCTAssertEqual(timedOut.status, 504)
        assertNoMachinePath(timedOut)
        XCTAssertEqual(metric(server, "vipsload_timeouts_total"), 1)
        openGate()
        await waitFor("the abandoned render leaves the queue") { metric(server, "vipsload_queue_depth") == 0 }
        XCTAssertEqual(try get(server, "/insecure/w:120/plain/local:///photo.jpg").status, 200)
    }

    // MARK: - Signatures

    func testSignaturesValidTamperedAndMissing() throws {
        let key = try URLSigningKey(hexKey: "0123456789abcdef", hexSalt: "fedcba9876543210")
        let server = try makeServer(key: key)
        let path = "/rs:fit:100:100/plain/local:///photo.jpg@webp"
        let signature = key.signature(forPath: path)
        let signed = try get(server, "/\(signature)\(path)")
        XCTAssertEqual(signed.status, 200)
        XCTAssertEqual(signed.header("Content-Type"), "image/webp")
        XCTAssertEqual(signed.header("Cache-Control"), "public, max-age=31536000", "a signed URL: a year")
        var tampered = Array(signature)
        tampered[3] = tampered[3] == "A" ? "B" : "A"
        for target in [
            "/\(String(tampered))\(path)", "/insecure\(path)",
            "/\(signature)/rs:fit:101:100/plain/local:///photo.jpg@webp",
            path
        ] {
            let response = try get(server, target)
            XCTAssertEqual(response.status, 403, "\(target): \(response.text)")
            assertNoMachinePath(response)
        }
        let open = try makeServer()
        let unsigned = try get(open, "/insecure\(path)")
        XCTAssertEqual(unsigned.status, 200, "without a key any signature segment is accepted")
        XCTAssertEqual(unsigned.header("Cache-Control"), "public, max-age=3600", "unsigned: an hour")
    }

    // MARK: - Sources

    func testTraversalInEveryEncodingIsRefusedOverHTTP() throws {
        let outside = FileManager.default.temporaryDirectory.appendingPathComponent("vipsserve-outside-\(UUID())")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: outside) }
        try FileManager.default.copyItem(
            at: root.appendingPathComponent("photo.jpg"), to: outside.appendingPathComponent("secret.jpg"))
        try FileManager.default.createSymbolicLink(
            at: root.appendingPathComponent("link.jpg"),
            withDestinationURL: outside.appendingPathComponent("secret.jpg"))
        let server = try makeServer()
        let name = outside.lastPathComponent
        let base64 = { (text: String) in
            Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        for target in [
            "/insecure/w:50/plain/local:///../\(name)/secret.jpg",
            "/insecure/w:50/plain/local:///%2e%2e/\(name)/secret.jpg",
            "/insecure/w:50/plain/local:///%252e%252e/\(name)/secret.jpg",
            "/insecure/w:50/plain/local:///..%2F\(name)%2Fsecret.jpg",
            "/insecure/w:50/plain/local:///..%5C\(name)%5Csecret.jpg",
            "/insecure/w:50/plain/local:///photo.jpg%00.png",
            "/insecure/w:50/plain/local:///link.jpg",
            "/insecure/w:50/\(base64("local:///../\(name)/secret.jpg")).jpg",
            "/insecure/w:50/plain/local://\(outside.path)/secret.jpg"
        ] {
            let response = try get(server, target)
            XCTAssertTrue([400, 403, 404].contains(response.status), "\(target): \(response.status) \(response.text)")
            XCTAssertNotEqual(response.status, 200, target)
            assertNoMachinePath(response)
        }
        XCTAssertEqual(metric(server, "vipsload_decodes_total"), 0, "nothing outside the root was decoded")
    }

    func testPrivateAddressesAreRefusedUnlessAllowed() throws {
        let origin = try makeOrigin()
        let target = "/insecure/w:100/plain/\(origin.url("/photo.jpg").absoluteString)"
        let guarded = try makeServer(allowing: ["127.0.0.1:*"], privateSources: false)
        let refused = try get(guarded, target)
        XCTAssertEqual(refused.status, 404, refused.text)
        assertNoMachinePath(refused)
        XCTAssertEqual(origin.requestCount("/photo.jpg"), 0, "no request reached the loopback origin")
        let notAllowedHost = try makeServer(allowing: ["images.example.com"])
        XCTAssertEqual(try get(notAllowedHost, target).status, 404, "a host no pattern admits")
        XCTAssertEqual(origin.requestCount("/photo.jpg"), 0)
        let allowed = try makeServer(allowing: ["127.0.0.1:*"], privateSources: true)
        let served = try get(allowed, target)
        XCTAssertEqual(served.status, 200, served.text)
        XCTAssertEqual(origin.requestCount("/photo.jpg"), 1)
        XCTAssertEqual(served.header("Cache-Control"), "public, max-age=3600")
    }

    /// A redirect must pass the source policy as a direct request does: with
    /// only origin A's port allowed, A's redirects (301, 302, 307, 308,
    /// absolute and network-path `Location`s) to origin B on another port of
    /// the same address are 404, as a direct request for B is, with no URL in
    /// the body, and B is never connected to; with both allowed they are
    /// followed. The server is made here from a pipeline whose HTTP
    /// configuration has no redirect check of its own: the policy applies
    /// however an `ImageServer` is built.
    func testRedirectsMustPassTheSourcePolicy() throws {
        let first = try makeOrigin()
        let second = try makeOrigin()
        var targets: [String] = []
        for (index, status) in [301, 302, 307, 308].enumerated() {
            first.route("/abs\(index).jpg", .redirect(to: second.url("/photo.jpg").absoluteString, status: status))
            first.route("/net\(index).jpg", .redirect(to: "//127.0.0.1:\(second.port)/photo.jpg", status: status))
            targets += ["/abs\(index).jpg", "/net\(index).jpg"]
        }
        let guarded = try makeServer(allowing: ["127.0.0.1:\(first.port)"])
        XCTAssertNil(guarded.pipeline.configuration.http.allowsRedirect)
        let direct = try get(guarded, "/insecure/w:100/plain/\(second.url("/photo.jpg").absoluteString)")
        XCTAssertEqual(direct.status, 404, direct.text)
        for path in targets {
            let refused = try get(guarded, "/insecure/w:100/plain/\(first.url(path).absoluteString)")
            XCTAssertEqual(refused.status, direct.status, "\(path): \(refused.text)")
            XCTAssertFalse(refused.text.contains("127.0.0.1"), "no URL in the body: \(refused.text)")
            assertNoMachinePath(refused)
            XCTAssertEqual(first.requestCount(path), 1, path)
        }
        XCTAssertEqual(second.connectionCount, 0, "origin B was never connected to")

        let open = try makeServer(allowing: ["127.0.0.1:\(first.port)", "127.0.0.1:\(second.port)"])
        for path in targets {
            let served = try get(open, "/insecure/w:100/plain/\(first.url(path).absoluteString)")
            XCTAssertEqual(served.status, 200, "\(path): \(served.text)")
        }
        XCTAssertEqual(second.requestCount("/photo.jpg"), targets.count)
    }

    // MARK: - Responses

    func testEntityTagsGive304WithoutProcessingAndHEADHasNoBody() throws {
        let server = try makeServer()
        let target = "/insecure/rs:fill:64:64/plain/local:///photo.jpg@jpg"
        let first = try get(server, target)
        XCTAssertEqual(first.status, 200)
        let tag = try XCTUnwrap(first.header("ETag"))
        XCTAssertTrue(tag.hasPrefix("\"") && tag.hasSuffix("\""), "a strong tag: \(tag)")
        XCTAssertNil(first.header("Vary"), "the URL names the format")
        let renders = metric(server, "vipsload_renders_total")
        let decodes = metric(server, "vipsload_decodes_total")
        let revalidated = try get(server, target, headers: ["If-None-Match": "\"other\", \(tag)"])
        XCTAssertEqual(revalidated.status, 304)
        XCTAssertTrue(revalidated.body.isEmpty)
        XCTAssertEqual(revalidated.header("ETag"), tag)
        XCTAssertEqual(metric(server, "vipsload_not_modified_total"), 1)
        XCTAssertEqual(metric(server, "vipsload_renders_total"), renders)
        XCTAssertEqual(metric(server, "vipsload_decodes_total"), decodes)
        XCTAssertEqual(try get(server, target, headers: ["If-None-Match": "\"other\""]).status, 200)
        let other = try get(server, "/insecure/rs:fill:65:64/plain/local:///photo.jpg@jpg")
        XCTAssertNotEqual(other.header("ETag"), tag, "other options, another tag")

        let head = try get(server, target, method: "HEAD")
        XCTAssertEqual(head.status, 200)
        XCTAssertTrue(head.body.isEmpty)
        XCTAssertEqual(head.header("Content-Length"), String(first.body.count))
        XCTAssertEqual(head.header("ETag"), tag)
        // A replaced file is another representation.
        try ImageSynthesizer.data(width: 700, height: 600, seed: 9, format: .jpeg(quality: 90))
            .write(to: root.appendingPathComponent("photo.jpg"))
        XCTAssertNotEqual(try get(server, target).header("ETag"), tag)
    }

    func testAcceptChoosesAVIFThenWebPThenTheSourceFamilyWithVary() throws {
        let server = try makeServer { configuration in
            configuration.output.autoAVIF = true
            configuration.output.autoWebP = true
        }
        let photo = "/insecure/rs:fit:80:80/plain/local:///photo.jpg"
        let alpha = "/insecure/rs:fit:80:80/plain/local:///alpha.png"
        let cases: [(String, String?, String)] = [
            (photo, "image/avif,image/webp,image/apng,*/*;q=0.8", "image/avif"),
            (photo, "image/webp,*/*", "image/webp"),
            (photo, "image/avif;q=0,image/webp", "image/webp"),
            (photo, "*/*", "image/jpeg"),
            (photo, nil, "image/jpeg"),
            (alpha, "image/*", "image/png"),
            ("\(photo)@png", "image/avif,image/webp", "image/png")
        ]
        var tags: Set<String> = []
        for (target, accept, type) in cases {
            let response = try get(server, target, headers: accept.map { ["Accept": $0] } ?? [:])
            XCTAssertEqual(response.status, 200, target)
            XCTAssertEqual(response.header("Content-Type"), type, "\(target) Accept: \(accept ?? "none")")
            XCTAssertEqual(ImageFormat.sniff(response.body.prefix(64)).map(RenderJob.contentType), type)
            XCTAssertEqual(response.header("Vary"), target.hasSuffix("@png") ? nil : "Accept", target)
            tags.insert(response.header("ETag") ?? "")
        }
        XCTAssertEqual(tags.count, 5, "one tag per representation: avif, webp, jpeg, png of alpha, explicit png")
    }

    // MARK: - The pipeline inside

    func testFiftyIdenticalConcurrentRequestsCauseOneDecode() async throws {
        let arrived = XCTestExpectation(description: "the origin has the first request")
        let origin = try makeOrigin(arrived: arrived)
        let server = try makeServer(allowing: ["127.0.0.1:*"])
        let target = "/insecure/rs:fit:128:128/plain/\(origin.url("/held.jpg").absoluteString)@webp"
        let connections = try (0..<50).map { _ in try TestConnection(port: server.port) }
        for connection in connections { try connection.sendRequest(target) }
        await fulfillment(of: [arrived], timeout: 60)
        await waitFor("49 requests joined the first") { metric(server, "vipsload_coalesced_total") >= 49 }
        openGate()
        var bodies: Set<Data> = []
        for connection in connections {
            let response = try connection.readResponse()
            XCTAssertEqual(response.status, 200)
            bodies.insert(response.body)
        }
        XCTAssertEqual(bodies.count, 1, "every client got the same bytes")
        XCTAssertEqual(metric(server, "vipsload_decodes_total"), 1)
        XCTAssertEqual(metric(server, "vipsload_renders_total"), 1)
        XCTAssertEqual(origin.requestCount("/held.jpg"), 1, "one download")
        XCTAssertEqual(try get(server, target).status, 200)
        XCTAssertEqual(metric(server, "vipsload_cache_hits_total{tier=\"memory\"}"), 1, "the next one, from memory")
        XCTAssertEqual(metric(server, "vipsload_decodes_total"), 1)
    }

    func testAClientThatHangsUpCancelsItsWorkAndFreesTheDecodeLane() async throws {
        let arrived = XCTestExpectation(description: "the origin has the request")
        let origin = try makeOrigin(arrived: arrived)
        let server = try makeServer(allowing: ["127.0.0.1:*"])
        let leaving = try TestConnection(port: server.port)
        try leaving.sendRequest("/insecure/w:100/plain/\(origin.url("/held.jpg").absoluteString)")
        await fulfillment(of: [arrived], timeout: 60)
        leaving.reset()
        await waitFor("the hang-up is counted") { metric(server, "vipsload_cancelled_total") == 1 }
        await waitFor("no render is left") { metric(server, "vipsload_queue_depth") == 0 }
        await waitFor("the pipeline cancelled the download nobody waits for") {
            metric(server, "vipsload_pipeline_cancelled_total") >= 1
        }
        // The only decode slot (decodeConcurrency 1) serves the next request while the origin still holds.
        let next = try get(server, "/insecure/w:90/plain/local:///photo.jpg")
        XCTAssertEqual(next.status, 200)
        XCTAssertEqual(metric(server, "vipsload_decodes_total"), 1, "the abandoned source was never decoded")
        openGate()
    }

    func testAProcessedDiskCacheServesARestartedServerWithoutDecoding() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("vipsserve-disk-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        let target = "/insecure/rs:fit:120:120/plain/local:///photo.jpg@webp"
        let first = try makeServer { $0.dataCache = try? DiskCache(directory: folder, sizeLimit: 64 << 20) }
        let made = try get(first, target)
        XCTAssertEqual(made.status, 200)
        XCTAssertEqual(metric(first, "vipsload_decodes_total"), 1)
        await first.shutdown()
        let second = try makeServer { $0.dataCache = try? DiskCache(directory: folder, sizeLimit: 64 << 20) }
        let again = try get(second, target)
        XCTAssertEqual(again.status, 200)
        XCTAssertEqual(again.body, made.body)
        XCTAssertEqual(again.header("ETag"), made.header("ETag"))
        XCTAssertEqual(metric(second, "vipsload_decodes_total"), 0, "nothing decoded after the restart")
        XCTAssertEqual(metric(second, "vipsload_cache_hits_total{tier=\"disk\"}"), 1)
    }
}
