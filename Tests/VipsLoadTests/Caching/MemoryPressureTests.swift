import Foundation
import XCTest

@testable import VipsLoad

/// Memory pressure: the cache limit from a detected memory limit,
/// `handleMemoryPressure`, and the monitor (real PSI triggers where the kernel
/// has them, sampling on fixture cgroup files) with its thread and
/// descriptors ending with their owner.
final class MemoryPressureTests: XCTestCase {
    // MARK: - Fixtures

    /// A cgroup v2 fake system root with `memory.max` = `limit` bytes in `/app`.
    private func cgroupRoot(limit: Int, usage: Int) throws -> String {
        let root = NSTemporaryDirectory() + "vipsload-pressure-" + UUID().uuidString
        addTeardownBlock { try? FileManager.default.removeItem(atPath: root) }
        let files = [
            "/proc/self/cgroup": "0::/app\n",
            "/proc/self/mountinfo": "30 22 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n",
            "/proc/meminfo": "MemTotal: 16777216 kB\nMemAvailable: 8388608 kB\n",
            "/sys/fs/cgroup/app/memory.max": "\(limit)\n",
            "/sys/fs/cgroup/app/memory.current": "\(usage)\n",
            "/sys/fs/cgroup/app/memory.stat": "anon \(usage)\ninactive_file 0\n"
        ]
        for (path, contents) in files { try write(root + path, contents) }
        return root
    }

