import Foundation
import VipsBench
import VipsCore
import XCTest

/// Every benchmark scenario runs on a tiny generated corpus and its counters
/// are right. No timing is asserted: the machines are shared and noisy.
final class BenchmarkScenarioTests: XCTestCase {
    static let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
        "vipsload-bench-tests-\(getpid())")

    static let classes: [CorpusClass] = {
        do { return try BenchmarkSuite.defaultClasses(scale: 0.05, folder: folder) } catch {
            preconditionFailure("cannot generate the tiny corpus: \(error)")
        }
    }()

    override class func tearDown() {
        try? FileManager.default.removeItem(at: folder)
        super.tearDown()
    }

    var settings: BenchmarkSettings {
        BenchmarkSettings(
            size: 64, concurrency: 2, repeats: 1, scaleSteps: [1, 2], scrollRowsPerSecond: 400,
            scrollRows: 60, scrollSlots: 6, coalesceRequests: 200, warmHits: 20_000)
    }

    func run(_ scenario: BenchmarkSettings.Scenario) async -> ScenarioReport {
        var settings = self.settings
        settings.scenarios = [scenario]
        var reports: [ScenarioReport] = []
        await BenchmarkSuite.run(Self.classes, settings: settings) { reports.append($0) }
        XCTAssertEqual(reports.count, 1)
        return reports[0]
    }

    func testCorpusHasEveryClassAndIsReused() throws {
        XCTAssertEqual(Self.classes.map(\.name), ["jpeg-large", "png", "webp", "jpeg-small"])
        for corpusClass in Self.classes {
            XCTAssertFalse(corpusClass.files.isEmpty, corpusClass.name)
            for file in corpusClass.files { XCTAssertNoThrow(try ImageDecoder().info(.file(file.path)), file.path) }
        }
        let first = Self.classes[0].files[0]
        let before = try FileManager.default.attributesOfItem(atPath: first.path)[.modificationDate] as? Date
        _ = try BenchmarkSuite.defaultClasses(scale: 0.05, folder: Self.folder)
        let after = try FileManager.default.attributesOfItem(atPath: first.path)[.modificationDate] as? Date
        XCTAssertEqual(before, after, "a complete corpus is reused, not regenerated")
    }

    func testThroughputDecodesEveryFileOfEveryClass() async {
        let report = await run(.throughput)
        XCTAssertEqual(report.column("class").count, 4)
        XCTAssertEqual(report.column("images").compactMap(\.number), Self.classes.map { Double($0.files.count) })
        XCTAssertEqual(report.column("failures").compactMap(\.number), [0, 0, 0, 0])
        XCTAssertTrue(report.column("imagesPerSecond").allSatisfy { ($0.number ?? 0) > 0 })
        XCTAssertTrue(report.json.hasPrefix("{\"scenario\": \"throughput\""))
        XCTAssertNotNil(try? JSONSerialization.jsonObject(with: Data(report.json.utf8)))
    }

    func testCompareIsLikeForLike() async {
        // With --compare VipsLoad also encodes and writes each thumbnail, as vipsthumbnail does,
        // and the ratio is taken from that figure (vipsthumbnail comes with libvips-tools).
        var settings = self.settings
        settings.scenarios = [.throughput]
        settings.compare = true
        var reports: [ScenarioReport] = []
        await BenchmarkSuite.run(Array(Self.classes.suffix(1)), settings: settings) { reports.append($0) }
        let report = reports[0]
        let written = report.column("writtenImagesPerSecond").compactMap(\.number)
        let peer = report.column("vipsthumbnailImagesPerSecond").compactMap(\.number)
        let ratio = report.column("ratio").compactMap(\.number)
        XCTAssertEqual(written.count, 1, report.json)
        XCTAssertEqual(peer.count, 1, report.json)
        guard let w = written.first, let p = peer.first, let r = ratio.first else { return }
        XCTAssertGreaterThan(w, 0)
        XCTAssertEqual(r, w / p, accuracy: 0.01 + r * 0.01, "the ratio is the written figure's")
        XCTAssertTrue(report.notes.contains { $0.contains("encoding a JPEG") }, "\(report.notes)")
    }

    func testWarmServesOnlyMemoryHits() async {
        let report = await run(.warm)
        let images = Self.classes.reduce(0) { $0 + $1.files.count }
        XCTAssertEqual(report.summaryValue("cachedImages")?.number, Double(images))
        XCTAssertEqual(
            report.summaryValue("decodes")?.number, Double(images), "only the fill decodes; every hit is from memory")
        XCTAssertGreaterThan(report.summaryValue("mainActorHitsPerSecond")?.number ?? 0, 0)
        XCTAssertGreaterThan(report.summaryValue("taskPoolHitsPerSecond")?.number ?? 0, 0)
    }

    func testCoalesceDecodesOnce() async {
        let report = await run(.coalesce)
        XCTAssertEqual(report.summaryValue("decodes")?.number, 1)
        XCTAssertEqual(report.summaryValue("failures")?.number, 0)
        let shared = (report.summaryValue("coalesced")?.number ?? 0) + (report.summaryValue("memoryHits")?.number ?? 0)
        XCTAssertEqual(shared, 199, "every request but the first joined it or hit the cache")
    }

    func testScrollNeverDeliversStaleImagesAndShowsTheLastRows() async {
        let report = await run(.scroll)
        XCTAssertEqual(report.summaryValue("staleDeliveries")?.number, 0)
        let shown = report.summaryValue("distinctRowsShown")?.number ?? 0
        XCTAssertGreaterThanOrEqual(shown, 6, "at least the cells visible when the list stops show their images")
        let decodes = report.summaryValue("decodes")?.number ?? 0
        XCTAssertLessThanOrEqual(decodes, 60, "no row is decoded twice")
        XCTAssertFalse(report.notes.contains { $0.contains("did not all show") })
    }

    func testScaleDecodesEveryCopyUnderItsOwnKey() async {
        let report = await run(.scale)
        let images = Double(Self.classes.reduce(0) { $0 + $1.files.count })
        XCTAssertEqual(report.column("images").compactMap(\.number), [images, 2 * images])
        XCTAssertEqual(report.column("decodes").compactMap(\.number), [images, 2 * images])
        XCTAssertEqual(report.column("failures").compactMap(\.number), [0, 0])
    }
}

