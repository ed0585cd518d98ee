import Foundation
import VipsCore

/// Watches the kernel's memory pressure for one pipeline, on one thread the
/// monitor owns, and reports each warning or critical level to its handler.
///
/// Where the memory pressure file accepts triggers (`SystemResources
/// .memoryPressureFile`: the cgroup's `memory.pressure`, else
/// `/proc/pressure/memory`), the thread sleeps in `poll()` until the kernel
/// signals a stall (`MemoryPressureTrigger`'s thresholds: warning when some
/// task stalled on memory 150 ms in 2 s, critical when all did) and costs
/// nothing while idle; the kernel repeats a signal at most once per 2 s
/// window while the stall lasts. Elsewhere it samples usage against the
/// memory limit every `samplingInterval` (default 1 s): warning at 85 %,
/// critical at 95 %, repeated at most every 2 s while the level lasts,
/// sooner when it rises.
///
/// The thread and its descriptors (two triggers and an eventfd, or the
/// eventfd alone) end with the monitor: `stop()` or its release wakes the
/// thread, waits for it to end, and closes them. The handler runs on the
/// monitor's thread, never under a lock of the monitor's.
final class MemoryPressureMonitor: Sendable {
    /// How the monitor learns of pressure.
    enum Mode: Sendable, Equatable {
        /// PSI triggers armed on this pressure file.
        case pressureStall(file: String)
        /// Usage sampled against `limit` bytes every `interval`.
        case sampling(limit: Int, interval: Duration)
    }

    /// Usage fractions of the limit at which sampling reports each level.
    static let samplingWarningFraction = 0.85
    static let samplingCriticalFraction = 0.95
    /// While a sampled level lasts, it is reported again at most this often.
    static let samplingRepeatInterval: Duration = .seconds(2)

    /// How this monitor learns of pressure.
    let mode: Mode
    /// Why PSI triggers are not used, when `mode` is `.sampling`.
    let pressureStallUnavailableReason: String?
    private let trigger: MemoryPressureTrigger
    private let state: LockedState<State>

    private struct State {
        var thread: pthread_t?
        /// The thread's kernel id once it runs (for tests); 0 before.
        var threadID: Int32 = 0
        var isStopped = false
        /// Usage samples read and judged so far (sampling mode; for tests).
        var samples = 0
    }

    /// Starts a monitor on its own thread, or returns nil when it cannot
    /// watch anything (no trigger, no usage to sample, no thread).
    ///
    /// - Parameters:
    ///   - resources: where the pressure file, usage and limit are read. Default `SystemResources.current`.
    ///   - usesPressureStall: try PSI triggers first (default true); false samples only.
    ///   - samplingInterval: how often sampling reads the usage. Default 1 s.
    ///   - handler: called on the monitor's thread for each reported level.
    static func start(
        resources: SystemResources = .current, usesPressureStall: Bool = true,
        samplingInterval: Duration = .seconds(1),
        handler: @escaping @Sendable (ImagePipeline.MemoryPressureLevel) -> Void
    ) -> MemoryPressureMonitor? {
        var reason: String? = "pressure stall triggers not requested"
        if usesPressureStall {
            if let file = resources.memoryPressureFile {
                do throws(VipsError) {
                    let trigger = try MemoryPressureTrigger(file: file)
                    return MemoryPressureMonitor(
                        mode: .pressureStall(file: file), reason: nil, trigger: trigger,
                        resources: resources, handler: handler)
                } catch {
                    reason = error.description
                }
            } else {
                reason = "no memory pressure file (a kernel without PSI, or booted with psi=0)"
            }
        }
        guard resources.currentMemoryUsage() != nil,
            let trigger = try? MemoryPressureTrigger(file: nil)
        else { return nil }
        return MemoryPressureMonitor(
            mode: .sampling(limit: resources.memoryLimit, interval: samplingInterval),
            reason: reason, trigger: trigger, resources: resources, handler: handler)
    }

