import CSystem
import Foundation

/// What this process may use of the machine, as the kernel limits it: CPUs
/// (affinity and cgroup CPU quota) and memory (cgroup limit, else physical
/// memory), and where memory pressure can be watched.
///
/// The host's core count and RAM are the wrong defaults in a container: a pod
/// limited to 1 CPU and 256 MiB on a 64-core, 64 GiB node would otherwise
/// start 64 decode threads and keep a 512 MiB cache. VipsLoad's defaults
/// (decode concurrency, memory-cache size, the CLI's jobs) come from here.
///
/// - Usable CPUs: the CPUs in the process's affinity mask
///   (`sched_getaffinity`, which also reflects a cpuset), capped by the
///   cgroup's CPU quota (v2 `cpu.max`, v1 `cpu.cfs_quota_us` /
///   `cpu.cfs_period_us`, the lowest along the cgroup's ancestors), rounded
///   up; at least 1.
/// - Memory limit: the lowest cgroup v2 `memory.max` or `memory.high`, or v1
///   `memory.limit_in_bytes`, of the process's cgroup and its ancestors, found
///   through `/proc/self/cgroup` and `/proc/self/mountinfo`; physical memory
///   (`MemTotal`) when there is none or it is higher.
///
/// Every read is defensive: a missing, unreadable or garbage file means "no
/// limit known" there, never a crash. `description` says what was read where.
public struct SystemResources: Sendable, Hashable, CustomStringConvertible {
    /// Where `memoryLimit` comes from.
    public enum MemoryLimitSource: String, Sendable, Hashable {
        /// cgroup v2 `memory.max` (the hard limit: beyond it, the OOM killer).
        case cgroupV2Max = "cgroup v2 memory.max"
        /// cgroup v2 `memory.high` (beyond it the kernel throttles and reclaims).
        case cgroupV2High = "cgroup v2 memory.high"
        /// cgroup v1 `memory.limit_in_bytes`.
        case cgroupV1Limit = "cgroup v1 memory.limit_in_bytes"
        /// No cgroup limit below physical memory: `MemTotal` of `/proc/meminfo`.
        case physicalMemory = "physical memory"
    }

    /// CPUs this process can use at once: affinity capped by the CPU quota, at least 1.
    public var usableCPUs: Int
    /// The CPUs in the affinity mask, ascending; nil when `sched_getaffinity` failed.
    public var affinityCPUs: [Int]?
    /// CPUs online in the machine (`sysconf(_SC_NPROCESSORS_ONLN)`).
    public var onlineCPUs: Int
    /// The cgroup CPU quota in CPUs (1.5 is one and a half CPUs' time per
    /// period); nil when there is none.
    public var cpuQuota: Double?
    /// The file `cpuQuota` was read from (for v1, the quota file).
    public var cpuQuotaFile: String?

    /// The memory this process may use: the cgroup limit, or physical memory.
    public var memoryLimit: Int
    /// Where `memoryLimit` comes from.
    public var memoryLimitSource: MemoryLimitSource
    /// The cgroup file `memoryLimit` was read from; nil for physical memory.
    public var memoryLimitFile: String?
    /// Physical memory (`MemTotal`, else `ProcessInfo.physicalMemory`).
    public var physicalMemory: Int
    /// Memory the kernel estimates is available without swapping
    /// (`MemAvailable`) when detected; nil when unknown.
    public var availableMemory: Int?

    /// The pressure stall (PSI) file for memory: the cgroup v2 `memory.pressure`
    /// of this process's cgroup, else `/proc/pressure/memory`; nil when
    /// neither exists (a kernel without PSI, or booted with `psi=0`).
    public var memoryPressureFile: String?
    /// The cgroup file holding the memory usage counted against
    /// `memoryLimit` (v2 `memory.current`, v1 `memory.usage_in_bytes`); nil
    /// without a cgroup limit.
    public var memoryUsageFile: String?
    /// The `memory.stat` next to `memoryUsageFile` (its inactive file cache is
    /// reclaimable, so not counted as used).
    var memoryStatFile: String?
    /// `/proc/meminfo` as read (used when there is no cgroup limit).
    var memInfoFile: String

    /// Which cgroup hierarchies were found: "v2", "v1", "v1 and v2 (hybrid)" or "none".
    public var controlGroups: String
    /// What was read where, one line per finding, in reading order.
    public var notes: [String]

    /// The resources detected once, at first use. (A process's limits rarely
    /// change while it runs; `detect()` reads them again.)
    public static let current = SystemResources.detect()

    /// Reads the resources from the running system now.
    public static func detect() -> SystemResources {
        detect(root: "/", affinity: Self.affinity())
    }

