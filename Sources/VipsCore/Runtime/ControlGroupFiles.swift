/// Parsers for the text files in which Linux describes a process's cgroups,
/// mounts and memory: pure functions over file contents, so every one is
/// tested on real layouts without a kernel.
///
/// Every parser is defensive: a line or value it cannot read is skipped or
/// gives nil ("not known"), never a crash, never a guess.
package enum ControlGroupFiles {
    /// One line of `/proc/self/cgroup`: `hierarchy-ID:controller-list:path`.
    package struct Membership: Sendable, Hashable {
        /// 0 for the cgroup v2 (unified) hierarchy.
        package var hierarchyID: Int
        /// v1 controllers of this hierarchy (`cpu`, `cpuacct`, `memory`, `name=systemd`); empty for v2.
        package var controllers: [String]
        /// The cgroup's path inside its hierarchy, from the hierarchy's root ("/" for the root).
        package var path: String

        /// True for the v2 hierarchy's line (`0::/path`).
        package var isUnified: Bool { hierarchyID == 0 && controllers.isEmpty }
    }

    /// One cgroup file system mounted in this mount namespace (a line of `/proc/self/mountinfo`).
    package struct Mount: Sendable, Hashable {
        /// The folder of the hierarchy that is mounted (field 4), "/" for the whole hierarchy.
        package var root: String
        /// Where it is mounted (field 5).
        package var mountPoint: String
        /// `cgroup` (v1) or `cgroup2`.
        package var fileSystemType: String
        /// v1: the controllers of the hierarchy, from the super options (`rw,cpu,cpuacct`).
        package var superOptions: [String]

        package var isUnified: Bool { fileSystemType == "cgroup2" }
    }

    /// A limit as a cgroup file states it.
    package enum Limit: Sendable, Hashable {
        /// `max`, `-1`, or a number so large it is the kernel's "no limit" (v1
        /// writes 9223372036854771712, `PAGE_COUNTER_MAX` pages).
        case unlimited
        /// A limit in the file's unit (bytes, microseconds).
        case value(Int)
    }

    /// Values at or above this are "no limit" (2^62 bytes is 4 EiB: no machine has it).
    package static let unlimitedThreshold = 1 << 62

    /// The lines of `/proc/self/cgroup`; malformed lines are skipped.
    package static func memberships(_ text: String) -> [Membership] {
        text.split(separator: "\n").compactMap { line -> Membership? in
            // The path may itself contain ':', so split into three at most.
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3, let id = Int(fields[0]), id >= 0, fields[2].hasPrefix("/") else { return nil }
            let controllers = fields[1].split(separator: ",").map(String.init)
            return Membership(hierarchyID: id, controllers: controllers, path: String(fields[2]))
        }
    }

    /// The cgroup mounts listed in `/proc/self/mountinfo` (v1 `cgroup` and v2
    /// `cgroup2`), in file order; other mounts and malformed lines are skipped.
    ///
    /// A line is `ID parent major:minor root mount-point options [optional
    /// fields...] - type source super-options`; paths escape space, tab,
    /// newline and backslash as octal (`\040`).
    package static func cgroupMounts(_ text: String) -> [Mount] {
        text.split(separator: "\n").compactMap { line -> Mount? in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            guard let separator = fields.firstIndex(of: "-"), separator >= 6, fields.count >= separator + 3 else {
                return nil
            }
            let type = fields[separator + 1]
            guard type == "cgroup" || type == "cgroup2" else { return nil }
            let superOptions = fields[separator + 3..<fields.count].joined(separator: " ")
                .split(separator: ",").map(String.init)
            return Mount(
                root: unescape(fields[3]), mountPoint: unescape(fields[4]), fileSystemType: type,
                superOptions: superOptions)
        }
    }

    /// A single-value limit file: `memory.max`, `memory.high`,
    /// `memory.limit_in_bytes`, `cpu.cfs_quota_us`. nil for garbage (empty,
    /// not a number, negative other than -1).
    package static func limit(_ text: String) -> Limit? {
        let value = text.trimmingASCIIWhitespace()
        if value == "max" || value == "-1" { return .unlimited }
        guard !value.isEmpty, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        // All digits: too many for an Int is as unlimited as 2^62.
        guard let number = Int(value) else { return .unlimited }
        return number >= unlimitedThreshold ? .unlimited : .value(number)
    }

    /// cgroup v2 `cpu.max`: `$QUOTA $PERIOD` in microseconds, or `max
    /// $PERIOD` for none. Returns the quota in CPUs (quota / period), or
    /// `.unlimited`; nil for garbage (a zero period, one field, words).
    package static func cpuMax(_ text: String) -> CPUQuota? {
        let fields = text.trimmingASCIIWhitespace().split(separator: " ")
        guard fields.count == 2, case .value(let period)? = limit(String(fields[1])), period > 0 else { return nil }
        switch limit(String(fields[0])) {
        case .unlimited?: return .unlimited
        case .value(let quota)?: return quota > 0 ? .cpus(Double(quota) / Double(period)) : nil
        case nil: return nil
        }
    }

    /// cgroup v1 `cpu.cfs_quota_us` (-1 for none) with `cpu.cfs_period_us`.
    package static func cfsQuota(quota quotaText: String, period periodText: String) -> CPUQuota? {
        switch limit(quotaText) {
        case .unlimited?: return .unlimited
        case .value(let quota)?:
            guard quota > 0, case .value(let period)? = limit(periodText), period > 0 else { return nil }
            return .cpus(Double(quota) / Double(period))
        case nil: return nil
        }
    }

    /// A CPU bandwidth limit.
    package enum CPUQuota: Sendable, Hashable {
        case unlimited
        /// The quota as a number of CPUs' worth of time per period (1.5 = one and a half CPUs).
        case cpus(Double)
    }

    /// The `name: value kB` lines of `/proc/meminfo`, in bytes. Lines that do
    /// not parse are skipped.
    package static func memInfo(_ text: String) -> [String: Int] {
        var values: [String: Int] = [:]
        for line in text.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = String(line[..<colon])
            let rest = line[line.index(after: colon)...].split(separator: " ")
            guard let first = rest.first, let number = Int(first), number >= 0 else { continue }
            let unit = rest.count > 1 ? rest[1] : ""
            let (bytes, overflow) = number.multipliedReportingOverflow(by: unit == "kB" ? 1024 : 1)
            if !overflow { values[name] = bytes }
        }
        return values
    }

    /// The `key value` lines of a cgroup `memory.stat`; lines that do not parse are skipped.
    package static func keyedValues(_ text: String) -> [String: Int] {
        var values: [String: Int] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count == 2, let number = Int(fields[1]), number >= 0 else { continue }
            values[String(fields[0])] = number
        }
        return values
    }

    /// A CPU list as in `cpuset.cpus` (`0-3,8,10-11`); nil for garbage.
    package static func cpuList(_ text: String) -> [Int]? {
        let value = text.trimmingASCIIWhitespace()
        if value.isEmpty { return [] }
        var cpus: [Int] = []
        for range in value.split(separator: ",") {
            let bounds = range.split(separator: "-", omittingEmptySubsequences: false)
            guard bounds.count <= 2, let low = Int(bounds[0]), low >= 0 else { return nil }
            let high = bounds.count == 2 ? Int(bounds[1]) : low
            guard let high, high >= low, high - low < 65_536 else { return nil }
            cpus.append(contentsOf: low...high)
        }
        return cpus
    }

    /// Where a cgroup's files are: the folder of `path` (a membership's path)
    /// under a mount of its hierarchy whose `root` is `mountRoot`, or nil when
    /// the cgroup lies outside what is mounted.
    ///
    /// Without a cgroup namespace a container sees its full path
    /// (`/docker/abc`) in `/proc/self/cgroup` and only its own subtree
    /// mounted (`root` `/docker/abc`): the folder is then the mount point.
    package static func folder(of path: String, mountRoot: String, mountPoint: String) -> String? {
        let root = mountRoot == "/" ? "" : (mountRoot.hasSuffix("/") ? String(mountRoot.dropLast()) : mountRoot)
        guard path == root || path.hasPrefix(root + "/") || root.isEmpty else { return nil }
        let relative = path.dropFirst(root.count)
        let base = mountPoint.hasSuffix("/") ? String(mountPoint.dropLast()) : mountPoint
        let parts = relative.split(separator: "/").filter { $0 != "." && $0 != ".." }
        return parts.isEmpty ? (base.isEmpty ? "/" : base) : base + "/" + parts.joined(separator: "/")
    }

    /// `\ooo` octal escapes undone (mountinfo escapes space, tab, newline, backslash).
    static func unescape(_ field: String) -> String {
        guard field.contains("\\") else { return field }
        var bytes: [UInt8] = []
        let source = Array(field.utf8)
        var index = 0
        while index < source.count {
            if source[index] == UInt8(ascii: "\\"), index + 3 < source.count,
                let value = octal(source[(index + 1)...(index + 3)])
            {
                bytes.append(value)
                index += 4
            } else {
                bytes.append(source[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func octal(_ digits: ArraySlice<UInt8>) -> UInt8? {
        var value = 0
        for digit in digits {
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "7") else { return nil }
            value = value * 8 + Int(digit - UInt8(ascii: "0"))
        }
        return value <= 255 ? UInt8(value) : nil
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces, tabs, newlines and NULs.
    func trimmingASCIIWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" || $0 == "\0" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}