final class SoakScenarioTests: XCTestCase {
    func testMixedRequestsLeaveNothingBehind() async throws {
        // Its own tiny corpus: BenchmarkScenarioTests deletes its folder when that class finishes.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("vipsload-soak-tests-\(getpid())")
        addTeardownBlock { try? FileManager.default.removeItem(at: folder) }
        let classes = try BenchmarkSuite.defaultClasses(scale: 0.05, folder: folder)
        var settings = BenchmarkSettings(size: 64, concurrency: 2, repeats: 1, soakRequests: 3_000)
        settings.scenarios = [.soak]
        var reports: [ScenarioReport] = []
        await BenchmarkSuite.run(classes, settings: settings) { reports.append($0) }
        let report = reports[0]
        func value(_ name: String) -> Double? { report.summaryValue(name)?.number }
        XCTAssertEqual(
            value("unexpected"), 0, "failing inputs fail with VipsError, ladders never shrink: \(report.notes)")
        XCTAssertEqual(
            (value("succeeded") ?? 0) + (value("cancelled") ?? 0) + (value("failed") ?? 0), 3_000,
            "every request resumed exactly once")
        XCTAssertGreaterThan(value("failed") ?? 0, 0, "the failing inputs were exercised")
        XCTAssertGreaterThan(value("memoryHits") ?? 0, 0)
        XCTAssertEqual(value("leakedTasks"), 0)
        XCTAssertEqual(report.summaryValue("idleAfterwards")?.display, "yes")
        XCTAssertEqual(value("cacheOverLimitSamples"), 0)
        XCTAssertLessThanOrEqual(value("memoryCacheMB") ?? .infinity, value("memoryCacheLimitMB") ?? 0)
    }
}

extension BenchmarkScenarioTests {
    func testRerunDecodesNothingOnTheSecondPass() async {
        let report = await run(.rerun)
        let images = Double(Self.classes.reduce(0) { $0 + $1.files.count })
        XCTAssertEqual(report.summaryValue("firstDecodes")?.number, images)
        XCTAssertEqual(report.summaryValue("secondDecodes")?.number, 0)
        XCTAssertEqual(report.summaryValue("secondDiskHits")?.number, images)
        XCTAssertEqual(report.summaryValue("firstFailures")?.number, 0)
        XCTAssertEqual(report.summaryValue("secondFailures")?.number, 0)
        XCTAssertFalse(
            FileManager.default.fileExists(
                atPath: FileManager.default.temporaryDirectory
                    .appendingPathComponent("vipsload-bench-rerun").path), "the cache folder is removed")
    }
}
