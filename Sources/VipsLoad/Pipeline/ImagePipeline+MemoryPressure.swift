import VipsCore

extension ImagePipeline {
    /// How hard the system is pressed for memory.
    public enum MemoryPressureLevel: String, Sendable, Hashable, CaseIterable {
        /// Memory is getting short: give back what is cheap to rebuild.
        case warning
        /// Memory is nearly gone: give back everything that can be rebuilt.
        case critical
    }

    /// Gives memory back, as an app does on its platform's low-memory signal.
    ///
    /// `.warning` evicts least recently used bitmaps from the memory cache
    /// until it holds at most half of what it held (its limit is unchanged);
    /// `.critical` empties it. Both then return the freed memory to the
    /// system (`VipsRuntime.releaseFreedMemory()`, glibc's `malloc_trim`), so
    /// the resident size falls with the cache. Requests in flight are not
    /// affected. A pipeline whose `Configuration.monitorsMemoryPressure` is
    /// true calls this by itself when the kernel reports pressure.
    public func handleMemoryPressure(_ level: MemoryPressureLevel) {
        if let memoryCache {
            switch level {
            case .warning: memoryCache.trim(toCost: memoryCache.totalCost / 2)
            case .critical: memoryCache.removeAll()
            }
        }
        VipsRuntime.releaseFreedMemory()
    }

    /// The monitor for a new pipeline, or nil when the configuration turns
    /// it off, there is no memory cache to trim, or nothing can be watched.
    /// It reaches the pipeline through `target`, which the pipeline sets to
    /// itself once made, and which never keeps it alive.
    static func makeMemoryPressureMonitor(
        _ configuration: Configuration,
        target: MemoryPressureTarget
    ) -> MemoryPressureMonitor? {
        guard configuration.monitorsMemoryPressure, configuration.memoryCache != nil else { return nil }
        return MemoryPressureMonitor.start { level in target.pipeline?.handleMemoryPressure(level) }
    }

    /// A weak, locked reference from a pipeline's monitor back to the pipeline.
    final class MemoryPressureTarget: Sendable {
        private struct Reference { weak var pipeline: ImagePipeline? }
        private let reference = LockedState(Reference())

        var pipeline: ImagePipeline? {
            get { reference.withLock { $0.pipeline } }
            set { reference.withLock { $0.pipeline = newValue } }
        }
    }
}
