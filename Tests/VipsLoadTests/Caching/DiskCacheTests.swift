import Foundation
import XCTest

@testable import VipsLoad

/// The disk cache on its own: atomic entries, verification on read, safe file
/// names, several instances on one folder, the LRU size limit.
final class DiskCacheTests: XCTestCase {
    private var directory: URL!

    override func setUp() {
        directory = NetworkFixtures.makeDirectory("diskcache")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
    }

    private var entriesDirectory: URL { directory.appendingPathComponent("entries") }
    private var temporaryDirectory: URL { directory.appendingPathComponent("tmp") }

    private func bodyFiles() -> [URL] {
        NetworkFixtures.files(in: entriesDirectory).filter { $0.hasSuffix(".body") }.map {
            entriesDirectory.appendingPathComponent($0)
        }
    }

    func testStoredEntrySurvivesANewInstanceAndDecodes() throws {
        let jpeg = try NetworkFixtures.jpeg(seed: 3)
        let http = HTTPCacheMetadata(
            etag: "\"v1\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT",
            expiresAt: Date().addingTimeInterval(60), contentType: "image/jpeg")
        let first = try DiskCache(directory: directory)
        let stored = try first.store(jpeg, for: "https://example.test/a.jpg", http: http)
        XCTAssertEqual(stored.byteCount, jpeg.count)

        let second = try DiskCache(directory: directory)
        let hit = try XCTUnwrap(second.lookup("https://example.test/a.jpg"))
        XCTAssertEqual(hit.entry.http, http)
        XCTAssertEqual(hit.entry.byteCount, jpeg.count)
        XCTAssertEqual(NetworkFixtures.contents(of: hit.data), jpeg)
        let bitmap = try ImageDecoder().decode(hit.data.input, size: .maxPixelSize(64))
        XCTAssertEqual(max(bitmap.width, bitmap.height), 64)
        XCTAssertEqual(second.metrics.hits, 1)
        XCTAssertNil(second.lookup("https://example.test/other.jpg"))
        XCTAssertEqual(second.metrics.misses, 1)
    }