    /// Reads the resources from the files below `root` (the real system is
    /// "/"; tests point it at a fixture tree holding `proc/self/cgroup`,
    /// `proc/self/mountinfo`, `proc/meminfo`, `proc/pressure/memory` and the
    /// cgroup folders the mountinfo names). `affinity` is the affinity mask's
    /// CPUs (nil when unknown).
    package static func detect(root: String, affinity: [Int]?) -> SystemResources {
        var reader = Reader(root: root)
        return reader.detect(affinity: affinity)
    }

    /// Memory in use now, counted as the kernel counts it against
    /// `memoryLimit`: the cgroup's usage less its inactive file cache (which
    /// the kernel reclaims before it runs out), or, without a cgroup limit,
    /// `MemTotal − MemAvailable`. nil when it cannot be read.
    public func currentMemoryUsage() -> Int? {
        if let usageFile = memoryUsageFile {
            guard let text = Reader.contents(usageFile), case .value(let usage)? = ControlGroupFiles.limit(text) else {
                return nil
            }
            let stat = memoryStatFile.flatMap(Reader.contents).map(ControlGroupFiles.keyedValues) ?? [:]
            // v2 "inactive_file"; v1 "total_inactive_file" (hierarchical), else "inactive_file".
            let inactive = stat["total_inactive_file"] ?? stat["inactive_file"] ?? 0
            return max(0, usage - min(inactive, usage))
        }
        guard let text = Reader.contents(memInfoFile) else { return nil }
        let info = ControlGroupFiles.memInfo(text)
        guard let total = info["MemTotal"], let available = info["MemAvailable"] else { return nil }
        return max(0, total - available)
    }

    /// Several lines: CPUs, memory, pressure, each saying where it came from.
    public var description: String {
        var lines: [String] = []
        let affinityText =
            affinityCPUs.map { "affinity \($0.count) of \(onlineCPUs) online CPUs (\(Self.cpuRanges($0)))" }
            ?? "affinity unknown, \(onlineCPUs) online CPUs"
        let quotaText =
            cpuQuota.map { String(format: "CPU quota %.2f CPUs (%@)", $0, cpuQuotaFile ?? "?") } ?? "no CPU quota"
        lines.append("usable CPUs: \(usableCPUs) (\(affinityText); \(quotaText))")
        let limitWhere =
            memoryLimitFile.map { "\(memoryLimitSource.rawValue), \($0)" }
            ?? "\(memoryLimitSource.rawValue), MemTotal of \(memInfoFile)"
        lines.append("memory limit: \(Self.bytes(memoryLimit)) (\(limitWhere))")
        lines.append(
            "physical memory: \(Self.bytes(physicalMemory))"
                + (availableMemory.map { ", available \(Self.bytes($0)) (MemAvailable)" } ?? ""))
        if let usage = currentMemoryUsage() {
            lines.append("memory in use: \(Self.bytes(usage)) (\(memoryUsageFile ?? "MemTotal − MemAvailable"))")
        }
        lines.append("memory pressure (PSI): \(memoryPressureFile ?? "not available")")
        lines.append("cgroups: \(controlGroups)")
        lines.append(contentsOf: notes.map { "  read: \($0)" })
        return lines.joined(separator: "\n")
    }

    /// "512 MiB", "1.5 GiB".
    static func bytes(_ count: Int) -> String {
        let mib = Double(count) / 1_048_576
        return mib >= 1024 ? String(format: "%.1f GiB", mib / 1024) : String(format: "%.0f MiB", mib)
    }

    /// "0-3,6".
    static func cpuRanges(_ cpus: [Int]) -> String {
        var parts: [String] = []
        var index = 0
        while index < cpus.count {
            var end = index
            while end + 1 < cpus.count, cpus[end + 1] == cpus[end] + 1 { end += 1 }
            parts.append(end == index ? "\(cpus[index])" : "\(cpus[index])-\(cpus[end])")
            index = end + 1
        }
        return parts.joined(separator: ",")
    }

    /// The calling thread's affinity mask, ascending (threads inherit it, so
    /// it is the process's unless someone changed one thread's); nil when the
    /// call fails.
    package static func affinity() -> [Int]? {
        var size = 128 // 1,024 CPUs; doubled while the kernel's mask is larger.
        while size <= 1 << 20 {
            var mask = [UInt8](repeating: 0, count: size)
            let written = mask.withUnsafeMutableBufferPointer { vl_sched_getaffinity($0.count, $0.baseAddress) }
            if written > 0 {
                var cpus: [Int] = []
                for (byteIndex, byte) in mask.prefix(Int(written)).enumerated() where byte != 0 {
                    for bit in 0..<8 where byte & (1 << bit) != 0 { cpus.append(byteIndex * 8 + bit) }
                }
                return cpus.isEmpty ? nil : cpus
            }
            guard errno == EINVAL else { return nil }
            size *= 2
        }
        return nil
    }
}

