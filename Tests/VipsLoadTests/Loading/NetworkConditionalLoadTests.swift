import Foundation
import TestSupport
import VipsCore
import VipsLoad
import XCTest

/// `ImagePipeline.data(for:conditions:)` against a real origin that honours
/// `If-None-Match` and `If-Modified-Since`: the conditions reach the origin
/// as sent, its `304` is the `.notModified` outcome (never an error, never
/// stored), a `200` is the bytes with the origin's validators, and a fresh
/// data-cache entry answers by itself.
final class NetworkConditionalLoadTests: NetworkTestCase {
    private let tag = "\"v1-photo\""
    private let modified = "Wed, 21 Oct 2015 07:28:00 GMT"

    private func makePipeline(cache: DiskCache? = nil) -> ImagePipeline {
        let http = HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory)
        return ImagePipeline(configuration: .init(decodeConcurrency: 1, dataCache: cache, http: http))
    }

    /// An origin at `/photo.jpg` answering 304 when `If-None-Match` names its tag or
    /// `If-Modified-Since` is at or after its date, with `extra` header fields.
    private func routeConditionalPhoto(_ jpeg: Data, extra: [(String, String)] = []) {
        let tag = self.tag
        let modified = self.modified
        server.route("/photo.jpg") { request in
            let validators = [("ETag", tag), ("Last-Modified", modified)] + extra
            if let match = request.header("If-None-Match") {
                if match == tag { return .init(status: 304, headers: validators) }
            } else if request.header("If-Modified-Since") == modified {
                return .init(status: 304, headers: validators)
            }
            return .ok(jpeg, headers: validators)
        }
    }

    func testTheOrigins304IsNotModifiedAndItsBodyIsTheBytesWithItsValidators() async throws {
        let jpeg = try NetworkFixtures.jpeg()
        routeConditionalPhoto(jpeg)
        let pipeline = makePipeline()
        let request = ImageRequest(url: server.url("/photo.jpg"))

        let matched = try await pipeline.data(for: request, conditions: HTTPConditions(ifNoneMatch: tag))
        guard case .notModified(let validators) = matched else { return XCTFail("\(matched)") }
        XCTAssertEqual(validators, HTTPValidators(entityTag: tag, lastModified: modified))
        XCTAssertEqual(server.requests("/photo.jpg").last?.header("If-None-Match"), tag, "sent as the client sent it")

        let since = try await pipeline.data(for: request, conditions: HTTPConditions(ifModifiedSince: modified))
        guard case .notModified = since else { return XCTFail("\(since)") }
        XCTAssertEqual(server.requests("/photo.jpg").last?.header("If-Modified-Since"), modified)

        let changed = try await pipeline.data(for: request, conditions: HTTPConditions(ifNoneMatch: "\"old\""))
        guard case .loaded(let data) = changed else { return XCTFail("\(changed)") }
        XCTAssertEqual(try data.contents(), jpeg)
        XCTAssertEqual(data.validators, HTTPValidators(entityTag: tag, lastModified: modified))
        XCTAssertEqual(server.requestCount("/photo.jpg"), 3, "each call asked the origin once")

        // Nothing of a 304 was kept: a plain load downloads, and carries the origin's validators.
        let plain = try await pipeline.data(for: request)
        XCTAssertEqual(try plain.contents(), jpeg)
        XCTAssertEqual(plain.validators?.lastModified, modified)
        XCTAssertNil(server.requests("/photo.jpg").last?.header("If-None-Match"))
    }

    func testAFreshDataCacheEntryAnswersTheConditionsWithoutARequest() async throws {
        let jpeg = try NetworkFixtures.jpeg()
        routeConditionalPhoto(jpeg, extra: [("Cache-Control", "max-age=3600")])
        let pipeline = makePipeline(cache: try makeCache())
        let request = ImageRequest(url: server.url("/photo.jpg"))
        let stored = try await pipeline.data(for: request)
        XCTAssertEqual(stored.validators?.entityTag, tag)
        XCTAssertEqual(server.requestCount("/photo.jpg"), 1)

        let matched = try await pipeline.data(for: request, conditions: HTTPConditions(ifNoneMatch: "W/\(tag)"))
        guard case .notModified(let validators) = matched else { return XCTFail("\(matched)") }
        XCTAssertEqual(validators.entityTag, tag)
        let other = try await pipeline.data(for: request, conditions: HTTPConditions(ifNoneMatch: "\"old\""))
        guard case .loaded(let data) = other else { return XCTFail("\(other)") }
        XCTAssertEqual(try data.contents(), jpeg)
        XCTAssertEqual(server.requestCount("/photo.jpg"), 1, "the fresh entry answered both")
    }

    /// A 304 to conditions the caller put in `httpHeaders` itself, through
    /// `data(for:)`: still the origin's error (no stored entry to serve).
    func testAnUnaskedFor304StaysAnError() async throws {
        let jpeg = try NetworkFixtures.jpeg()
        routeConditionalPhoto(jpeg)
        let pipeline = makePipeline()
        var request = ImageRequest(url: server.url("/photo.jpg"))
        request.httpHeaders["If-None-Match"] = tag
        await assertThrows(kind: .httpStatus, "a 304 with nothing stored") {
            _ = try await pipeline.data(for: request)
        }
    }

    func testConditionsAreMetAsRFC9110Says() {
        let validators = HTTPValidators(entityTag: "\"a\"", lastModified: modified)
        XCTAssertTrue(HTTPConditions(ifNoneMatch: "\"b\", W/\"a\"").areMet(by: validators))
        XCTAssertTrue(HTTPConditions(ifNoneMatch: "*").areMet(by: validators))
        XCTAssertFalse(HTTPConditions(ifNoneMatch: "\"b\"").areMet(by: validators))
        // If-None-Match wins over If-Modified-Since.
        XCTAssertFalse(HTTPConditions(ifNoneMatch: "\"b\"", ifModifiedSince: modified).areMet(by: validators))
        XCTAssertTrue(HTTPConditions(ifModifiedSince: modified).areMet(by: validators))
        XCTAssertTrue(HTTPConditions(ifModifiedSince: "Thu, 25 Feb 2021 01:45:00 GMT").areMet(by: validators))
        XCTAssertFalse(HTTPConditions(ifModifiedSince: "Tue, 01 Oct 2013 17:31:00 GMT").areMet(by: validators))
        XCTAssertFalse(HTTPConditions(ifModifiedSince: "not a date").areMet(by: validators))
        XCTAssertFalse(HTTPConditions(ifModifiedSince: modified).areMet(by: HTTPValidators(entityTag: "\"a\"")))
    }
}
