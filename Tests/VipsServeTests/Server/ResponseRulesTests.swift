import Foundation
import VipsCore
import XCTest

@testable import VipsHTTP
@testable import VipsServe

/// The small rules behind responses: entity tags, `If-None-Match`, `Accept`
/// negotiation, the status of every failure, the memory cache's bounds.
final class ResponseRulesTests: XCTestCase {
    func testTheEntityTagDependsOnSourceOptionsAndFormatAndIsStable() {
        let key = RepresentationKey(source: "file:/a.jpg:1:2:3:4.5", options: "rs:fit:100:0", format: "webp")
        XCTAssertEqual(key, RepresentationKey(source: "file:/a.jpg:1:2:3:4.5", options: "rs:fit:100:0", format: "webp"))
        XCTAssertTrue(key.entityTag.hasPrefix("\"") && key.entityTag.hasSuffix("\""))
        XCTAssertEqual(key.entityTag.count, 34, "32 hex digits in quotes")
        let others = [
            RepresentationKey(source: "file:/a.jpg:1:2:3:4.6", options: "rs:fit:100:0", format: "webp"),
            RepresentationKey(source: "file:/a.jpg:1:2:3:4.5", options: "rs:fit:101:0", format: "webp"),
            RepresentationKey(source: "file:/a.jpg:1:2:3:4.5", options: "rs:fit:100:0", format: "avif")
        ]
        XCTAssertEqual(Set(others.map(\.entityTag) + [key.entityTag]).count, 4)
    }

    func testIfNoneMatchIsComparedWeaklyOverAList() {
        let key = RepresentationKey(source: "s", options: "o", format: "f")
        XCTAssertTrue(key.isMatched(by: key.entityTag))
        XCTAssertTrue(key.isMatched(by: "\"other\", W/\(key.entityTag)"))
        XCTAssertTrue(key.isMatched(by: "*"))
        XCTAssertFalse(key.isMatched(by: "\"other\""))
        XCTAssertFalse(key.isMatched(by: ""))
        XCTAssertFalse(key.isMatched(by: String(key.entityTag.dropLast())), "an unquoted tag is another tag")
    }

    func testAFileIdentityChangesWhenTheFileDoes() throws {
        func failure(_ path: String) -> VipsError.Kind? {
            if case .failure(let error) = RepresentationKey.identity(ofFile: path) { return error.kind }
            return nil
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("identity-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        XCTAssertEqual(failure(path), .fileNotFound)
        try Data("one".utf8).write(to: URL(fileURLWithPath: path))
        let first = try RepresentationKey.identity(ofFile: path).get()
        XCTAssertEqual(try RepresentationKey.identity(ofFile: path).get(), first)
        try Data("other".utf8).write(to: URL(fileURLWithPath: path))
        XCTAssertNotEqual(try RepresentationKey.identity(ofFile: path).get(), first)
        XCTAssertEqual(failure("/tmp"), .fileNotFound, "a folder is no image")
    }

    func testAcceptNegotiationPrefersAVIFThenWebPThenTheSourceFamily() {
        var settings = ImageServer.OutputSettings()
        settings.autoAVIF = true
        settings.autoWebP = true
        func choice(_ accept: String?) -> ProcessingOptions.Format? {
            settings.negotiated(accept: accept, urlFormat: nil)
        }
        XCTAssertEqual(choice("image/avif,image/webp,image/apng,image/*,*/*;q=0.8"), .avif)
        XCTAssertEqual(choice("image/webp,*/*"), .webp)
        XCTAssertEqual(choice("image/avif;q=0, image/webp;q=0.5"), .webp, "q=0 refuses AVIF")
        XCTAssertNil(choice("image/*,*/*;q=0.8"), "wildcards promise nothing: the source's format")
        XCTAssertNil(choice(nil))
        XCTAssertEqual(choice("IMAGE/WEBP"), .webp)
    }

    func testEveryFailureKindHasAStatusAndATextNamingNoPath() {
        for kind in VipsError.Kind.allCases {
            let status = ErrorStatus(VipsError(kind, "/secret/path/photo.jpg: libvips said something"))
            XCTAssertTrue((400...599).contains(status.code), "\(kind)")
            XCTAssertFalse(status.text.contains("/"), "\(kind): \(status.text)")
            XCTAssertFalse(status.text.contains("libvips"), "\(kind)")
        }
        let table: [(VipsError.Kind, Int)] = [
            (.tooLarge, 422), (.unsupportedFormat, 422), (.corruptData, 422), (.truncatedData, 422),
            (.fileNotFound, 404), (.network, 502), (.timedOut, 504), (.invalidArgument, 422),
            (.sourceNotAllowed, 404), (.redirectRefused, 404)
        ]
        for (kind, code) in table {
            XCTAssertEqual(ErrorStatus(VipsError(kind, "x")).code, code, "\(kind)")
        }
        XCTAssertEqual(ErrorStatus(VipsError(.httpStatus, "x", httpStatus: 404)).code, 404)
        XCTAssertEqual(ErrorStatus(VipsError(.httpStatus, "x", httpStatus: 500)).code, 502)
        // imgproxy passes an origin's 4xx on, and answers any other status that is no image with 404.
        XCTAssertEqual(ErrorStatus(VipsError(.httpStatus, "x", httpStatus: 403)).code, 403)
        XCTAssertEqual(ErrorStatus(VipsError(.httpStatus, "x", httpStatus: 429)).code, 429)
        XCTAssertEqual(ErrorStatus(VipsError(.httpStatus, "x", httpStatus: 300)).code, 404)
    }

    func testTheResponseCacheIsBoundedByBytesAndEvictsTheLeastRecentlyUsed() throws {
        let cache = ResponseCache(byteLimit: 1000)
        func response(_ bytes: Int) throws -> HTTPResponse {
            try XCTUnwrap(HTTPResponse(status: 200, body: Data(count: bytes)))
        }
        for name in ["a", "b", "c"] { cache.store(try response(90), for: name, lifetime: nil) }
        XCTAssertNotNil(cache.response(for: "a"), "a is now the most recent")
        for index in 0..<9 { cache.store(try response(90), for: "filler\(index)", lifetime: nil) }
        XCTAssertLessThanOrEqual(cache.totalBytes, 1000)
        XCTAssertNotNil(cache.response(for: "a"))
        XCTAssertNil(cache.response(for: "b"), "the least recently used went first")
        cache.store(try response(101), for: "huge", lifetime: nil)
        XCTAssertNil(cache.response(for: "huge"), "over a tenth of the limit: not kept")
        cache.store(try response(10), for: "brief", lifetime: .zero)
        XCTAssertNil(cache.response(for: "brief"), "expired at once")
    }

    func testTimeoutsBecomeWholeSecondsRoundedUp() {
        XCTAssertEqual(ImageServer.wholeSeconds(.zero), 0, "none")
        XCTAssertEqual(ImageServer.wholeSeconds(.milliseconds(500)), 1, "not none")
        XCTAssertEqual(ImageServer.wholeSeconds(.seconds(30)), 30)
        XCTAssertEqual(ImageServer.wholeSeconds(.seconds(30) + .milliseconds(1)), 31)
        XCTAssertEqual(ImageServer.wholeSeconds(.seconds(-3)), 0)
    }
}