extension SystemResources {
    /// Reads the files below a root; collects notes as it goes.
    struct Reader {
        let root: String
        var notes: [String] = []

        init(root: String) {
            self.root = root.hasSuffix("/") ? String(root.dropLast()) : root
        }

        /// `path` (absolute, as the system names it) below the root.
        func path(_ absolute: String) -> String { root + absolute }

        /// The contents of a small file; nil when missing, unreadable or not UTF-8.
        static func contents(_ path: String) -> String? {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            defer { close(fd) }
            var data: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while data.count < 1 << 20 {
                let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                data.append(contentsOf: buffer.prefix(count))
            }
            return String(validating: data, as: UTF8.self)
        }

        static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

        /// A cgroup's folder and its ancestors up to the mount point, innermost first.
        static func lineage(_ folder: String, mountPoint: String) -> [String] {
            var folders = [folder]
            var current = folder
            let top = mountPoint.hasSuffix("/") && mountPoint.count > 1 ? String(mountPoint.dropLast()) : mountPoint
            while current != top, current.count > top.count, let slash = current.lastIndex(of: "/") {
                current = slash == current.startIndex ? "/" : String(current[..<slash])
                folders.append(current)
            }
            return folders
        }

        mutating func detect(affinity: [Int]?) -> SystemResources {
            let online = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
            let memberships = Self.contents(path("/proc/self/cgroup")).map(ControlGroupFiles.memberships) ?? []
            let mounts = Self.contents(path("/proc/self/mountinfo")).map(ControlGroupFiles.cgroupMounts) ?? []
            if memberships.isEmpty { notes.append("\(path("/proc/self/cgroup")): missing or unreadable") }

            // The folder of each hierarchy this process is in: v2 once, v1 per controller.
            let root = self.root
            func folder(
                _ membership: ControlGroupFiles.Membership?, in candidates: [ControlGroupFiles.Mount]
            )
                -> (folder: String, mountPoint: String)?
            {
                guard let membership else { return nil }
                for mount in candidates {
                    if let folder = ControlGroupFiles.folder(
                        of: membership.path, mountRoot: mount.root, mountPoint: mount.mountPoint)
                    {
                        return (root + folder, root + mount.mountPoint)
                    }
                }
                return nil
            }
            let unified = folder(memberships.first(where: \.isUnified), in: mounts.filter(\.isUnified))
            func v1Folder(_ controller: String) -> (folder: String, mountPoint: String)? {
                folder(
                    memberships.first { $0.controllers.contains(controller) },
                    in: mounts.filter { !$0.isUnified && $0.superOptions.contains(controller) })
            }
            let v1Memory = v1Folder("memory"), v1CPU = v1Folder("cpu")
            let hasV1 = mounts.contains { !$0.isUnified }, hasV2 = unified != nil
            let controlGroups = hasV1 && hasV2 ? "v1 and v2 (hybrid)" : hasV1 ? "v1" : hasV2 ? "v2" : "none"

            // CPUs.
            var quota: (cpus: Double, file: String)?
            if let v1CPU {
                quota = cpuQuotaV1(v1CPU.folder, mountPoint: v1CPU.mountPoint)
            } else if let unified {
                quota = cpuQuotaV2(unified.folder, mountPoint: unified.mountPoint)
            }
            var usable = affinity?.count ?? online
            if let quota { usable = min(usable, max(1, Int(quota.cpus.rounded(.up)))) }
            usable = max(1, usable)

            // Memory.
            let memInfoFile = path("/proc/meminfo")
            let memInfo = Self.contents(memInfoFile).map(ControlGroupFiles.memInfo) ?? [:]
            let physical: Int
            if let total = memInfo["MemTotal"], total > 0 {
                physical = total
            } else {
                physical = Int(clamping: ProcessInfo.processInfo.physicalMemory)
                notes.append("\(memInfoFile): no MemTotal, physical memory from sysconf")
            }
            var limit: (bytes: Int, source: MemoryLimitSource, folder: String, file: String)?
            if let v1Memory {
                limit = memoryLimitV1(v1Memory.folder, mountPoint: v1Memory.mountPoint)
            } else if let unified {
                limit = memoryLimitV2(unified.folder, mountPoint: unified.mountPoint)
            }
            if let found = limit, found.bytes >= physical {
                notes.append("\(found.file): \(found.bytes) bytes, not below physical memory")
                limit = nil
            }

            // Pressure: the cgroup's own (a container's pressure) before the system's.
            var pressureFile: String?
            if let unified, Self.exists(unified.folder + "/memory.pressure") {
                pressureFile = unified.folder + "/memory.pressure"
            } else if Self.exists(path("/proc/pressure/memory")) {
                pressureFile = path("/proc/pressure/memory")
            }

            let usageFile = limit.map {
                $0.source == .cgroupV1Limit ? $0.folder + "/memory.usage_in_bytes" : $0.folder + "/memory.current"
            }
            return SystemResources(
                usableCPUs: usable, affinityCPUs: affinity, onlineCPUs: online, cpuQuota: quota?.cpus,
                cpuQuotaFile: quota?.file, memoryLimit: limit?.bytes ?? physical,
                memoryLimitSource: limit?.source ?? .physicalMemory, memoryLimitFile: limit?.file,
                physicalMemory: physical, availableMemory: memInfo["MemAvailable"],
                memoryPressureFile: pressureFile, memoryUsageFile: usageFile,
                memoryStatFile: limit.map { $0.folder + "/memory.stat" }, memInfoFile: memInfoFile,
                controlGroups: controlGroups, notes: notes)
        }