    func testFileNamesAreHashesWhateverTheKey() throws {
        let cache = try DiskCache(directory: directory)
        let keys = [
            "../../etc/passwd", "/absolute/path", "https://h.test/" + String(repeating: "x", count: 5000),
            "https://h.test/ünïcödé ü?q=1&r=../..", "", "a\0b"
        ]
        for (index, key) in keys.enumerated() {
            try cache.store(NetworkFixtures.versionedBody(version: index, size: 1000), for: key)
        }
        for (index, key) in keys.enumerated() {
            let hit = try XCTUnwrap(cache.lookup(key), "key \(index)")
            XCTAssertEqual(NetworkFixtures.contents(of: hit.data).flatMap(NetworkFixtures.version), index)
        }
        let names = NetworkFixtures.files(in: entriesDirectory)
        XCTAssertEqual(names.count, keys.count * 2)
        for name in names {
            XCTAssertNotNil(
                name.range(of: #"^[0-9a-f]{32}(\.[0-9a-f]{16}\.body|\.meta)$"#, options: .regularExpression), name)
        }
        // Nothing was written outside the cache folder's own two subfolders and its format file.
        cache.waitForBackgroundSweeps()
        XCTAssertEqual(NetworkFixtures.files(in: directory), ["entries", "format", "tmp"])
    }

    func testEntriesOfTheOldFormatAreIgnoredAndSwept() throws {
        // Two entries as VipsLoad's format 1 wrote them (FNV-1a file names, its own
        // checksums): one under its old name, one under the name the key has now.
        try FileManager.default.createDirectory(at: entriesDirectory, withIntermediateDirectories: true)
        let body = NetworkFixtures.versionedBody(version: 1, size: 1000)
        for (key, stem) in [
            ("old", "6c62272e07bb014262b821756295c58d"), ("renamed", DiskCacheKeyHash.fileStem(for: "renamed"))
        ] {
            let bodyFile = stem + ".0123456789abcdef.body"
            try body.write(to: entriesDirectory.appendingPathComponent(bodyFile))
            let meta =
                #"{"key":"\#(key)","byteCount":1000,"storedAt":0,"version":1,"bodyFile":"\#(bodyFile)","#
                + #""checksum":"0000000000000000","sampledChecksum":"0000000000000000"}"#
            try Data(meta.utf8).write(to: entriesDirectory.appendingPathComponent(stem + ".meta"))
        }
        XCTAssertEqual(NetworkFixtures.files(in: entriesDirectory).count, 4)

        let cache = try DiskCache(directory: directory)
        cache.waitForBackgroundSweeps()
        XCTAssertEqual(NetworkFixtures.files(in: entriesDirectory), [], "the opening sweep removed both")
        XCTAssertEqual(
            try String(contentsOf: directory.appendingPathComponent("format"), encoding: .utf8), "2\n",
            "and recorded the folder's format")
        XCTAssertNil(cache.lookup("old"))
        XCTAssertNil(cache.lookup("renamed"))

        // An entry of the current format survives the next instance's sweep.
        try cache.store(body, for: "renamed")
        let next = try DiskCache(directory: directory)
        next.waitForBackgroundSweeps()
        XCTAssertNotNil(next.lookup("renamed"))
    }

    func testAnOldFormatEntryFoundBeforeTheSweepIsAMiss() throws {
        let stem = DiskCacheKeyHash.fileStem(for: "k")
        let cache = try DiskCache(directory: directory)
        cache.waitForBackgroundSweeps()
        let bodyFile = stem + ".0123456789abcdef.body"
        try NetworkFixtures.versionedBody(version: 1, size: 1000).write(
            to: entriesDirectory.appendingPathComponent(bodyFile))
        let meta =
            #"{"key":"k","byteCount":1000,"storedAt":0,"version":1,"bodyFile":"\#(bodyFile)","#
            + #""checksum":"0000000000000000","sampledChecksum":"0000000000000000"}"#
        try Data(meta.utf8).write(to: entriesDirectory.appendingPathComponent(stem + ".meta"))
        XCTAssertNil(cache.lookup("k"), "another version's metadata is never read as an entry")
        XCTAssertFalse(NetworkFixtures.files(in: entriesDirectory).contains(stem + ".meta"), "and it is removed")
    }

    func testRefusesEmptyAndNonImageBytesAndLeavesNothing() throws {
        let cache = try DiskCache(directory: directory)
        XCTAssertThrowsError(try cache.store(Data("<html><body>Not found</body></html>".utf8), for: "k")) {
            XCTAssertEqual(($0 as? VipsError)?.kind, .unsupportedFormat)
        }
        XCTAssertThrowsError(try cache.store(Data(), for: "k")) {
            XCTAssertEqual(($0 as? VipsError)?.kind, .emptyInput)
        }
        let small = try DiskCache(configuration: .init(directory: directory, sizeLimit: 1000))
        XCTAssertThrowsError(try small.store(NetworkFixtures.versionedBody(version: 1, size: 2000), for: "k")) {
            XCTAssertEqual(($0 as? VipsError)?.kind, .tooLarge)
        }
        XCTAssertNil(cache.lookup("k"))
        XCTAssertEqual(NetworkFixtures.files(in: entriesDirectory), [])
        XCTAssertEqual(NetworkFixtures.files(in: temporaryDirectory), [])
    }

    func testWriterThatIsDiscardedOrDroppedLeavesNothing() throws {
        let cache = try DiskCache(directory: directory)
        let writer = try cache.makeWriter(for: "a")
        try writer.write(NetworkFixtures.versionedBody(version: 1, size: 10_000))
        XCTAssertEqual(writer.byteCount, 10_000)
        XCTAssertEqual(NetworkFixtures.files(in: temporaryDirectory).count, 1)
        writer.discard()
        do {
            let dropped = try cache.makeWriter(for: "b")
            try dropped.write(NetworkFixtures.versionedBody(version: 2, size: 10_000))
        }
        XCTAssertEqual(NetworkFixtures.files(in: temporaryDirectory), [])
        XCTAssertNil(cache.lookup("a"))
        XCTAssertNil(cache.lookup("b"))
        XCTAssertEqual(NetworkFixtures.files(in: entriesDirectory), [])
    }

    func testTruncatedEntryIsDetectedRemovedAndNeverServed() throws {
        let cache = try DiskCache(directory: directory)
        let body = NetworkFixtures.versionedBody(version: 7, size: 300_000)
        try cache.store(body, for: "k")
        let file = try XCTUnwrap(bodyFiles().first)
        let handle = try FileHandle(forWritingTo: file)
        try handle.truncate(atOffset: 150_000)
        try handle.close()

        XCTAssertNil(cache.lookup("k"))
        XCTAssertEqual(cache.metrics.corruptEntriesRemoved, 1)
        XCTAssertEqual(NetworkFixtures.files(in: entriesDirectory), [], "the corrupt entry is deleted")
        XCTAssertEqual(NetworkFixtures.files(in: temporaryDirectory), [], "no reader link is left behind")
        // Stored again, it is served again.
        try cache.store(body, for: "k")
        XCTAssertEqual(cache.lookup("k").flatMap { NetworkFixtures.contents(of: $0.data) }, body)
    }

    func testJunkOfTheSameLengthIsDetected() throws {
        let cache = try DiskCache(directory: directory)
        try cache.store(try NetworkFixtures.jpeg(seed: 4), for: "whole")
        let wholeFile = try XCTUnwrap(bodyFiles().first)
        try cache.store(try NetworkFixtures.jpeg(seed: 5), for: "middle")
        let middleFile = try XCTUnwrap(bodyFiles().first { $0 != wholeFile })

        // Every byte of one entry overwritten with junk of the same length.
        let whole = try Data(contentsOf: wholeFile)
        var junk = NetworkFixtures.versionedBody(version: 99, size: whole.count)
        junk[0] = 0x00
        try junk.write(to: wholeFile)
        // Eight bytes in the middle of the other: its JPEG signature intact, so only the checksum can tell.
        var damaged = try Data(contentsOf: middleFile)
        let middle = damaged.count / 2
        damaged.replaceSubrange(middle..<middle + 8, with: [UInt8](repeating: 0xAB, count: 8))
        try damaged.write(to: middleFile)

        XCTAssertNil(cache.lookup("whole"))
        XCTAssertNil(cache.lookup("middle"))
        XCTAssertEqual(cache.metrics.corruptEntriesRemoved, 2)
        XCTAssertEqual(NetworkFixtures.files(in: entriesDirectory), [])
    }

    func testLargeEntriesAreCheckedBySampledWindows() throws {
        let cache = try DiskCache(configuration: .init(directory: directory, fullVerificationLimit: 100_000))
        let body = NetworkFixtures.versionedBody(version: 1, size: 1_000_000)
        try cache.store(body, for: "large")
        XCTAssertEqual(cache.lookup("large").flatMap { NetworkFixtures.contents(of: $0.data) }, body)
        // Damage inside the last window: found without hashing the whole file.
        let url = try XCTUnwrap(bodyFiles().first)
        var damaged = try Data(contentsOf: url)
        damaged[damaged.count - 10] ^= 0xFF
        try damaged.write(to: url)
        XCTAssertNil(cache.lookup("large"))
        XCTAssertEqual(cache.metrics.corruptEntriesRemoved, 1)
    }

    func testUnreadableMetadataIsAMissAndIsRemoved() throws {
        let cache = try DiskCache(directory: directory)
        try cache.store(NetworkFixtures.versionedBody(version: 1, size: 5000), for: "k")
        let meta = try XCTUnwrap(NetworkFixtures.files(in: entriesDirectory).first { $0.hasSuffix(".meta") })
        try Data("{ not json".utf8).write(to: entriesDirectory.appendingPathComponent(meta))
        XCTAssertNil(cache.lookup("k"))
        XCTAssertFalse(NetworkFixtures.files(in: entriesDirectory).contains(meta))
        // The orphaned body goes with the next sweep once old enough.
        let sweeper = try DiskCache(configuration: .init(directory: directory, abandonedFileLifetime: 0))
        sweeper.waitForBackgroundSweeps()
        sweeper.sweep()
        XCTAssertEqual(NetworkFixtures.files(in: entriesDirectory), [])
    }

    func testReadersKeepTheirBytesWhileEntriesAreReplacedOrEvicted() throws {
        let cache = try DiskCache(directory: directory)
        let old = try NetworkFixtures.jpeg(seed: 1)
        let new = try NetworkFixtures.jpeg(seed: 2)
        try cache.store(old, for: "k")
        let reading = try XCTUnwrap(cache.lookup("k"))
        try cache.store(new, for: "k")
        XCTAssertEqual(NetworkFixtures.contents(of: reading.data), old, "a reader's bytes never change under it")
        XCTAssertEqual(cache.lookup("k").flatMap { NetworkFixtures.contents(of: $0.data) }, new)
        XCTAssertEqual(bodyFiles().count, 1, "the replaced body is deleted from the entries")
        cache.removeAll()
        XCTAssertNil(cache.lookup("k"))
        XCTAssertNoThrow(
            try ImageDecoder().decode(reading.data.input, size: .maxPixelSize(32)),
            "a removed entry still decodes for the reader that holds it")
    }

    func testReaderLinksAreRemovedWhenReleased() throws {
        let cache = try DiskCache(directory: directory)
        try cache.store(NetworkFixtures.versionedBody(version: 1, size: 5000), for: "k")
        var hit = cache.lookup("k")
        XCTAssertEqual(NetworkFixtures.files(in: temporaryDirectory).count, 1)
        XCTAssertNotNil(hit)
        hit = nil
        XCTAssertEqual(NetworkFixtures.files(in: temporaryDirectory), [])
    }

    func testSeveralInstancesWritingAndReadingOneFolderConcurrently() throws {
        let caches = try (0..<3).map { _ in try DiskCache(directory: directory) }
        let sizes = [20_000, 90_000, 150_000]
        let failures = DiskCacheFailureLog()
        DispatchQueue.concurrentPerform(iterations: 6) { worker in
            let cache = caches[worker % caches.count]
            for round in 0..<40 {
                let key = "shared-\(round % 4)"
                let version = worker * 1000 + round
                do {
                    try cache.store(
                        NetworkFixtures.versionedBody(version: version, size: sizes[version % sizes.count]), for: key)
                } catch {
                    failures.add("store: \(error)")
                }
                // Whatever is served must be exactly one complete version.
                if let hit = caches[(worker + 1) % caches.count].lookup(key) {
                    guard let data = NetworkFixtures.contents(of: hit.data),
                        let found = NetworkFixtures.version(of: data),
                        data == NetworkFixtures.versionedBody(version: found, size: sizes[found % sizes.count])
                    else {
                        failures.add("served bytes of no complete version for \(key)")
                        continue
                    }
                }
            }
        }
        XCTAssertEqual(failures.messages, [])
        XCTAssertEqual(caches.map(\.metrics.corruptEntriesRemoved), [0, 0, 0])
        for round in 0..<4 { XCTAssertNotNil(caches[0].lookup("shared-\(round)")) }
    }

    func testStaysUnderItsLimitAndKeepsTheMostRecentlyUsed() throws {
        let limit = 1_000_000
        let cache = try DiskCache(configuration: .init(directory: directory, sizeLimit: limit))
        cache.waitForBackgroundSweeps()
        let entrySize = 50_000
        // 100 entries: five times the limit. Three entries are read after every write.
        for index in 0..<100 {
            try cache.store(NetworkFixtures.versionedBody(version: index, size: entrySize), for: "fill-\(index)")
            for kept in 0..<min(3, index + 1) {
                XCTAssertNotNil(cache.lookup("fill-\(kept)"), "entry \(kept) after write \(index)")
            }
        }
        cache.waitForBackgroundSweeps()
        XCTAssertLessThanOrEqual(cache.currentSize(), limit)
        XCTAssertGreaterThan(cache.metrics.evictions, 0)
        XCTAssertGreaterThan(cache.metrics.sweeps, 1)

        let survivors = (0..<100).filter { cache.entry(for: "fill-\($0)") != nil }
        for kept in 0..<3 { XCTAssertTrue(survivors.contains(kept), "the entries read most recently survive") }
        // Among the others, exactly the most recently written survive: a contiguous run ending at 99.
        let written = survivors.filter { $0 >= 3 }
        XCTAssertFalse(written.isEmpty)
        XCTAssertEqual(written, Array(written.first!...99))
        XCTAssertGreaterThan(written.count, 5)
        // Every survivor is intact.
        for index in survivors {
            XCTAssertEqual(
                cache.lookup("fill-\(index)").flatMap { NetworkFixtures.contents(of: $0.data) },
                NetworkFixtures.versionedBody(version: index, size: entrySize))
        }
    }

    func testSweepDeletesWhatInterruptedWritersLeft() throws {
        let cache = try DiskCache(directory: directory)
        try cache.store(NetworkFixtures.versionedBody(version: 1, size: 5000), for: "kept")
        // What a killed writer leaves: a half-written temporary file, and a body renamed without its metadata.
        try NetworkFixtures.versionedBody(version: 2, size: 3000).write(
            to: temporaryDirectory.appendingPathComponent("w-deadbeefdeadbeef"))
        try NetworkFixtures.versionedBody(version: 3, size: 3000)
            .write(
                to: entriesDirectory.appendingPathComponent(
                    String(repeating: "a", count: 32) + ".00000000000000aa.body"))
        cache.sweep()
        XCTAssertEqual(
            NetworkFixtures.files(in: temporaryDirectory).count, 1, "young leftovers may be writes in progress")
        let sweeper = try DiskCache(configuration: .init(directory: directory, abandonedFileLifetime: 0))
        sweeper.waitForBackgroundSweeps()
        XCTAssertEqual(NetworkFixtures.files(in: temporaryDirectory), [])
        XCTAssertEqual(NetworkFixtures.files(in: entriesDirectory).count, 2)
        XCTAssertNotNil(sweeper.lookup("kept"))
    }
}

/// Collects failure messages from concurrent workers.
final class DiskCacheFailureLog: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [String] = []
    func add(_ message: String) { lock.lock(); list.append(message); lock.unlock() }
    var messages: [String] { lock.lock(); defer { lock.unlock() }; return list }
}
