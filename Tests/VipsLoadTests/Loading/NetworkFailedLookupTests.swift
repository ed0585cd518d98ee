import Foundation
import TestSupport
import XCTest

@testable import VipsLoad

/// A transfer that failed must not spoil the next one: after a failed DNS
/// lookup, libcurl 7.88 refuses an option on that easy handle even after
/// `curl_easy_reset`, and a transport that kept the handle for the next
/// transfer failed every later load (issue 30, finding 1).
///
/// The name that does not resolve (`nonexistent.invalid`) is looked up in a
/// network namespace of its own, with only a loopback interface, so no DNS
/// query leaves the machine: the test runs this test binary again under
/// `unshare -n` (a child process playing the role `failed-lookup`, see
/// `ChildProcessRoleTests`), which starts its own server on 127.0.0.1 inside
/// the namespace and reports each load.
final class NetworkFailedLookupTests: XCTestCase {
    static let role = "failed-lookup"

    func testAFailedLookupDoesNotBreakLaterLoads() throws {
        try runInOwnNetworkNamespace(addressPolicy: false)
    }

    /// The same under an address policy (the socket-opening callback and an
    /// empty proxy are set on every handle), as `vipsload serve` runs.
    func testAFailedLookupDoesNotBreakLaterLoadsUnderAnAddressPolicy() throws {
        try runInOwnNetworkNamespace(addressPolicy: true)
    }

    private func runInOwnNetworkNamespace(addressPolicy: Bool) throws {
        let launcher: [String]
        do {
            launcher = try NetworkNamespace.launcher()
        } catch {
            throw XCTSkip(error.description)
        }
        let directory = NetworkFixtures.makeDirectory("failed-lookup")
        defer { try? FileManager.default.removeItem(at: directory) }
        let child = try TestChildProcess(
            role: Self.role,
            environment: [
                "VIPSLOAD_TEST_DIR": directory.path, "VIPSLOAD_TEST_POLICY": addressPolicy ? "1" : "0"
            ],
            launcher: launcher)
        defer { child.kill() }
        let line = try XCTUnwrap(
            child.waitForReport(timeout: 300) { $0.hasPrefix("PASSED") || $0.hasPrefix("FAILED") },
            "child:\n\(child.transcript)")
        XCTAssertEqual(line, "PASSED", "reports:\n\(child.reports.joined(separator: "\n"))")
        XCTAssertEqual(child.waitForExit(), 0, "child:\n\(child.transcript)")
    }

    /// The child's part, inside the namespace: rounds of a load from the
    /// loopback server, one from `nonexistent.invalid` (a typed `.network`
    /// error naming the lookup) and the loopback again; then bursts of more
    /// concurrent loads than the transport keeps spare handles for, half of
    /// them unresolvable, and loads after them. Reports `PASSED`, or `FAILED`
    /// with what went wrong.
    static func playRole(_ environment: [String: String]) async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let jpeg = try NetworkFixtures.jpeg(width: 64, height: 48)
        server.route("/a.jpg", .ok(jpeg))
        var configuration = HTTPDataLoader.Configuration(
            maxConcurrentDownloads: 64,
            temporaryDirectory: URL(fileURLWithPath: environment["VIPSLOAD_TEST_DIR"] ?? NSTemporaryDirectory()))
        if environment["VIPSLOAD_TEST_POLICY"] == "1" {
            configuration.addressPolicy = SourceAddressPolicy(
                allowedScopes: [.public], allowedNetworks: [IPNetwork("127.0.0.1/32")].compactMap { $0 })
        }
        let loader = HTTPDataLoader(configuration: configuration)
        let good = server.url("/a.jpg")
        let bad = try XCTUnwrap(URL(string: "http://nonexistent.invalid:\(server.port)/a.jpg"))
        var problems: [String] = []

        func loadGood(_ what: String) async {
            do throws(VipsError) {
                let data = try await loader.loadData(for: .url(good))
                if NetworkFixtures.contents(of: data) != jpeg { problems.append("\(what): wrong bytes") }
            } catch {
                problems.append("\(what): \(error.kind) \(error.message)")
            }
        }
        func loadBad(_ what: String) async {
            do throws(VipsError) {
                let data = try await loader.loadData(for: .url(bad))
                problems.append("\(what): loaded \(data.byteCount) bytes from an unresolvable name")
            } catch {
                if error.kind != .network || !error.message.lowercased().contains("resolve") {
                    problems.append(
                        "\(what): expected a .network error about resolving, got \(error.kind) \(error.message)")
                }
            }
        }

        for round in 0..<4 {
            await loadGood("round \(round), loopback before")
            await loadBad("round \(round), unresolvable")
            await loadGood("round \(round), loopback after")
            TestChildProcess.report("ROUND \(round) \(problems.count) problems")
        }
        // More transfers at once than the transport keeps spare handles: the spares fill up,
        // and handles that failed are among those coming back.
        let burst = 2 * HTTPTransport.spareHandleLimit
        for wave in 0..<2 {
            let outcomes = await withTaskGroup(of: String?.self) { group -> [String] in
                for index in 0..<burst {
                    let unresolvable = index % 2 == 1
                    group.addTask {
                        do throws(VipsError) {
                            // Distinct URLs (the server ignores the query): concurrent loads of one URL share one download.
                            let url = URL(string: (unresolvable ? bad : good).absoluteString + "?n=\(wave)-\(index)")!
                            let data = try await loader.loadData(for: .url(url))
                            return unresolvable ? "burst \(index): loaded \(data.byteCount) bytes" : nil
                        } catch {
                            if unresolvable, error.kind == .network { return nil }
                            return "burst \(index): \(error.kind) \(error.message)"
                        }
                    }
                }
                var found: [String] = []
                for await outcome in group { if let outcome { found.append(outcome) } }
                return found
            }
            problems += outcomes.map { "wave \(wave), \($0)" }
            for index in 0..<(burst + 2) { await loadGood("after wave \(wave), load \(index)") }
            TestChildProcess.report("WAVE \(wave) \(problems.count) problems")
        }
        for problem in problems { TestChildProcess.report("PROBLEM \(problem)") }
        TestChildProcess.report(problems.isEmpty ? "PASSED" : "FAILED \(problems.count) problems")
    }
}
