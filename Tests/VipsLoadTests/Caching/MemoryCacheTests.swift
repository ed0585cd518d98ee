import Foundation
import XCTest

@testable import VipsLoad

/// The decoded-bitmap LRU: eviction order, limits, trimming, expiry, and its
/// limits holding under concurrent use.
final class MemoryCacheTests: XCTestCase {
    /// A 1-pixel-high RGB bitmap costing `3 × width` bytes, filled with `value`.
    private func bitmap(width: Int, value: UInt8 = 0) throws -> Bitmap {
        try Bitmap(width: width, height: 1, channels: 3, pixels: [UInt8](repeating: value, count: width * 3))
    }

    private func key(_ name: String, box: Int = 0) -> ImageCacheKey {
        ImageRequest(source: .data(Data(), identifier: name), size: box == 0 ? .original : .maxPixelSize(box)).cacheKey
    }

    func testEvictsLeastRecentlyUsedByCount() throws {
        let cache = MemoryCache(costLimit: 1 << 20, countLimit: 3)
        for name in ["a", "b", "c"] { cache.store(try bitmap(width: 10), for: key(name)) }
        XCTAssertNotNil(cache.bitmap(for: key("a"))) // a is now the most recent
        cache.store(try bitmap(width: 10), for: key("d")) // evicts b, the least recent
        XCTAssertNil(cache.bitmap(for: key("b")))
        XCTAssertEqual(cache.keysByRecency, [key("d"), key("a"), key("c")])
        cache.store(try bitmap(width: 10), for: key("e")) // evicts c
        XCTAssertEqual(cache.keysByRecency, [key("e"), key("d"), key("a")])
        XCTAssertEqual(cache.count, 3)
        XCTAssertTrue(cache.isConsistent)
    }

    func testEvictsLeastRecentlyUsedByCostUntilTheNewEntryFits() throws {
        let cache = MemoryCache(costLimit: 300, entryCostLimitFraction: 1)
        cache.store(try bitmap(width: 40), for: key("a")) // 120
        cache.store(try bitmap(width: 20), for: key("b")) // 60
        cache.store(try bitmap(width: 30), for: key("c")) // 90 → 270
        XCTAssertEqual(cache.totalCost, 270)
        _ = cache.bitmap(for: key("a")) // order: a c b
        cache.store(try bitmap(width: 30), for: key("d")) // 270 + 90 > 300: evict b (60), then it fits exactly
        XCTAssertEqual(cache.keysByRecency, [key("d"), key("a"), key("c")])
        XCTAssertEqual(cache.totalCost, 300)
        // Replacing an entry replaces its cost.
        cache.store(try bitmap(width: 10), for: key("a")) // 300 - 120 + 30
        XCTAssertEqual(cache.totalCost, 210)
        XCTAssertEqual(cache.keysByRecency, [key("a"), key("d"), key("c")])
        cache.store(try bitmap(width: 20), for: key("e")) // 210 + 60 = 270: no eviction
        XCTAssertEqual(cache.keysByRecency, [key("e"), key("a"), key("d"), key("c")])
        cache.store(try bitmap(width: 50), for: key("f")) // 270 + 150: evict c (90), then d (90)
        XCTAssertEqual(cache.keysByRecency, [key("f"), key("e"), key("a")])
        XCTAssertEqual(cache.totalCost, 240)
        XCTAssertTrue(cache.isConsistent)
    }

    func testBitmapLargerThanTheEntryFractionIsNotCached() throws {
        let cache = MemoryCache(costLimit: 1_000, entryCostLimitFraction: 0.25)
        XCTAssertTrue(cache.store(try bitmap(width: 80), for: key("fits"))) // 240 ≤ 250
        XCTAssertFalse(cache.store(try bitmap(width: 90), for: key("big"))) // 270 > 250
        XCTAssertNil(cache.bitmap(for: key("big")))
        // A too-large replacement drops the stale entry rather than keeping it.
        XCTAssertFalse(cache.store(try bitmap(width: 90), for: key("fits")))
        XCTAssertNil(cache.bitmap(for: key("fits")))
        XCTAssertEqual(cache.totalCost, 0)
        XCTAssertTrue(cache.isConsistent)
    }

