import CSystem
import Foundation

/// Kernel pressure-stall (PSI) triggers on a memory pressure file, and a
/// wake-up descriptor, waited on together with `poll()`: what a memory
/// monitor thread blocks in. Idle, it costs nothing: the thread sleeps in the
/// kernel until a trigger fires or it is woken.
///
/// A trigger is a line written to the pressure file (`/proc/pressure/memory`
/// or a cgroup v2 `memory.pressure`) opened for writing: `some 150000
/// 2000000` asks for `POLLPRI` whenever tasks stalled on memory for 150 ms
/// within a 2 s window. Since Linux 6.5 unprivileged processes may arm
/// triggers whose window is a multiple of 2 s; older kernels require
/// `CAP_SYS_RESOURCE` and refuse the write (`EPERM`/`EACCES`), which is then
/// the error thrown, so the caller can fall back to sampling.
///
/// `wait` is for one thread (the monitor's); `wake` and `close` are safe from
/// any thread, in any order (after `close`, `wake` does nothing, so it never
/// writes to a descriptor number the process has since reused). `close` must
/// not run during a `wait`: the monitor closes after its thread has ended.
package final class MemoryPressureTrigger: @unchecked Sendable {
    /// What ended a `wait`.
    package enum Event: Sendable, Equatable {
        /// The warning trigger fired: some tasks stalled on memory beyond its threshold.
        case warning
        /// The critical trigger fired: all non-idle tasks stalled on memory beyond its threshold.
        case critical
        /// `wake()` was called.
        case woken
        /// The timeout passed with no event.
        case timedOut
        /// The pressure file reported an error (for example, its cgroup was removed).
        case failed
    }

    /// A trigger: the kind of stall, its threshold and window.
    package struct Threshold: Sendable, Hashable {
        /// "some" (at least one task stalled) or "full" (all non-idle tasks stalled).
        package var kind: String
        package var stall: Duration
        package var window: Duration

        package init(kind: String, stall: Duration, window: Duration) {
            self.kind = kind
            self.stall = stall
            self.window = window
        }

        /// The line the kernel reads: "some 150000 2000000" (microseconds).
        package var line: String {
            "\(kind) \(Self.microseconds(stall)) \(Self.microseconds(window))"
        }

        private static func microseconds(_ duration: Duration) -> Int64 {
            duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
        }
    }

    /// Warning: some task stalled on memory for 150 ms within 2 s (7.5 % of the time).
    package static let warningThreshold = Threshold(kind: "some", stall: .milliseconds(150), window: .seconds(2))
    /// Critical: every non-idle task stalled on memory for 150 ms within 2 s.
    package static let criticalThreshold = Threshold(kind: "full", stall: .milliseconds(150), window: .seconds(2))

    /// The pressure file the triggers are armed on; nil for a wake-up descriptor only.
    package let file: String?
    private let warningDescriptor: Int32
    private let criticalDescriptor: Int32
    private let wakeDescriptor: Int32
    private let closed = LockedState(false)

    /// Triggers armed on `file` (warning and critical) with a wake-up
    /// descriptor, or (for `file` nil) the wake-up descriptor alone, for a
    /// thread that samples instead.
    ///
    /// - Throws: `.fileNotFound` when the file is missing, `.permissionDenied`
    ///   when the kernel refuses an unprivileged trigger, `.unsupportedFeature`
    ///   when it refuses the trigger otherwise (a kernel without PSI triggers),
    ///   `.io` when no descriptor is left.
    package init(
        file: String?, warning: Threshold = warningThreshold, critical: Threshold = criticalThreshold
    ) throws(VipsError) {
        self.file = file
        let wake = vl_eventfd()
        guard wake >= 0 else { throw VipsError(.io, "cannot create an eventfd: \(String(cString: strerror(errno)))") }
        guard let file else {
            wakeDescriptor = wake
            warningDescriptor = -1
            criticalDescriptor = -1
            return
        }
        let warningFD: Int32
        do throws(VipsError) {
            warningFD = try Self.arm(file, warning)
        } catch {
            Glibc.close(wake)
            throw error
        }
        let criticalFD: Int32
        do throws(VipsError) {
            criticalFD = try Self.arm(file, critical)
        } catch {
            Glibc.close(wake)
            Glibc.close(warningFD)
            throw error
        }
        wakeDescriptor = wake
        warningDescriptor = warningFD
        criticalDescriptor = criticalFD
    }

    deinit { close() }

    /// Blocks until a trigger fires, `wake()` is called, or `timeout` passes
    /// (nil: no timeout). A critical event wins over a warning at the same time.
    package func wait(timeout: Duration?) -> Event {
        guard !closed.withLock({ $0 }) else { return .woken }
        var descriptors = [pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0)]
        if warningDescriptor >= 0 {
            descriptors.append(pollfd(fd: criticalDescriptor, events: Int16(POLLPRI), revents: 0))
            descriptors.append(pollfd(fd: warningDescriptor, events: Int16(POLLPRI), revents: 0))
        }
        let milliseconds: Int32 =
            timeout.map { timeout in
                let (seconds, attoseconds) = timeout.components
                return Int32(clamping: max(0, seconds * 1000 + attoseconds / 1_000_000_000_000_000))
            } ?? -1
        while true {
            let ready = descriptors.withUnsafeMutableBufferPointer {
                poll($0.baseAddress, nfds_t($0.count), milliseconds)
            }
            if ready < 0, errno == EINTR { continue }
            guard ready > 0 else { return ready == 0 ? .timedOut : .failed }
            if descriptors[0].revents & Int16(POLLIN) != 0 {
                var count: UInt64 = 0
                _ = Glibc.read(wakeDescriptor, &count, MemoryLayout<UInt64>.size)
                return .woken
            }
            let errors = Int16(POLLERR | POLLHUP | POLLNVAL)
            if descriptors.dropFirst().contains(where: { $0.revents & errors != 0 }) { return .failed }
            if descriptors.count > 1, descriptors[1].revents & Int16(POLLPRI) != 0 { return .critical }
            if descriptors.count > 2, descriptors[2].revents & Int16(POLLPRI) != 0 { return .warning }
        }
    }

    /// Ends a `wait` in progress (or the next one) with `.woken`. Any thread.
    package func wake() {
        closed.withLock { closed in
            guard !closed else { return }
            var one: UInt64 = 1
            _ = Glibc.write(wakeDescriptor, &one, MemoryLayout<UInt64>.size)
        }
    }

    /// Closes the descriptors (the triggers are disarmed). Idempotent.
    package func close() {
        closed.withLock { closed in
            guard !closed else { return }
            closed = true
            for descriptor in [warningDescriptor, criticalDescriptor, wakeDescriptor] where descriptor >= 0 {
                Glibc.close(descriptor)
            }
        }
    }

    /// The calling thread's kernel id (its `/proc/self/task` entry).
    package static var currentThreadID: Int32 { vl_gettid() }

    /// Opens `file` for writing and arms one trigger on it.
    private static func arm(_ file: String, _ threshold: Threshold) throws(VipsError) -> Int32 {
        let descriptor = open(file, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure(errno, "cannot open \(file)") }
        // The kernel reads the trigger as a C string: the NUL is part of the write.
        let line = Array(threshold.line.utf8) + [0]
        let written = line.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        guard written == line.count else {
            let code = written < 0 ? errno : EIO
            Glibc.close(descriptor)
            throw failure(code, "the kernel refused the trigger '\(threshold.line)' on \(file)")
        }
        return descriptor
    }

    private static func failure(_ code: Int32, _ what: String) -> VipsError {
        let reason = String(cString: strerror(code))
        switch code {
        case ENOENT: return VipsError(.fileNotFound, "\(what): \(reason)")
        case EPERM, EACCES: return VipsError(.permissionDenied, "\(what): \(reason)")
        case EINVAL, EOPNOTSUPP, EBUSY: return VipsError(.unsupportedFeature, "\(what): \(reason)")
        default: return VipsError(.io, "\(what): \(reason)")
        }
    }
}