        /// The lowest v2 `cpu.max` along the cgroup's ancestors.
        mutating func cpuQuotaV2(_ folder: String, mountPoint: String) -> (cpus: Double, file: String)? {
            var lowest: (cpus: Double, file: String)?
            for level in Self.lineage(folder, mountPoint: mountPoint) {
                let file = level + "/cpu.max"
                guard let text = Self.contents(file) else { continue }
                switch ControlGroupFiles.cpuMax(text) {
                case .cpus(let cpus)?:
                    notes.append("\(file): \(text.trimmingASCIIWhitespace()) = \(String(format: "%.2f", cpus)) CPUs")
                    if cpus < lowest?.cpus ?? .infinity { lowest = (cpus, file) }
                case .unlimited?: notes.append("\(file): no quota")
                case nil: notes.append("\(file): unreadable value ignored")
                }
            }
            return lowest
        }

        /// The lowest v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us` along the cgroup's ancestors.
        mutating func cpuQuotaV1(_ folder: String, mountPoint: String) -> (cpus: Double, file: String)? {
            var lowest: (cpus: Double, file: String)?
            for level in Self.lineage(folder, mountPoint: mountPoint) {
                let file = level + "/cpu.cfs_quota_us"
                guard let quotaText = Self.contents(file) else { continue }
                switch ControlGroupFiles.cfsQuota(
                    quota: quotaText, period: Self.contents(level + "/cpu.cfs_period_us") ?? "")
                {
                case .cpus(let cpus)?:
                    notes.append(
                        "\(file): \(quotaText.trimmingASCIIWhitespace()) = \(String(format: "%.2f", cpus)) CPUs")
                    if cpus < lowest?.cpus ?? .infinity { lowest = (cpus, file) }
                case .unlimited?: notes.append("\(file): no quota")
                case nil: notes.append("\(file): unreadable value ignored")
                }
            }
            return lowest
        }

        /// The lowest v2 `memory.max` or `memory.high` along the cgroup's ancestors.
        mutating func memoryLimitV2(
            _ folder: String, mountPoint: String
        )
            -> (bytes: Int, source: MemoryLimitSource, folder: String, file: String)?
        {
            var lowest: (bytes: Int, source: MemoryLimitSource, folder: String, file: String)?
            for level in Self.lineage(folder, mountPoint: mountPoint) {
                for (name, source) in [("memory.max", MemoryLimitSource.cgroupV2Max), ("memory.high", .cgroupV2High)] {
                    let file = level + "/" + name
                    guard let text = Self.contents(file) else { continue }
                    switch ControlGroupFiles.limit(text) {
                    case .value(let bytes)? where bytes > 0:
                        notes.append("\(file): \(bytes) bytes")
                        if bytes < lowest?.bytes ?? .max { lowest = (bytes, source, level, file) }
                    case .unlimited?: notes.append("\(file): no limit")
                    case .value?, nil: notes.append("\(file): unreadable value ignored")
                    }
                }
            }
            return lowest
        }

        /// The lowest v1 `memory.limit_in_bytes` along the cgroup's ancestors.
        mutating func memoryLimitV1(
            _ folder: String, mountPoint: String
        )
            -> (bytes: Int, source: MemoryLimitSource, folder: String, file: String)?
        {
            var lowest: (bytes: Int, source: MemoryLimitSource, folder: String, file: String)?
            for level in Self.lineage(folder, mountPoint: mountPoint) {
                let file = level + "/memory.limit_in_bytes"
                guard let text = Self.contents(file) else { continue }
                switch ControlGroupFiles.limit(text) {
                case .value(let bytes)? where bytes > 0:
                    notes.append("\(file): \(bytes) bytes")
                    if bytes < lowest?.bytes ?? .max { lowest = (bytes, .cgroupV1Limit, level, file) }
                case .unlimited?: notes.append("\(file): no limit")
                case .value?, nil: notes.append("\(file): unreadable value ignored")
                }
            }
            return lowest
        }
    }
}
