import Foundation
import XCTest

@testable import VipsCore

/// A fake system root in a temporary folder: `/proc/self/cgroup`,
/// `/proc/self/mountinfo`, `/proc/meminfo` and cgroup folders laid out as
/// the kernel lays them out, for `SystemResources.detect(root:affinity:)`.
final class SystemRootFixture {
    let root: String

    init(_ test: XCTestCase) throws {
        root = NSTemporaryDirectory() + "vipsload-sysroot-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let root = self.root
        test.addTeardownBlock { try? FileManager.default.removeItem(atPath: root) }
    }

    /// Writes `contents` at `path` (absolute, as the system names it) below the root.
    func write(_ path: String, _ contents: String) throws {
        try write(path, Data(contents.utf8))
    }

    func write(_ path: String, _ data: Data) throws {
        let url = URL(fileURLWithPath: root + path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url)
    }

    /// 16 GiB of RAM, 12 GiB available.
    func meminfo(totalKiB: Int = 16 << 20, availableKiB: Int = 12 << 20) throws {
        try write(
            "/proc/meminfo",
            """
            MemTotal:       \(totalKiB) kB
            MemFree:         1000000 kB
            MemAvailable:   \(availableKiB) kB
            Buffers:          123456 kB
            HugePages_Total:       0

            """)
    }

    /// A pure cgroup v2 system: the unified hierarchy mounted at /sys/fs/cgroup.
    func unified(path: String, mountRoot: String = "/") throws {
        try write("/proc/self/cgroup", "0::\(path)\n")
        try write(
            "/proc/self/mountinfo",
            """
            22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
            25 22 0:23 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
            30 22 0:26 \(mountRoot) /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
            31 22 0:27 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw

            """)
    }
}

/// `SystemResources` on fixture trees of real cgroup v1 and v2 layouts:
/// nested cgroups, `max`, huge numbers, missing controllers, garbage.
final class SystemResourcesTests: XCTestCase {
    private let eightCPUs = Array(0..<8)

    // MARK: - cgroup v2

    func testV2NestedCgroupsTakeTheLowestLimitAlongTheAncestors() throws {
        let system = try SystemRootFixture(self)
        try system.meminfo()
        try system.unified(path: "/kubepods.slice/pod1/ctr")
        let base = "/sys/fs/cgroup/kubepods.slice"
        try system.write("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n")
        try system.write(base + "/memory.max", "1073741824\n")
        try system.write(base + "/cpu.max", "max 100000\n")
        try system.write(base + "/pod1/memory.max", "268435456\n")
        try system.write(base + "/pod1/memory.high", "max\n")
        try system.write(base + "/pod1/cpu.max", "150000 100000\n")
        try system.write(base + "/pod1/ctr/memory.max", "max\n")
        try system.write(base + "/pod1/ctr/memory.high", "max\n")
        try system.write(base + "/pod1/ctr/cpu.max", "max 100000\n")
        try system.write(base + "/pod1/ctr/memory.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")

        let resources = SystemResources.detect(root: system.root, affinity: eightCPUs)
        XCTAssertEqual(resources.controlGroups, "v2")
        XCTAssertEqual(resources.cpuQuota, 1.5, "pod1's quota, the lowest on the way up")
        XCTAssertEqual(resources.cpuQuotaFile, system.root + base + "/pod1/cpu.max")
        XCTAssertEqual(resources.usableCPUs, 2, "1.5 CPUs rounded up, below the 8 of the affinity")
        XCTAssertEqual(resources.memoryLimit, 256 << 20)
        XCTAssertEqual(resources.memoryLimitSource, .cgroupV2Max)
        XCTAssertEqual(resources.memoryLimitFile, system.root + base + "/pod1/memory.max")
        XCTAssertEqual(resources.physicalMemory, 16 << 30)
        XCTAssertEqual(resources.availableMemory, 12 << 30)
        XCTAssertEqual(
            resources.memoryPressureFile, system.root + base + "/pod1/ctr/memory.pressure",
            "the container's own pressure before the system's")
        XCTAssertEqual(
            resources.memoryUsageFile, system.root + base + "/pod1/memory.current",
            "usage is read where the limit is")
        XCTAssertTrue(
            resources.description.contains(
                "memory limit: 256 MiB (cgroup v2 memory.max, \(system.root + base)/pod1/memory.max)"),
            resources.description)

        // Usage: memory.current less the inactive file cache the kernel can reclaim.
        XCTAssertNil(resources.currentMemoryUsage(), "no memory.current yet")
        try system.write(base + "/pod1/memory.current", "104857600\n")
        try system.write(
            base + "/pod1/memory.stat", "anon 52428800\nfile 52428800\ninactive_file 41943040\nactive_file 10485760\n")
        XCTAssertEqual(resources.currentMemoryUsage(), 60 << 20)
    }

