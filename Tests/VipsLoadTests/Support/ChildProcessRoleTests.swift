import Foundation
import XCTest

@testable import VipsLoad

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The roles a `TestChildProcess` plays. Run in a normal test pass, the test is
/// skipped: it only does something inside a child process started by another
/// test, which reads its reports and usually kills it.
final class ChildProcessRoleTests: XCTestCase {
    func testChildRole() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let role = environment[TestChildProcess.roleVariable] else {
            throw XCTSkip("runs only inside a child process started by DiskCacheCrashTests or NetworkMemoryTests")
        }
        switch role {
        case "cache-writer": try Self.slowCacheWriter(directory: environment["VIPSLOAD_TEST_DIR"] ?? "")
        case "cache-churn": try Self.cacheChurn(directory: environment["VIPSLOAD_TEST_DIR"] ?? "")
        case "rss-thumbnail": try await Self.thumbnailOverHTTP(environment)
        case "rss-in-memory": try await Self.thumbnailFromMemory(environment)
        case "usable-cpu-decodes": try await Self.decodesOnUsableCPUs(environment) // UsableCPUTests.swift
        case "policy-load": try await Self.loadUnderAddressPolicy(environment)
        case NetworkFailedLookupTests.role: try await NetworkFailedLookupTests.playRole(environment)
        default: XCTFail("unknown child role \(role)")
        }
    }

    /// Commits entries 0 and 1, then writes entry 2 slowly, reporting when
    /// half of it is on disk, and keeps writing until killed.
    static func slowCacheWriter(directory: String) throws {
        let cache = try DiskCache(directory: URL(fileURLWithPath: directory))
        for version in 0..<100 {
            let body = NetworkFixtures.versionedBody(version: version, size: 2 * 1024 * 1024)
            let writer = try cache.makeWriter(for: "key-\(version)")
            let chunk = 64 * 1024
            var offset = 0
            while offset < body.count {
                try writer.write(body[offset..<min(body.count, offset + chunk)])
                offset += chunk
                if version >= 2 {
                    if offset == body.count / 2 { TestChildProcess.report("MIDWRITE \(version)") }
                    Thread.sleep(forTimeInterval: 0.02)
                }
            }
            try writer.commit()
            TestChildProcess.report("COMMITTED \(version)")
        }
    }

    /// Stores new versions of five keys as fast as it can, forever.
    static func cacheChurn(directory: String) throws {
        let cache = try DiskCache(directory: URL(fileURLWithPath: directory), sizeLimit: 8 * 1024 * 1024)
        TestChildProcess.report("READY")
        var version = 0
        while true {
            let size = 50_000 + (version * 7919) % 400_000
            try cache.store(NetworkFixtures.versionedBody(version: version, size: size), for: "churn-\(version % 5)")
            version += 1
        }
    }

    /// Downloads `VIPSLOAD_TEST_URL` with an `HTTPDataLoader` (into a disk
    /// cache when `VIPSLOAD_TEST_CACHE` is set), decodes a 256 px thumbnail
    /// from the file, and reports the process's RSS before and its peak after.
    static func thumbnailOverHTTP(_ environment: [String: String]) async throws {
        try VipsRuntime.start()
        let configuration = HTTPDataLoader.Configuration(
            temporaryDirectory: URL(fileURLWithPath: environment["VIPSLOAD_TEST_DIR"] ?? NSTemporaryDirectory()))
        let cache = try environment["VIPSLOAD_TEST_CACHE"].map { try DiskCache(directory: URL(fileURLWithPath: $0)) }
        let loader = HTTPDataLoader(configuration: configuration, cache: cache)
        let url = try XCTUnwrap(environment["VIPSLOAD_TEST_URL"].flatMap(URL.init(string:)))
        // A small download and decode first, so the baseline includes what any
        // download and decode sets up (libcurl, libvips) and only the body's effect is measured.
        let warmUp = try XCTUnwrap(environment["VIPSLOAD_TEST_WARMUP_URL"].flatMap(URL.init(string:)))
        let warmUpData = try await loader.loadData(for: .url(warmUp))
        // The ImageData must outlive the decode: releasing it deletes a temporary file.
        _ = try withExtendedLifetime(warmUpData) {
            try ImageDecoder().decode(warmUpData.input, size: .maxPixelSize(256))
        }
        let baseline = Self.memoryStatus("VmRSS")
        let data = try await loader.loadData(for: .url(url))
        let afterDownload = Self.memoryStatus("VmHWM")
        let thumbnail = try withExtendedLifetime(data) {
            try ImageDecoder().decode(data.input, size: .maxPixelSize(256))
        }
        let peak = Self.memoryStatus("VmHWM")
        TestChildProcess.report(
            "RSS baseline=\(baseline) download-peak=\(afterDownload) peak=\(peak) bytes=\(data.byteCount) "
                + "thumbnail=\(thumbnail.width)x\(thumbnail.height)")
    }

    /// Loads `VIPSLOAD_TEST_URL` under an address policy allowing public
    /// addresses and the networks of `VIPSLOAD_TEST_ALLOW` (comma-separated),
    /// in this process's environment (its proxy variables); reports
    /// `LOADED <bytes>` or `FAILED <kind> <message>`.
    static func loadUnderAddressPolicy(_ environment: [String: String]) async throws {
        var configuration = HTTPDataLoader.Configuration(
            temporaryDirectory: URL(fileURLWithPath: environment["VIPSLOAD_TEST_DIR"] ?? NSTemporaryDirectory()))
        let networks = (environment["VIPSLOAD_TEST_ALLOW"] ?? "").split(separator: ",").compactMap {
            IPNetwork(String($0))
        }
        configuration.addressPolicy = SourceAddressPolicy(allowedScopes: [.public], allowedNetworks: networks)
        let loader = HTTPDataLoader(configuration: configuration)
        let url = try XCTUnwrap(environment["VIPSLOAD_TEST_URL"].flatMap(URL.init(string:)))
        do {
            let data = try await loader.loadData(for: .url(url))
            TestChildProcess.report("LOADED \(data.byteCount)")
        } catch {
            TestChildProcess.report("FAILED \(error.kind) \(error.message)")
        }
    }

    /// The contrast: the whole body downloaded into memory (`URLSession`'s
    /// `data(from:)`) and decoded from there, with the same report.
    static func thumbnailFromMemory(_ environment: [String: String]) async throws {
        try VipsRuntime.start()
        let url = try XCTUnwrap(environment["VIPSLOAD_TEST_URL"].flatMap(URL.init(string:)))
        let warmUp = try XCTUnwrap(environment["VIPSLOAD_TEST_WARMUP_URL"].flatMap(URL.init(string:)))
        _ = try ImageDecoder().decode(.data(try await URLSession.shared.data(from: warmUp).0), size: .maxPixelSize(256))
        let baseline = Self.memoryStatus("VmRSS")
        let (body, _) = try await URLSession.shared.data(from: url)
        let afterDownload = Self.memoryStatus("VmHWM")
        let thumbnail = try ImageDecoder().decode(.data(body), size: .maxPixelSize(256))
        let peak = Self.memoryStatus("VmHWM")
        TestChildProcess.report(
            "RSS baseline=\(baseline) download-peak=\(afterDownload) peak=\(peak) bytes=\(body.count) "
                + "thumbnail=\(thumbnail.width)x\(thumbnail.height)")
    }

    /// A `/proc/self/status` field in kB (VmRSS: now, VmHWM: peak), or -1.
    static func memoryStatus(_ field: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return -1 }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            return Int(
                line.dropFirst(field.count + 1).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
                ?? -1
        }
        return -1
    }
}
