import Foundation
import Synchronization

/// Resource figures of this process, read from the kernel: peak and current
/// resident memory, CPU time. Linux-only (`/proc`), which is what VipsLoad targets.
public enum ProcessStats {
    /// Peak resident set size in bytes since start or the last `resetPeakRSS()` (VmHWM).
    public static var peakRSS: Int { statusField("VmHWM") }

    /// Peak resident set size in bytes over the whole process life, across `resetPeakRSS()` calls.
    public static var peakRSSSinceStart: Int { max(highestBeforeReset.load(ordering: .relaxed), peakRSS) }

    private static let highestBeforeReset = Atomic<Int>(0)

    /// Current resident set size in bytes (VmRSS).
    public static var currentRSS: Int { statusField("VmRSS") }

    /// Resets the peak RSS to the current RSS, so each scenario reports its own
    /// peak (Linux ≥ 4.0: writing 5 to /proc/self/clear_refs). Returns false
    /// when the kernel refuses, in which case peaks are cumulative.
    @discardableResult
    public static func resetPeakRSS() -> Bool {
        let peak = peakRSS
        _ = highestBeforeReset.max(peak, ordering: .relaxed)
        guard let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") else { return false }
        defer { try? handle.close() }
        do { try handle.write(contentsOf: Data("5".utf8)) } catch { return false }
        return true
    }

    /// User + system CPU seconds used by this process so far.
    public static var cpuSeconds: Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }

    /// Monotonic seconds, for measuring intervals.
    public static var now: Double {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }

    private static func statusField(_ name: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix(name + ":") {
            let digits = line.split(separator: " ").compactMap { Int($0) }
            return (digits.first ?? 0) * 1024
        }
        return 0
    }
}
