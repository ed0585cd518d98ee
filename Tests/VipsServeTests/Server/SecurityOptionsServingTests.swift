import Foundation
import TestSupport
import VipsCore
import VipsLoad
import VipsSynthesis
import XCTest

@testable import VipsServe

/// imgproxy's security options and limits on a real `ImageServer` on
/// 127.0.0.1, with a generated 64×48 PNG: refused (403) unless the server
/// allows them, and a source over a limit (the server's, or the URL's in its
/// place) answered with 422, as imgproxy's tests expect.
final class SecurityOptionsServingTests: XCTestCase {
    private var root: URL!
    private var servers: [ImageServer] = []
    private var origins: [TestHTTPServer] = []
    private var photo = Data()

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("vipsserve-security-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        photo = try ImageSynthesizer.data(width: 64, height: 48, seed: 5, format: .png())
        try photo.write(to: root.appendingPathComponent("photo.png"))
    }

    override func tearDown() async throws {
        for server in servers { await server.shutdown() }
        servers = []
        origins = []
        if let root { try? FileManager.default.removeItem(at: root) }
    }

    private func makeServer(
        allowsSecurityOptions: Bool = true, limits: SecurityLimits = SecurityLimits()
    ) throws -> ImageServer {
        var configuration = ImageServer.Configuration()
        configuration.port = 0
        configuration.urls = ProcessingURLParser(
            sources: try SourcePolicy(localRoot: root.path, allowedSources: [try SourcePattern("127.0.0.1:*")]))
        configuration.urls.allowsSecurityOptions = allowsSecurityOptions
        configuration.urls.security = limits
        var pipeline = ImagePipeline.Configuration(decodeConcurrency: 1)
        pipeline.http.addressPolicy = .unrestricted
        let server = try ImageServer(pipeline: ImagePipeline(configuration: pipeline), configuration: configuration)
        servers.append(server)
        return server
    }

    private func status(_ server: ImageServer, _ target: String) throws -> Int {
        try TestConnection(port: server.port).request(target).status
    }

    func testSecurityOptionsAreRefusedWith403UnlessAllowed() throws {
        let server = try makeServer(allowsSecurityOptions: false)
        for option in ["msr:1", "max_src_resolution:1", "msfs:100", "maf:2", "mafr:1", "max_animation_frames:2"] {
            let response = try TestConnection(port: server.port).request("/_/\(option)/plain/local:///photo.png@png")
            XCTAssertEqual(response.status, 403, option)
            XCTAssertTrue(
                String(decoding: response.body, as: UTF8.self).contains("security options are not allowed"), option)
        }
        XCTAssertEqual(try status(server, "/_/w:20/plain/local:///photo.png@png"), 200)
    }

    /// processing_test.go's TestImageResolutionTooLarge, and the limit's edge (64 × 48 = 3,072 pixels).
    func testMaxSourceResolutionRefusesLargerSourcesWith422() throws {
        let server = try makeServer()
        XCTAssertEqual(try status(server, "/_/max_src_resolution:0.00001/plain/local:///photo.png"), 422)
        XCTAssertEqual(try status(server, "/_/msr:0.003071/plain/local:///photo.png@png"), 422)
        XCTAssertEqual(try status(server, "/_/msr:0.003072/plain/local:///photo.png@png"), 200)
        XCTAssertEqual(try status(server, "/_/msr:0/plain/local:///photo.png@png"), 422, "0 refuses every source")
    }

    func testMaxSourceFileSizeRefusesLargerFilesWith422() throws {
        let server = try makeServer()
        XCTAssertEqual(try status(server, "/_/msfs:\(photo.count - 1)/plain/local:///photo.png@png"), 422)
        XCTAssertEqual(try status(server, "/_/msfs:\(photo.count)/plain/local:///photo.png@png"), 200)
        XCTAssertEqual(try status(server, "/_/msfs:0/plain/local:///photo.png@png"), 200, "0 is no limit")
        XCTAssertEqual(try status(server, "/_/msfs:-1/plain/local:///photo.png@png"), 404)
    }