    private func write(_ path: String, _ contents: String) throws {
        let url = URL(fileURLWithPath: path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(contents.utf8).write(to: url, options: .atomic)
    }

    /// A 1-pixel-high RGB bitmap costing `3 × width` bytes.
    private func bitmap(width: Int) throws -> Bitmap {
        try Bitmap(width: width, height: 1, channels: 3, pixels: [UInt8](repeating: 7, count: width * 3))
    }

    private func key(_ index: Int) -> ImageCacheKey {
        ImageRequest(source: .data(Data(), identifier: "entry-\(index)"), size: .original).cacheKey
    }

    /// A cache holding ten 3,000-byte bitmaps, entry-9 the most recently used.
    private func filledCache() throws -> MemoryCache {
        let cache = MemoryCache(costLimit: 1 << 20, entryCostLimitFraction: 1)
        for index in 0..<10 { cache.store(try bitmap(width: 1000), for: key(index)) }
        XCTAssertEqual(cache.totalCost, 30_000)
        return cache
    }

    /// The targets of this process's open descriptors (`/proc/self/fd`).
    private func openDescriptorTargets() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return names.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0) }
    }

    private func threadExists(_ id: Int32) -> Bool {
        FileManager.default.fileExists(atPath: "/proc/self/task/\(id)")
    }

    /// Waits (at most `timeout`) for `condition`; the assertion after it says what failed.
    private func eventually(timeout: TimeInterval = 10, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            if Date() > deadline { return false }
            Thread.sleep(forTimeInterval: 0.005)
        }
        return true
    }

    // MARK: - The default cache limit

    func testDefaultCostLimitIsAFifthOfTheDetectedLimitAtMost512MiB() throws {
        let pod = SystemResources.detect(root: try cgroupRoot(limit: 256 << 20, usage: 0), affinity: [0])
        XCTAssertEqual(pod.memoryLimit, 256 << 20)
        XCTAssertEqual(MemoryCache.defaultCostLimit(for: pod), (256 << 20) / 5, "a 256 MiB pod: 51 MiB")
        let large = SystemResources.detect(root: try cgroupRoot(limit: 8 << 30, usage: 0), affinity: [0])
        XCTAssertEqual(MemoryCache.defaultCostLimit(for: large), 512 << 20, "capped at 512 MiB")
        XCTAssertEqual(MemoryCache.defaultCostLimit, MemoryCache.defaultCostLimit(for: .current))
        XCTAssertEqual(MemoryCache().costLimit, MemoryCache.defaultCostLimit)
        XCTAssertLessThanOrEqual(MemoryCache.defaultCostLimit, SystemResources.current.memoryLimit / 5)
    }

    // MARK: - handleMemoryPressure

    func testWarningHalvesTheCacheKeepingTheMostRecentAndCriticalEmptiesIt() throws {
        let cache = try filledCache()
        var configuration = ImagePipeline.Configuration(memoryCache: cache)
        configuration.monitorsMemoryPressure = false
        let pipeline = ImagePipeline(configuration: configuration)
        XCTAssertNil(pipeline.memoryPressureMonitor)

        pipeline.handleMemoryPressure(.warning)
        XCTAssertEqual(cache.totalCost, 15_000)
        XCTAssertEqual(cache.keysByRecency, (5..<10).reversed().map(key), "the least recently used went first")
        XCTAssertEqual(cache.costLimit, 1 << 20, "the limit is unchanged")
        pipeline.handleMemoryPressure(.warning)
        XCTAssertEqual(cache.count, 2, "7,500 bytes allowed: two 3,000-byte entries stay")
        XCTAssertTrue(cache.isConsistent)

        pipeline.handleMemoryPressure(.critical)
        XCTAssertEqual(cache.totalCost, 0)
        XCTAssertEqual(cache.count, 0)
        XCTAssertEqual(cache.costLimit, 1 << 20)
        // The cache works as before afterwards.
        XCTAssertTrue(cache.store(try bitmap(width: 10), for: key(1)))

        // Without a memory cache there is nothing to trim, and nothing fails.
        var uncached = ImagePipeline.Configuration(memoryCache: nil)
        uncached.monitorsMemoryPressure = true
        let bare = ImagePipeline(configuration: uncached)
        XCTAssertNil(bare.memoryPressureMonitor, "no cache, no monitor")
        bare.handleMemoryPressure(.critical)
    }

    func testTheDefaultSwitchFollowsThePressureFile() {
        XCTAssertEqual(
            ImagePipeline.Configuration().monitorsMemoryPressure, SystemResources.current.memoryPressureFile != nil)
        XCTAssertEqual(ImagePipeline.Configuration().decodeConcurrency, SystemResources.current.usableCPUs)
    }

    // MARK: - PSI triggers

    func testRealTriggerArmsOnProcPressureMemory() throws {
        let file = "/proc/pressure/memory"
        guard FileManager.default.fileExists(atPath: file) else {
            throw XCTSkip("\(file) does not exist: this kernel has no PSI (CONFIG_PSI off, or booted with psi=0)")
        }
        let trigger = try Self.armOrSkip(file)
        XCTAssertEqual(openDescriptorTargets().filter { $0 == file }.count, 2, "a warning and a critical trigger")
        // Armed and idle: nothing fires in an instant, and a wake-up ends the wait.
        trigger.wake()
        XCTAssertEqual(trigger.wait(timeout: nil), .woken)
        trigger.close()
        trigger.close()
        XCTAssertEqual(openDescriptorTargets().filter { $0 == file }.count, 0)
        trigger.wake() // after close: does nothing
    }

    /// Waits until no trigger of this process is open on `file`: the
    /// descriptors are counted process-wide, and pipelines earlier tests
    /// released may still be ending their monitors (their last tasks finish
    /// after the test that made them; slowly under ThreadSanitizer). A
    /// pipeline that is never released fails here.
    private func awaitNoTriggers(on file: String, line: UInt = #line) {
        let idle = eventually { openDescriptorTargets().filter { $0 == file }.isEmpty }
        XCTAssertTrue(idle, "earlier pipelines' triggers on \(file) are closed", line: line)
    }

    /// Triggers on `file`, or a skip saying why the kernel refused them.
    private static func armOrSkip(_ file: String) throws -> MemoryPressureTrigger {
        let result = Result { () throws(VipsError) in try MemoryPressureTrigger(file: file) }
        switch result {
        case .success(let trigger): return trigger
        case .failure(let error) where error.kind == .permissionDenied:
            throw XCTSkip(
                "the kernel refuses unprivileged PSI triggers here (before Linux 6.5 they need CAP_SYS_RESOURCE): \(error.message)"
            )
        case .failure(let error): throw error
        }
    }

    func testTheKernelRejectsAMalformedTrigger() throws {
        guard let file = SystemResources.current.memoryPressureFile else {
            throw XCTSkip("no memory pressure file (a kernel without PSI)")
        }
        awaitNoTriggers(on: file)
        let bad = MemoryPressureTrigger.Threshold(kind: "some", stall: .seconds(3), window: .seconds(2))
        XCTAssertThrowsError(try MemoryPressureTrigger(file: file, warning: bad), "a stall longer than its window") {
            error in
            XCTAssertTrue([.unsupportedFeature, .permissionDenied].contains((error as? VipsError)?.kind), "\(error)")
        }
        XCTAssertEqual(openDescriptorTargets().filter { $0 == file }.count, 0, "nothing left open after a refusal")
        XCTAssertThrowsError(try MemoryPressureTrigger(file: NSTemporaryDirectory() + "no-such-pressure-file")) {
            error in
            XCTAssertEqual((error as? VipsError)?.kind, .fileNotFound)
        }
    }

    func testPipelineOwnsItsMonitorThreadAndDescriptorsAndReleasesThem() throws {
        guard let file = SystemResources.current.memoryPressureFile else {
            throw XCTSkip("no memory pressure file (a kernel without PSI): a pipeline would sample instead")
        }
        awaitNoTriggers(on: file)
        let baselineEventFDs = openDescriptorTargets().filter { $0.contains("eventfd") }.count
        var configuration = ImagePipeline.Configuration(memoryCache: MemoryCache(costLimit: 1 << 20))
        configuration.monitorsMemoryPressure = true
        var pipeline: ImagePipeline? = ImagePipeline(configuration: configuration)
        // Only the pipeline holds its monitor: the test keeps what it saw, not the monitor.
        let (mode, reason, threadID) = try { () throws -> (MemoryPressureMonitor.Mode, String?, Int32) in
            let monitor = try XCTUnwrap(pipeline?.memoryPressureMonitor, "the pipeline started a monitor")
            XCTAssertTrue(eventually { monitor.threadID != 0 }, "the monitor thread runs")
            return (monitor.mode, monitor.pressureStallUnavailableReason, monitor.threadID)
        }()
        guard case .pressureStall(let armed) = mode else {
            throw XCTSkip("PSI triggers refused on \(file) (\(reason ?? "?")): the monitor samples instead")
        }
        XCTAssertEqual(armed, file)
        XCTAssertTrue(threadExists(threadID))
        XCTAssertEqual(openDescriptorTargets().filter { $0 == file }.count, 2, "two triggers armed on \(file)")
        XCTAssertEqual(openDescriptorTargets().filter { $0.contains("eventfd") }.count, baselineEventFDs + 1)

        pipeline = nil
        XCTAssertNil(pipeline)
        XCTAssertTrue(eventually { !threadExists(threadID) }, "the monitor thread ended with the pipeline")
        XCTAssertEqual(openDescriptorTargets().filter { $0 == file }.count, 0, "the triggers are closed")
        XCTAssertEqual(
            openDescriptorTargets().filter { $0.contains("eventfd") }.count, baselineEventFDs, "the eventfd is closed")
    }

    func testReleasingThePipelineEndsItsMonitor() throws {
        let resources = SystemResources.current
        guard resources.memoryPressureFile != nil || resources.currentMemoryUsage() != nil else {
            throw XCTSkip("neither a PSI file nor a readable memory usage: nothing to monitor")
        }
        // The monitor's descriptors: triggers on the pressure file, and an eventfd.
        let monitorDescriptors = { [self] in
            openDescriptorTargets().filter { $0 == resources.memoryPressureFile || $0.contains("eventfd") }.count
        }
        let before = monitorDescriptors()
        var configuration = ImagePipeline.Configuration(memoryCache: MemoryCache(costLimit: 1 << 20))
        configuration.monitorsMemoryPressure = true
        var threadID: Int32 = 0
        do {
            let pipeline = ImagePipeline(configuration: configuration)
            let monitor = try XCTUnwrap(pipeline.memoryPressureMonitor)
            XCTAssertTrue(eventually { monitor.threadID != 0 })
            threadID = monitor.threadID
            XCTAssertTrue(threadExists(threadID))
            XCTAssertGreaterThan(monitorDescriptors(), before)
        }
        // The pipeline (and so its monitor) is released at the end of the `do` block.
        XCTAssertFalse(threadID == 0)
        XCTAssertTrue(eventually { !threadExists(threadID) }, "no monitor thread left after the pipeline is released")
        XCTAssertEqual(monitorDescriptors(), before, "no descriptor left after the pipeline is released")
    }

    // MARK: - Sampling

    func testSamplingReportsWarningThenCriticalAndThePipelineTrims() throws {
        let limit = 100 << 20
        let root = try cgroupRoot(limit: limit, usage: 10 << 20)
        let resources = SystemResources.detect(root: root, affinity: [0])
        XCTAssertEqual(resources.memoryLimit, limit)
        XCTAssertEqual(resources.currentMemoryUsage(), 10 << 20)

        let cache = try filledCache()
        var configuration = ImagePipeline.Configuration(memoryCache: cache)
        configuration.monitorsMemoryPressure = false
        let pipeline = ImagePipeline(configuration: configuration)
        let levels = LockedState<[ImagePipeline.MemoryPressureLevel]>([])
        let monitor = try XCTUnwrap(
            MemoryPressureMonitor.start(
                resources: resources, usesPressureStall: false,
                samplingInterval: .milliseconds(10)
            ) { [weak pipeline] level in
                levels.withLock { $0.append(level) }
                pipeline?.handleMemoryPressure(level)
            })
        XCTAssertEqual(monitor.mode, .sampling(limit: limit, interval: .milliseconds(10)))
        XCTAssertEqual(monitor.pressureStallUnavailableReason, "pressure stall triggers not requested")

        // 10 %: nothing, however many samples are read and judged.
        XCTAssertTrue(eventually { monitor.samples >= 5 }, "five samples at 10 %")
        XCTAssertEqual(levels.withLock { $0 }, [], "10 % of the limit is no pressure")
        XCTAssertEqual(cache.totalCost, 30_000)

        try write(root + "/sys/fs/cgroup/app/memory.current", "\(90 << 20)\n")
        XCTAssertTrue(eventually { levels.withLock { $0.first } == .warning }, "90 %: a warning")
        XCTAssertTrue(eventually { cache.totalCost == 15_000 }, "the warning halved the cache (\(cache.totalCost))")

        try write(root + "/sys/fs/cgroup/app/memory.current", "\(99 << 20)\n")
        XCTAssertTrue(
            eventually { levels.withLock { $0.contains(.critical) } }, "99 %: critical, at once (it is a rise)")
        XCTAssertTrue(eventually { cache.totalCost == 0 }, "critical emptied the cache")
        XCTAssertEqual(levels.withLock { $0 }.prefix(2), [.warning, .critical])

        // stop() ends the thread, the only one that reports: nothing can be reported after it.
        let threadID = monitor.threadID
        let samples = monitor.samples
        monitor.stop()
        XCTAssertTrue(eventually { !threadExists(threadID) })
        let count = levels.withLock { $0.count }
        try write(root + "/sys/fs/cgroup/app/memory.current", "\(10 << 20)\n")
        try write(root + "/sys/fs/cgroup/app/memory.current", "\(99 << 20)\n")
        XCTAssertLessThanOrEqual(monitor.samples - samples, 1, "at most the sample in progress at stop()")
        XCTAssertEqual(levels.withLock { $0.count }, count, "nothing is reported after stop()")
    }

    func testAMonitorStoppedFromItsOwnHandlerEnds() throws {
        let root = try cgroupRoot(limit: 100 << 20, usage: 99 << 20)
        let resources = SystemResources.detect(root: root, affinity: [0])
        let baselineEventFDs = openDescriptorTargets().filter { $0.contains("eventfd") }.count
        final class Box: Sendable {
            let monitor = LockedState<MemoryPressureMonitor?>(nil)
            let calls = LockedState(0)
        }
        let box = Box()
        var monitor = MemoryPressureMonitor.start(
            resources: resources, usesPressureStall: false,
            samplingInterval: .milliseconds(5)
        ) { _ in
            box.calls.withLock { $0 += 1 }
            // The first report can come before `start` has returned the monitor to the test:
            // wait (on the monitor's own thread) until it is there.
            let deadline = Date().addingTimeInterval(30)
            while box.monitor.withLock({ $0 }) == nil, box.calls.withLock({ $0 }) == 1, Date() < deadline {
                usleep(1_000)
            }
            // Stops (and releases) the monitor on its own thread, as a pipeline released by its handler would.
            let monitor = box.monitor.withLock { state -> MemoryPressureMonitor? in
                defer { state = nil }
                return state
            }
            monitor?.stop()
        }
        let threadID: Int32
        do {
            let started = try XCTUnwrap(monitor)
            XCTAssertTrue(eventually { started.threadID != 0 })
            threadID = started.threadID
            box.monitor.withLock { $0 = started }
        }
        monitor = nil
        XCTAssertTrue(eventually { box.calls.withLock { $0 } >= 1 }, "99 % of the limit: critical")
        XCTAssertTrue(eventually { !threadExists(threadID) }, "the thread ended after stop() from its own handler")
        XCTAssertTrue(
            eventually { openDescriptorTargets().filter { $0.contains("eventfd") }.count == baselineEventFDs },
            "and closed its eventfd")
        XCTAssertEqual(box.calls.withLock { $0 }, 1, "one report, then nothing")
    }

    func testNoMonitorWithoutAnythingToWatch() throws {
        let root = NSTemporaryDirectory() + "vipsload-pressure-empty-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: root) }
        let nothing = SystemResources.detect(root: root, affinity: [0])
        XCTAssertNil(nothing.memoryPressureFile)
        XCTAssertNil(
            MemoryPressureMonitor.start(resources: nothing) { _ in XCTFail("nothing to report") },
            "no PSI file and no usage to sample: no thread")
    }
}