    private init?(
        mode: Mode, reason: String?, trigger: MemoryPressureTrigger, resources: SystemResources,
        handler: @escaping @Sendable (ImagePipeline.MemoryPressureLevel) -> Void
    ) {
        self.mode = mode
        pressureStallUnavailableReason = reason
        self.trigger = trigger
        let state = LockedState(State())
        self.state = state
        let context = Context(mode: mode, trigger: trigger, state: state, resources: resources, handler: handler)
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        // The handler trims a cache and calls malloc_trim: a small stack is plenty.
        pthread_attr_setstacksize(&attributes, 1 << 20)
        var thread = pthread_t()
        let unmanaged = Unmanaged.passRetained(context)
        let status = pthread_create(
            &thread, &attributes,
            { argument in
                guard let argument else { return nil }
                Unmanaged<Context>.fromOpaque(argument).takeRetainedValue().run()
                return nil
            }, unmanaged.toOpaque())
        guard status == 0 else {
            unmanaged.release()
            trigger.close()
            return nil
        }
        state.withLock { $0.thread = thread }
    }

    deinit { stop() }

    /// The monitor thread's kernel id, 0 until it has started (for tests).
    var threadID: Int32 { state.withLock { $0.threadID } }

    /// Usage samples read and judged so far, in sampling mode (for tests: an
    /// event to wait for where nothing is to be reported).
    var samples: Int { state.withLock { $0.samples } }

    /// Ends the thread and closes the descriptors; returns once the thread
    /// has ended (or at once when called on it, from the handler: the thread
    /// then ends as the handler returns). Idempotent.
    func stop() {
        let thread = state.withLock { state -> pthread_t? in
            guard !state.isStopped else { return nil }
            state.isStopped = true
            defer { state.thread = nil }
            return state.thread
        }
        trigger.wake()
        guard let thread else { return }
        if pthread_equal(thread, pthread_self()) != 0 {
            // Called from the handler: the thread closes the trigger on its way out.
            pthread_detach(thread)
            return
        }
        pthread_join(thread, nil)
        trigger.close()
    }

    /// What the thread holds: never the monitor itself, so releasing the
    /// monitor can end the thread.
    private final class Context: Sendable {
        let mode: Mode
        let trigger: MemoryPressureTrigger
        let state: LockedState<State>
        let resources: SystemResources
        let handler: @Sendable (ImagePipeline.MemoryPressureLevel) -> Void

        init(
            mode: Mode, trigger: MemoryPressureTrigger, state: LockedState<State>, resources: SystemResources,
            handler: @escaping @Sendable (ImagePipeline.MemoryPressureLevel) -> Void
        ) {
            self.mode = mode
            self.trigger = trigger
            self.state = state
            self.resources = resources
            self.handler = handler
        }

        func run() {
            let threadID = MemoryPressureTrigger.currentThreadID
            state.withLock { $0.threadID = threadID }
            defer { trigger.close() }
            switch mode {
            case .pressureStall: watchTriggers()
            case .sampling(let limit, let interval): sample(limit: limit, interval: interval)
            }
        }

        private var isStopped: Bool { state.withLock { $0.isStopped } }

        private func watchTriggers() {
            while !isStopped {
                switch trigger.wait(timeout: nil) {
                case .warning: handler(.warning)
                case .critical: handler(.critical)
                case .timedOut: continue
                // Woken to stop, or the file failed (its cgroup removed): nothing left to watch.
                case .woken, .failed: return
                }
            }
        }

        private func sample(limit: Int, interval: Duration) {
            var reported: (level: ImagePipeline.MemoryPressureLevel, at: ContinuousClock.Instant)?
            while !isStopped {
                switch trigger.wait(timeout: interval) {
                case .woken, .failed: return
                case .timedOut, .warning, .critical: break
                }
                guard let usage = resources.currentMemoryUsage(), limit > 0 else { continue }
                let fraction = Double(usage) / Double(limit)
                let level: ImagePipeline.MemoryPressureLevel? =
                    fraction >= MemoryPressureMonitor.samplingCriticalFraction
                    ? .critical
                    : fraction >= MemoryPressureMonitor.samplingWarningFraction ? .warning : nil
                guard let level else {
                    reported = nil
                    state.withLock { $0.samples += 1 }
                    continue
                }
                defer { state.withLock { $0.samples += 1 } }
                let now = ContinuousClock.now
                if let last = reported, last.level == level || last.level == .critical,
                    now - last.at < MemoryPressureMonitor.samplingRepeatInterval
                {
                    continue
                }
                reported = (level, now)
                handler(level)
            }
        }
    }
}
