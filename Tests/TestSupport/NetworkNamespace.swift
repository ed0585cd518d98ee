import Foundation

/// A network namespace of a test's own (`unshare -n`, loopback up): a child
/// run there resolves and connects on its own loopback only, so a name that
/// must fail to resolve sends no DNS query off the machine.
public enum NetworkNamespace {
    /// Why no namespace can be made here (the text for an `XCTSkip`).
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    private static let unshare = "/usr/bin/unshare"

    /// The words that run a command in a fresh namespace with its loopback
    /// up: append the command and its arguments.
    ///
    /// - Throws: `Unavailable` without util-linux's `unshare`, or when
    ///   making a namespace is not allowed (it needs root or CAP_SYS_ADMIN,
    ///   as CI has, and iproute2's `ip`).
    public static func launcher() throws(Unavailable) -> [String] {
        guard FileManager.default.isExecutableFile(atPath: unshare) else {
            throw Unavailable(description: "needs \(unshare) (util-linux) to run in a network namespace of its own")
        }
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: unshare)
        probe.arguments = ["-n", "sh", "-c", "ip link set lo up"]
        probe.standardOutput = FileHandle.nullDevice
        probe.standardError = FileHandle.nullDevice
        do {
            try probe.run()
        } catch {
            throw Unavailable(description: "cannot run \(unshare): \(error)")
        }
        probe.waitUntilExit()
        guard probe.terminationStatus == 0 else {
            throw Unavailable(
                description: "`unshare -n` with `ip link set lo up` failed (needs root or CAP_SYS_ADMIN, and iproute2)")
        }
        return [unshare, "-n", "sh", "-c", "ip link set lo up && exec \"$0\" \"$@\""]
    }
}
