import Foundation

/// Runs a peer tool as a child process and measures it: wall time and the
/// child's peak resident memory.
///
/// The peak comes from GNU time (`/usr/bin/time -f %M`), not from our own
/// `wait4`: Linux carries a parent's RSS high-water mark into the children it
/// spawns (it is recorded when the child execs), so a child of this large
/// benchmark process would report our peak, not its own.
public enum PeerProcess {
    public struct Measurement: Sendable {
        public let seconds: Double
        public let peakRSS: Int
        public let status: Int32
    }

    /// Runs `arguments` under GNU time (installed if missing) and returns its
    /// wall time and peak RSS (0 when GNU time is unavailable).
    public static func measure(_ arguments: [String]) throws -> Measurement {
        guard ensure("/usr/bin/time", package: "time") else {
            let plain = try run(arguments)
            return Measurement(seconds: plain.seconds, peakRSS: 0, status: plain.status)
        }
        let report = FileManager.default.temporaryDirectory.appendingPathComponent("vipsload-time-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: report) }
        let timed = try run(["/usr/bin/time", "-f", "%M", "-o", report.path] + arguments)
        let text = (try? String(contentsOf: report, encoding: .utf8)) ?? ""
        let kilobytes =
            text.split(whereSeparator: \.isNewline).last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } ?? 0
        return Measurement(seconds: timed.seconds, peakRSS: kilobytes * 1024, status: timed.status)
    }

    /// Runs `arguments` (the first is looked up on PATH), output discarded.
    /// Its `peakRSS` is what `wait4` reports, which includes our own (see above).
    public static func run(_ arguments: [String]) throws -> Measurement {
        var pid: pid_t = 0
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let start = ProcessStats.now
        let spawned = posix_spawnp(&pid, arguments[0], &actions, nil, &argv, environ)
        guard spawned == 0 else {
            throw NSError(
                domain: "PeerProcess", code: Int(spawned),
                userInfo: [
                    NSLocalizedDescriptionKey: "cannot start \(arguments[0]): \(String(cString: strerror(spawned)))"
                ])
        }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
        let seconds = ProcessStats.now - start
        let exitCode: Int32 = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        return Measurement(seconds: seconds, peakRSS: Int(usage.ru_maxrss) * 1024, status: exitCode)
    }

    /// Whether `tool` (a name on PATH, or an absolute path) can be run.
    public static func isAvailable(_ tool: String) -> Bool {
        if tool.hasPrefix("/") { return access(tool, X_OK) == 0 }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").contains { access("\($0)/\(tool)", X_OK) == 0 }
    }

    /// Installs a Debian package with apt-get when `tool` is missing and we are root.
    /// Returns whether the tool is available afterwards.
    public static func ensure(_ tool: String, package: String) -> Bool {
        if isAvailable(tool) { return true }
        guard getuid() == 0 else { return false }
        _ = try? run(["apt-get", "update", "-qq"])
        _ = try? run([
            "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-qq", "--no-install-recommends",
            package
        ])
        return isAvailable(tool)
    }
}