    /// integration_test's TestMaxSrcFileSizeGlobal: the server's limit, on a downloaded source.
    func testTheServersFileSizeLimitRefusesADownloadWith422() throws {
        let origin = try TestHTTPServer()
        origins.append(origin)
        origin.route("/photo.png", .ok(photo, contentType: "image/png"))
        let server = try makeServer(allowsSecurityOptions: false, limits: SecurityLimits(maxSourceFileSize: 1))
        let source = "http://127.0.0.1:\(origin.port)/photo.png"
        XCTAssertEqual(try status(server, "/_/rs:fill:4:4/plain/\(source)"), 422)
        let generous = try makeServer(limits: SecurityLimits(maxSourceFileSize: 1))
        XCTAssertEqual(try status(generous, "/_/msfs:0/rs:fill:4:4/plain/\(source)@png"), 200, "the URL's limit wins")
    }

    func testTheURLsLimitReplacesTheServers() throws {
        let server = try makeServer(limits: SecurityLimits(maxSourceResolution: 0.001))
        XCTAssertEqual(try status(server, "/_/w:20/plain/local:///photo.png@png"), 422)
        XCTAssertEqual(try status(server, "/_/msr:1/w:20/plain/local:///photo.png@png"), 200)
    }

    /// An image served (and cached) without a limit is not served from the cache to a URL whose limit refuses it.
    func testALimitIsPartOfTheVariantsIdentity() throws {
        let server = try makeServer()
        XCTAssertEqual(try status(server, "/_/w:20/plain/local:///photo.png@png"), 200)
        XCTAssertEqual(try status(server, "/_/w:20/msr:0.001/plain/local:///photo.png@png"), 422)
    }

    /// serve renders the first frame only, so the animation limits are accepted and change no result.
    func testAnimationLimitsAreAcceptedAndCheckedForRange() throws {
        let server = try makeServer()
        XCTAssertEqual(try status(server, "/_/maf:1/mafr:0.001/plain/local:///photo.png@png"), 200)
        XCTAssertEqual(try status(server, "/_/maf:0/plain/local:///photo.png@png"), 404)
        XCTAssertEqual(try status(server, "/_/mafr:-1/plain/local:///photo.png@png"), 404)
    }

    /// The security options' canonical segments parse back to the same limits (what the fuzzer checks of every option).
    func testSecurityOptionsRoundTripThroughTheCanonicalPath() throws {
        var parser = ProcessingURLParser(sources: try SourcePolicy())
        parser.allowsSecurityOptions = true
        for options in ["msr:0.00001/msfs:10/maf:2/mafr:1.5", "max_src_resolution:50/msfs:0", "mafr:0/msr:0"] {
            let url = try parser.parseURL("/_/\(options)/plain/local:///a.png")
            let again = try parser.parseURL(url.canonicalPath)
            XCTAssertEqual(again.options, url.options, options)
            XCTAssertEqual(again.canonicalPath, url.canonicalPath, options)
        }
        let url = try parser.parseURL("/_/msr:0.00001/msfs:10/maf:2/mafr:1.5/plain/local:///a.png")
        XCTAssertEqual(url.options.canonicalSegments, ["msr:1e-05", "msfs:10", "maf:2", "mafr:1.5"])
    }

    func testLimitChecksFollowImgproxysCheckDimensions() {
        let limits = SecurityLimits(maxSourceResolution: 0.01, maxAnimationFrameResolution: 0.005)
        XCTAssertNil(limits.refusal(width: 100, height: 100))
        XCTAssertNotNil(limits.refusal(width: 101, height: 100))
        // Several frames: the frame limit, when set, instead of the total.
        XCTAssertNil(limits.refusal(width: 50, height: 100, frames: 3))
        XCTAssertNotNil(limits.refusal(width: 51, height: 100, frames: 3))
        XCTAssertNotNil(SecurityLimits(maxSourceResolution: 0.01).refusal(width: 50, height: 100, frames: 3))
        XCTAssertNotNil(SecurityLimits(maxSourceResolution: 1).refusal(width: .max, height: 2), "overflow")
        XCTAssertNil(SecurityLimits().refusal(width: 100_000, height: 100_000), "no limit set")
    }
}