    func testV2MemoryHighBelowMaxIsTheLimit() throws {
        let system = try SystemRootFixture(self)
        try system.meminfo()
        try system.unified(path: "/user.slice/app.service")
        try system.write("/sys/fs/cgroup/user.slice/app.service/memory.max", "1073741824")
        try system.write("/sys/fs/cgroup/user.slice/app.service/memory.high", "805306368")
        let resources = SystemResources.detect(root: system.root, affinity: [0, 1])
        XCTAssertEqual(resources.memoryLimit, 768 << 20)
        XCTAssertEqual(resources.memoryLimitSource, .cgroupV2High)
        XCTAssertEqual(resources.usableCPUs, 2, "no cpu.max anywhere: the affinity")
        XCTAssertNil(resources.cpuQuota)
    }

    func testV2InsideACgroupNamespaceReadsTheMountPoint() throws {
        // Docker with a cgroup namespace: the container's cgroup is "/" and is what is mounted.
        let system = try SystemRootFixture(self)
        try system.meminfo()
        try system.unified(path: "/")
        try system.write("/sys/fs/cgroup/memory.max", "536870912\n")
        try system.write("/sys/fs/cgroup/cpu.max", "50000 100000\n")
        try system.write("/proc/pressure/memory", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
        let resources = SystemResources.detect(root: system.root, affinity: eightCPUs)
        XCTAssertEqual(resources.memoryLimit, 512 << 20)
        XCTAssertEqual(resources.cpuQuota, 0.5)
        XCTAssertEqual(resources.usableCPUs, 1, "half a CPU is still at least one")
        XCTAssertEqual(
            resources.memoryPressureFile, system.root + "/proc/pressure/memory",
            "no memory.pressure in the cgroup: the system's")
    }

    func testV2ContainerWithoutNamespaceSeesItsSubtreeMountedAtTheMountPoint() throws {
        // /proc/self/cgroup shows the full path; only the container's subtree is mounted.
        let system = try SystemRootFixture(self)
        try system.meminfo()
        try system.unified(path: "/system.slice/docker-abc.scope", mountRoot: "/system.slice/docker-abc.scope")
        try system.write("/sys/fs/cgroup/memory.max", "134217728\n")
        let resources = SystemResources.detect(root: system.root, affinity: [3])
        XCTAssertEqual(resources.memoryLimit, 128 << 20)
        XCTAssertEqual(resources.memoryLimitFile, system.root + "/sys/fs/cgroup/memory.max")
        XCTAssertEqual(resources.usableCPUs, 1)
        XCTAssertEqual(resources.affinityCPUs, [3])
    }

    func testV2WithoutTheMemoryControllerFallsBackToPhysicalMemory() throws {
        let system = try SystemRootFixture(self)
        try system.meminfo(totalKiB: 4 << 20, availableKiB: 3 << 20)
        try system.unified(path: "/init.scope")
        try system.write("/sys/fs/cgroup/init.scope/cgroup.controllers", "pids\n")
        let resources = SystemResources.detect(root: system.root, affinity: eightCPUs)
        XCTAssertEqual(resources.memoryLimit, 4 << 30)
        XCTAssertEqual(resources.memoryLimitSource, .physicalMemory)
        XCTAssertNil(resources.memoryLimitFile)
        XCTAssertNil(resources.memoryUsageFile)
        XCTAssertEqual(resources.usableCPUs, 8)
        XCTAssertNil(resources.memoryPressureFile, "no PSI file anywhere in this tree")
        // Without a cgroup limit, usage is the system's: MemTotal − MemAvailable.
        XCTAssertEqual(resources.currentMemoryUsage(), 1 << 30)
    }

    func testALimitAbovePhysicalMemoryIsNotTheLimit() throws {
        let system = try SystemRootFixture(self)
        try system.meminfo(totalKiB: 2 << 20, availableKiB: 1 << 20)
        try system.unified(path: "/big")
        try system.write("/sys/fs/cgroup/big/memory.max", "\(64 << 30)\n")
        let resources = SystemResources.detect(root: system.root, affinity: [0])
        XCTAssertEqual(resources.memoryLimit, 2 << 30)
        XCTAssertEqual(resources.memoryLimitSource, .physicalMemory)
        XCTAssertEqual(resources.currentMemoryUsage(), 1 << 30, "MemTotal − MemAvailable")
        XCTAssertTrue(resources.notes.contains { $0.contains("not below physical memory") }, "\(resources.notes)")
    }

    // MARK: - cgroup v1

    /// A v1 (or hybrid) layout: one mount per controller set, the process in `path` of each.
    private func v1System(path: String, mountRoot: String = "/", unified: Bool = false) throws -> SystemRootFixture {
        let system = try SystemRootFixture(self)
        try system.meminfo()
        try system.write(
            "/proc/self/cgroup",
            """
            12:pids:\(path)
            11:memory:\(path)
            4:cpu,cpuacct:\(path)
            3:cpuset:\(path)
            1:name=systemd:\(path)
            \(unified ? "0::/" : "")

            """)
        try system.write(
            "/proc/self/mountinfo",
            """
            22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
            30 22 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
            31 30 0:27 \(mountRoot) /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup rw,xattr,name=systemd
            32 30 0:28 \(mountRoot) /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,cpu,cpuacct
            33 30 0:29 \(mountRoot) /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:12 - cgroup cgroup rw,memory
            34 30 0:30 \(mountRoot) /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:13 - cgroup cgroup rw,pids
            \(unified ? "35 30 0:31 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:14 - cgroup2 cgroup2 rw" : "")

            """)
        return system
    }

    func testV1NestedLimitsAndTheKernelsHugeNoLimitNumber() throws {
        let system = try v1System(path: "/kubepods/burstable/pod7/ctr")
        let memory = "/sys/fs/cgroup/memory/kubepods/burstable/pod7"
        try system.write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
        try system.write("/sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes", "9223372036854771712\n")
        try system.write(memory + "/memory.limit_in_bytes", "402653184\n")
        try system.write(memory + "/ctr/memory.limit_in_bytes", "9223372036854771712\n")
        try system.write(memory + "/memory.usage_in_bytes", "209715200\n")
        try system.write(
            memory + "/memory.stat",
            "cache 104857600\nrss 104857600\ninactive_file 1048576\ntotal_inactive_file 52428800\n")
        let cpu = "/sys/fs/cgroup/cpu,cpuacct/kubepods/burstable/pod7"
        try system.write(cpu + "/cpu.cfs_quota_us", "250000\n")
        try system.write(cpu + "/cpu.cfs_period_us", "100000\n")
        try system.write(cpu + "/ctr/cpu.cfs_quota_us", "-1\n")
        try system.write(cpu + "/ctr/cpu.cfs_period_us", "100000\n")

        let resources = SystemResources.detect(root: system.root, affinity: eightCPUs)
        XCTAssertEqual(resources.controlGroups, "v1")
        XCTAssertEqual(resources.memoryLimit, 384 << 20)
        XCTAssertEqual(resources.memoryLimitSource, .cgroupV1Limit)
        XCTAssertEqual(resources.memoryLimitFile, system.root + memory + "/memory.limit_in_bytes")
        XCTAssertEqual(resources.cpuQuota, 2.5)
        XCTAssertEqual(resources.usableCPUs, 3)
        XCTAssertEqual(resources.memoryUsageFile, system.root + memory + "/memory.usage_in_bytes")
        XCTAssertEqual(resources.currentMemoryUsage(), 150 << 20, "usage less the hierarchical inactive file cache")
    }

    func testV1DockerWithoutNamespaceAndAffinityBelowTheQuota() throws {
        let system = try v1System(path: "/docker/0123abcd", mountRoot: "/docker/0123abcd")
        try system.write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "268435456\n")
        try system.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "400000\n")
        try system.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n")
        let resources = SystemResources.detect(root: system.root, affinity: [0, 1])
        XCTAssertEqual(resources.memoryLimit, 256 << 20)
        XCTAssertEqual(resources.cpuQuota, 4)
        XCTAssertEqual(resources.usableCPUs, 2, "the affinity is below the quota")
    }

    func testV1UnlimitedAndHybridPressureFromTheUnifiedHierarchy() throws {
        let system = try v1System(path: "/", unified: true)
        try system.write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
        try system.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n")
        try system.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n")
        try system.write("/sys/fs/cgroup/unified/memory.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
        try system.write("/proc/pressure/memory", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
        let resources = SystemResources.detect(root: system.root, affinity: eightCPUs)
        XCTAssertEqual(resources.controlGroups, "v1 and v2 (hybrid)")
        XCTAssertEqual(resources.memoryLimitSource, .physicalMemory)
        XCTAssertEqual(resources.memoryLimit, 16 << 30)
        XCTAssertNil(resources.cpuQuota)
        XCTAssertEqual(resources.usableCPUs, 8)
        XCTAssertEqual(resources.memoryPressureFile, system.root + "/sys/fs/cgroup/unified/memory.pressure")
        XCTAssertTrue(
            resources.notes.contains("\(system.root)/sys/fs/cgroup/memory/memory.limit_in_bytes: no limit"),
            "\(resources.notes)")
    }

    func testV1WithoutMemoryOrCPUControllerMounted() throws {
        let system = try SystemRootFixture(self)
        try system.meminfo()
        try system.write("/proc/self/cgroup", "3:pids:/a\n1:name=systemd:/a\n")
        try system.write(
            "/proc/self/mountinfo",
            """
            34 30 0:30 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids

            """)
        let resources = SystemResources.detect(root: system.root, affinity: [0, 1, 2])
        XCTAssertEqual(resources.memoryLimitSource, .physicalMemory)
        XCTAssertEqual(resources.usableCPUs, 3)
        XCTAssertNil(resources.cpuQuota)
    }

    // MARK: - Missing and garbage files

    func testAnEmptyRootMeansNoLimitsKnown() throws {
        let system = try SystemRootFixture(self)
        let resources = SystemResources.detect(root: system.root, affinity: nil)
        XCTAssertEqual(resources.controlGroups, "none")
        XCTAssertEqual(resources.usableCPUs, resources.onlineCPUs, "no affinity known: the online CPUs")
        XCTAssertEqual(resources.memoryLimitSource, .physicalMemory)
        XCTAssertEqual(resources.physicalMemory, Int(ProcessInfo.processInfo.physicalMemory), "no meminfo: sysconf")
        XCTAssertNil(resources.availableMemory)
        XCTAssertNil(resources.memoryPressureFile)
        XCTAssertNil(resources.currentMemoryUsage())
        XCTAssertFalse(resources.description.isEmpty)
    }

    func testGarbageInEveryFileIsIgnoredNotFatal() throws {
        let system = try SystemRootFixture(self)
        try system.write("/proc/meminfo", "MemTotal: lots\nMemAvailable: -5 kB\nnonsense\n\u{0}\u{1}")
        try system.write("/proc/self/cgroup", "garbage\n::\nx:y:z\n0::/a\n")
        try system.write(
            "/proc/self/mountinfo", "- - -\n1 2 3\n\n30 22 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
        let folder = "/sys/fs/cgroup/a"
        for (name, contents) in [("memory.max", "banana\n"), ("memory.high", ""), ("cpu.max", "max\n")] {
            try system.write(folder + "/" + name, contents)
        }
        try system.write("/sys/fs/cgroup/memory.max", Data([0xFF, 0xFE, 0x00, 0x31]))
        try system.write("/sys/fs/cgroup/cpu.max", "0 100000\n")
        let resources = SystemResources.detect(root: system.root, affinity: [0, 1])
        XCTAssertEqual(resources.memoryLimitSource, .physicalMemory)
        XCTAssertEqual(resources.physicalMemory, Int(ProcessInfo.processInfo.physicalMemory))
        XCTAssertNil(resources.cpuQuota)
        XCTAssertEqual(resources.usableCPUs, 2)
        XCTAssertEqual(
            resources.notes.filter { $0.contains("unreadable value ignored") }.count, 4, "\(resources.notes)")
    }

    func testHugeNumbersAreNoLimit() throws {
        let system = try SystemRootFixture(self)
        try system.meminfo()
        try system.unified(path: "/a")
        try system.write("/sys/fs/cgroup/a/memory.max", "99999999999999999999999999\n")
        try system.write("/sys/fs/cgroup/a/cpu.max", "99999999999999999999 100000\n")
        let resources = SystemResources.detect(root: system.root, affinity: [0, 1])
        XCTAssertEqual(resources.memoryLimitSource, .physicalMemory)
        XCTAssertNil(resources.cpuQuota)
        XCTAssertEqual(resources.usableCPUs, 2)
    }

    // MARK: - Parsers

    func testLimitParser() {
        typealias Files = ControlGroupFiles
        XCTAssertEqual(Files.limit("max\n"), .unlimited)
        XCTAssertEqual(Files.limit("-1"), .unlimited)
        XCTAssertEqual(Files.limit("9223372036854771712"), .unlimited)
        XCTAssertEqual(Files.limit("18446744073709551615"), .unlimited, "beyond Int: still a number, so no limit")
        XCTAssertEqual(Files.limit(" 4096 \n"), .value(4096))
        XCTAssertNil(Files.limit(""))
        XCTAssertNil(Files.limit("-2"))
        XCTAssertNil(Files.limit("12k"))
        XCTAssertNil(Files.limit("0x10"))
        XCTAssertEqual(Files.cpuMax("max 100000"), .unlimited)
        XCTAssertEqual(Files.cpuMax("200000 100000\n"), .cpus(2))
        XCTAssertNil(Files.cpuMax("200000 0"))
        XCTAssertNil(Files.cpuMax("200000"))
        XCTAssertNil(Files.cpuMax("a b"))
        XCTAssertEqual(Files.cfsQuota(quota: "-1", period: "100000"), .unlimited)
        XCTAssertEqual(Files.cfsQuota(quota: "50000", period: "100000"), .cpus(0.5))
        XCTAssertNil(Files.cfsQuota(quota: "50000", period: "garbage"))
        XCTAssertEqual(Files.cpuList("0-3,8,10-11"), [0, 1, 2, 3, 8, 10, 11])
        XCTAssertNil(Files.cpuList("3-1"))
        XCTAssertNil(Files.cpuList("x"))
    }

    func testMembershipAndMountinfoParsers() {
        let memberships = ControlGroupFiles.memberships(
            "12:memory:/a:b/c\n0::/user.slice\nbad line\n4:cpu,cpuacct:/x\n")
        XCTAssertEqual(memberships.count, 3)
        XCTAssertEqual(memberships[0].path, "/a:b/c", "a path may contain colons")
        XCTAssertTrue(memberships[1].isUnified)
        XCTAssertEqual(memberships[2].controllers, ["cpu", "cpuacct"])

        let mounts = ControlGroupFiles.cgroupMounts(
            """
            36 25 0:31 / /sys/fs/cgroup/with\\040space rw,relatime shared:5 master:1 - cgroup2 cgroup2 rw
            37 25 0:32 /sub /mnt/cg rw - cgroup none rw,memory
            38 25 0:33 / /proc rw - proc proc rw
            39 25 0:34 / /short - cgroup2
            """)
        XCTAssertEqual(mounts.count, 2)
        XCTAssertEqual(mounts[0].mountPoint, "/sys/fs/cgroup/with space", "octal escapes undone")
        XCTAssertTrue(mounts[0].isUnified)
        XCTAssertEqual(mounts[1].root, "/sub")
        XCTAssertEqual(mounts[1].superOptions, ["rw", "memory"])

        XCTAssertEqual(
            ControlGroupFiles.folder(of: "/a/b", mountRoot: "/", mountPoint: "/sys/fs/cgroup"), "/sys/fs/cgroup/a/b")
        XCTAssertEqual(ControlGroupFiles.folder(of: "/a/b", mountRoot: "/a", mountPoint: "/cg"), "/cg/b")
        XCTAssertEqual(ControlGroupFiles.folder(of: "/a", mountRoot: "/a", mountPoint: "/cg"), "/cg")
        XCTAssertNil(ControlGroupFiles.folder(of: "/other", mountRoot: "/a", mountPoint: "/cg"))
        XCTAssertEqual(
            ControlGroupFiles.folder(of: "/../../etc", mountRoot: "/", mountPoint: "/cg"), "/cg/etc",
            "no climbing out of the mount")
    }

    func testMeminfoParser() {
        let values = ControlGroupFiles.memInfo(
            "MemTotal:  100 kB\nHugePages_Total: 3\nBad: x kB\nHuge: 99999999999999999 kB\n")
        XCTAssertEqual(values["MemTotal"], 102_400)
        XCTAssertEqual(values["HugePages_Total"], 3)
        XCTAssertNil(values["Bad"])
        XCTAssertNil(values["Huge"], "an overflowing value is skipped")
    }

    // MARK: - The running system

    func testTheRunningSystemIsReadWithoutSurprises() {
        let resources = SystemResources.detect()
        let affinity = SystemResources.affinity()
        XCTAssertNotNil(affinity, "sched_getaffinity works on Linux")
        XCTAssertEqual(resources.affinityCPUs, affinity)
        XCTAssertGreaterThanOrEqual(resources.usableCPUs, 1)
        XCTAssertLessThanOrEqual(resources.usableCPUs, affinity?.count ?? .max)
        XCTAssertGreaterThan(resources.memoryLimit, 0)
        XCTAssertLessThanOrEqual(resources.memoryLimit, resources.physicalMemory)
        XCTAssertEqual(SystemResources.current.usableCPUs, resources.usableCPUs)
    }
}