    func testTrimRemoveAllLimitsAndCounts() throws {
        let cache = MemoryCache(costLimit: 10_000, entryCostLimitFraction: 1)
        for i in 0..<10 { cache.store(try bitmap(width: 100, value: UInt8(i)), for: key("\(i)")) } // 300 each
        XCTAssertEqual(cache.totalCost, 3_000)
        _ = cache.bitmap(for: key("0"))
        cache.trim(toCost: 1_000) // keeps the 3 most recent: 0, 9, 8
        XCTAssertEqual(cache.keysByRecency, [key("0"), key("9"), key("8")])
        XCTAssertEqual(cache.bitmap(for: key("0"))?.pixel(x: 0, y: 0), [0, 0, 0])
        XCTAssertNil(cache.bitmap(for: key("1")))
        XCTAssertEqual(cache.hitCount, 2)
        XCTAssertEqual(cache.missCount, 1)

        cache.countLimit = 2 // lowering a limit evicts at once
        XCTAssertEqual(cache.count, 2)
        cache.costLimit = 300
        XCTAssertEqual(cache.keysByRecency, [key("0")])
        cache.removeAll()
        XCTAssertEqual(cache.count, 0)
        XCTAssertEqual(cache.totalCost, 0)
        XCTAssertNil(cache.bitmap(for: key("0")))
        XCTAssertTrue(cache.isConsistent)
        cache.costLimit = 10_000
        cache.store(try bitmap(width: 5), for: key("after"))
        XCTAssertNotNil(cache.bitmap(for: key("after")))
        cache.removeBitmap(for: key("after"))
        XCTAssertNil(cache.bitmap(for: key("after")))
        XCTAssertTrue(cache.isConsistent)
    }

    func testEntriesExpireAfterTheirLifetime() throws {
        let expired = MemoryCache(costLimit: 10_000, entryLifetime: .zero)
        expired.store(try bitmap(width: 10), for: key("a"))
        XCTAssertNil(expired.bitmap(for: key("a")))
        XCTAssertEqual(expired.count, 0, "an expired entry is dropped when looked up")
        XCTAssertTrue(expired.isConsistent)

        let lasting = MemoryCache(costLimit: 10_000, entryLifetime: .seconds(3_600))
        lasting.store(try bitmap(width: 10), for: key("a"))
        XCTAssertNotNil(lasting.bitmap(for: key("a")))
    }

    func testCostNeverExceedsTheLimitUnderConcurrentHammering() async throws {
        let costLimit = 40_000
        let cache = MemoryCache(costLimit: costLimit, countLimit: 60, entryCostLimitFraction: 0.2)
        // Costs from 30 to 9,000 bytes: some too large to cache at all (limit 8,000).
        let bitmaps = try (1...40).map { try bitmap(width: $0 * 75) }
        let keys = (0..<200).map { key("k\($0 % 50)", box: $0 / 50 * 16) }
        let violations = Counter()
        let operations = Counter()

        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var random = SystemRandomNumberGenerator()
                    for step in 0..<60_000 {
                        let key = keys.randomElement(using: &random)!
                        switch Int.random(in: 0..<100, using: &random) {
                        case 0..<45: _ = cache.bitmap(for: key)
                        case 45..<93: cache.store(bitmaps.randomElement(using: &random)!, for: key)
                        case 93..<97: cache.removeBitmap(for: key)
                        case 97..<99: _ = cache.largerBitmap(for: key)
                        default: cache.trim(toCost: Int.random(in: 0...costLimit, using: &random))
                        }
                        operations.increment()
                        // Checked after every operation, from every worker.
                        if cache.totalCost > costLimit || cache.count > 60 { violations.increment() }
                        if (step + worker) % 5_000 == 0, !cache.isConsistent { violations.increment() }
                    }
                }
            }
        }
        XCTAssertEqual(operations.count, 480_000)
        XCTAssertEqual(violations.count, 0)
        XCTAssertTrue(cache.isConsistent)
        XCTAssertGreaterThan(cache.hitCount, 0)
        XCTAssertGreaterThan(cache.missCount, 0)
    }
}
