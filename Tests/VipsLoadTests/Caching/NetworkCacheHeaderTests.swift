import Foundation
import XCTest

@testable import VipsLoad

/// The small parts under the HTTP cache and the loader, checked on their
/// own: header parsing and freshness, HTTP dates, retry delays, key hashing
/// and the content checksum.
final class NetworkCacheHeaderTests: XCTestCase {
    private let received = Date(timeIntervalSince1970: 1_700_000_000)

    private func metadata(_ headers: [String: String]) -> HTTPCacheMetadata? {
        let lowercased = Dictionary(uniqueKeysWithValues: headers.map { ($0.key.lowercased(), $0.value) })
        return HTTPCacheMetadata(header: { lowercased[$0.lowercased()] }, receivedAt: received)
    }

    func testCacheControlDirectives() {
        let directives = HTTPCacheMetadata.directives(#"public, Max-Age="60" , no-cache,private="x, y""#)
        XCTAssertEqual(directives["max-age"], "60")
        XCTAssertEqual(directives["public"], "")
        XCTAssertEqual(directives["no-cache"], "")
        XCTAssertEqual(HTTPCacheMetadata.directives(nil), [:])
    }

    func testFreshnessFromMaxAgeExpiresAndAge() throws {
        let maxAge = try XCTUnwrap(metadata(["Cache-Control": "max-age=100", "Age": "40", "ETag": "\"e\""]))
        XCTAssertEqual(maxAge.expiresAt, received.addingTimeInterval(60))
        XCTAssertEqual(maxAge.etag, "\"e\"")
        XCTAssertTrue(maxAge.isFresh(at: received.addingTimeInterval(59)))
        XCTAssertFalse(maxAge.isFresh(at: received.addingTimeInterval(61)))

        let date = "Tue, 14 Nov 2023 22:13:20 GMT" // = received
        let expires = "Tue, 14 Nov 2023 23:13:20 GMT" // one hour later
        XCTAssertEqual(metadata(["Date": date, "Expires": expires])?.expiresAt, received.addingTimeInterval(3600))
        XCTAssertEqual(
            metadata(["Date": date, "Expires": expires, "Cache-Control": "max-age=5"])?.expiresAt,
            received.addingTimeInterval(5), "max-age wins over Expires")
        XCTAssertEqual(metadata(["Expires": "0"])?.expiresAt, received, "an invalid Expires is already expired")
        XCTAssertEqual(metadata(["Cache-Control": "max-age=soon"])?.expiresAt, received)
        XCTAssertNil(metadata(["ETag": "\"e\""])?.expiresAt, "no freshness information: stale at once")
    }

    func testHeuristicFreshnessFromLastModified() {
        let date = "Tue, 14 Nov 2023 22:13:20 GMT"
        XCTAssertEqual(
            metadata(["Date": date, "Last-Modified": "Tue, 14 Nov 2023 12:13:20 GMT"])?.expiresAt,
            received.addingTimeInterval(3600), "10% of ten hours")
        XCTAssertEqual(
            metadata(["Date": date, "Last-Modified": "Sun, 01 Jan 2023 00:00:00 GMT"])?.expiresAt,
            received.addingTimeInterval(24 * 3600), "capped at a day")
    }

    func testNoStoreNoCacheAndPragma() {
        XCTAssertNil(metadata(["Cache-Control": "no-store, max-age=3600"]))
        XCTAssertEqual(metadata(["Cache-Control": "no-cache, max-age=3600"])?.requiresRevalidation, true)
        XCTAssertEqual(metadata(["Cache-Control": "no-cache, max-age=3600"])?.isFresh(at: received), false)
        XCTAssertEqual(metadata(["Pragma": "no-cache"])?.requiresRevalidation, true)
        XCTAssertEqual(
            metadata(["Pragma": "no-cache", "Cache-Control": "max-age=60"])?.requiresRevalidation, false,
            "Pragma counts only without Cache-Control")
    }

    func testNotModifiedUpdatesTheStoredMetadata() throws {
        let stored = try XCTUnwrap(
            metadata([
                "Cache-Control": "max-age=0", "ETag": "\"v1\"",
                "Last-Modified": "Tue, 14 Nov 2023 12:13:20 GMT"
            ]))
        let renewed = try XCTUnwrap(
            stored.updated(
                byNotModified: { ["cache-control": "max-age=600", "etag": "\"v2\""][$0.lowercased()] },
                receivedAt: received))
        XCTAssertEqual(renewed.etag, "\"v2\"")
        XCTAssertEqual(renewed.lastModified, stored.lastModified)
        XCTAssertEqual(renewed.expiresAt, received.addingTimeInterval(600))
        XCTAssertNil(stored.updated(byNotModified: { $0 == "Cache-Control" ? "no-store" : nil }, receivedAt: received))
    }

    func testHTTPDateFormats() {
        let expected = Date(timeIntervalSince1970: 784111777)
        XCTAssertEqual(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"), expected)
        XCTAssertEqual(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT"), expected)
        XCTAssertEqual(HTTPDate.parse("Sun Nov  6 08:49:37 1994"), expected)
        XCTAssertNil(HTTPDate.parse("yesterday"))
        XCTAssertEqual(HTTPDate.format(expected), "Sun, 06 Nov 1994 08:49:37 GMT")
        XCTAssertEqual(HTTPTransfer.parseRetryAfter("120"), 120)
        XCTAssertEqual(HTTPTransfer.parseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT"), 0, "a date in the past: no wait")
    }

    func testRetryDelays() {
        let policy = HTTPRetryPolicy(maxRetries: 3, initialDelay: 0.5, maxDelay: 4)
        for retry in 1...3 {
            let delay = try? XCTUnwrap(policy.delay(beforeRetry: retry, retryAfter: nil))
            let base = min(4, 0.5 * pow(2, Double(retry - 1)))
            XCTAssertTrue((base / 2...base).contains(delay ?? -1), "retry \(retry): \(String(describing: delay))")
        }
        XCTAssertNil(policy.delay(beforeRetry: 4, retryAfter: nil))
        XCTAssertEqual(policy.delay(beforeRetry: 1, retryAfter: 3), 3)
        XCTAssertNil(policy.delay(beforeRetry: 1, retryAfter: 30), "longer than the longest delay: give up")
        XCTAssertNil(HTTPRetryPolicy.none.delay(beforeRetry: 1, retryAfter: nil))
        XCTAssertEqual(
            [408, 429, 500, 501, 502, 503, 504, 505, 404].map(HTTPRetryPolicy.isTransient),
            [false, true, true, false, true, true, true, false, false])
    }

    func testKeyHashAndChecksumAreXXH3() {
        // libxxhash's own XXH3-128 and XXH3-64 values for these inputs.
        XCTAssertEqual(DiskCacheKeyHash.fileStem(for: ""), "99aa06d3014798d86001c324468d497f")
        XCTAssertEqual(
            DiskCacheKeyHash.fileStem(for: "https://example.test/a.jpg"), "3cbfa2063d005277c6d48eb21c7b3647")
        let checksum = ContentChecksum()
        XCTAssertEqual(checksum.finalize(), "2d06800538d394c2")
        Data("a".utf8).withUnsafeBytes { checksum.update($0) }
        Data("bc".utf8).withUnsafeBytes { checksum.update($0) }
        XCTAssertEqual(checksum.finalize(), "78af5f94892f3950", "streamed in pieces, the hash of them all")
    }

    func testChecksumIsIndependentOfChunkingAndSeesEveryByte() {
        let data = NetworkFixtures.versionedBody(version: 3, size: 10_007)
        func checksum(_ chunks: [Range<Int>], of bytes: Data) -> String {
            let sum = ContentChecksum()
            for chunk in chunks { bytes[chunk].withUnsafeBytes { sum.update($0) } }
            return sum.finalize() ?? "none"
        }
        let whole = checksum([0..<data.count], of: data)
        XCTAssertEqual(checksum([0..<3, 3..<4, 4..<5000, 5000..<data.count], of: data), whole)
        for index in [0, 7, 8, 5003, data.count - 1] {
            var changed = data
            changed[index] ^= 0x01
            XCTAssertNotEqual(checksum([0..<changed.count], of: changed), whole, "byte \(index)")
        }
        XCTAssertNotEqual(checksum([0..<data.count - 1], of: data), whole, "a shorter body")
        XCTAssertNotEqual(checksum([0..<data.count + 1], of: data + Data([0])), whole, "a zero byte more")
    }
}
