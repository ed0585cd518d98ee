import Foundation
import Synchronization
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsLoad

/// A temporary directory of generated image files, removed when released.
final class ImageFolder: Sendable {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "vipsload-pipeline-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Writes a synthetic JPEG and returns its path.
    func jpeg(_ name: String, width: Int, height: Int, seed: Int = 1) throws -> String {
        try write(
            name + ".jpg", ImageSynthesizer.data(width: width, height: height, seed: seed, format: .jpeg(quality: 85)))
    }

    /// Writes a synthetic PNG and returns its path.
    func png(_ name: String, width: Int, height: Int, seed: Int = 1) throws -> String {
        try write(name + ".png", ImageSynthesizer.data(width: width, height: height, seed: seed, format: .png()))
    }

    func write(_ name: String, _ data: Data) throws -> String {
        let file = path + "/" + name
        try data.write(to: URL(fileURLWithPath: file))
        return file
    }
}

/// The real default `DataLoader` behind a gate: loads of the sources it
/// holds wait until `open()`, so a test can fill queues deterministically.
/// Waiting honours cancellation, and the loader counts what happened.
final class GatedLoader: ImageDataLoading {
    private struct State {
        var isOpen = false
        var waiters: [Int: CheckedContinuation<Void, any Error>] = [:]
        var nextWaiter = 0
        var calls: [String] = []
        var cancelledWaits = 0
    }

    private let base = DataLoader()
    private let holds: @Sendable (ImageSource) -> Bool
    private let state = LockedState(State())

    /// - Parameter holds: which sources wait for the gate (default: all).
    init(holds: @escaping @Sendable (ImageSource) -> Bool = { _ in true }) {
        self.holds = holds
    }

    /// Lets every held and future load through.
    func open() {
        let waiters = state.withLock { state in
            state.isOpen = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Source keys in the order the loader was called.
    var calls: [String] { state.withLock { $0.calls } }
    /// Loads waiting at the gate now.
    var waiting: Int { state.withLock { $0.waiters.count } }
    /// Loads whose wait ended in cancellation.
    var cancelledWaits: Int { state.withLock { $0.cancelledWaits } }

    func loadData(for source: ImageSource) async throws(VipsError) -> ImageData {
        state.withLock { $0.calls.append(source.key) }
        if holds(source) {
            do {
                try await passGate()
            } catch {
                throw .cancelled(source.description)
            }
        }
        return try await base.loadData(for: source)
    }

    private func passGate() async throws {
        let id = state.withLock { state -> Int in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resume = state.withLock { state -> Result<Void, any Error>? in
                    if state.isOpen { return .success(()) }
                    if Task.isCancelled {
                        state.cancelledWaits += 1
                        return .failure(CancellationError())
                    }
                    state.waiters[id] = continuation
                    return nil
                }
                if let resume { continuation.resume(with: resume) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let waiter = state.waiters.removeValue(forKey: id) else { return nil }
                state.cancelledWaits += 1
                return waiter
            }
            waiter?.resume(throwing: CancellationError())
        }
    }
}

/// Polls `condition` until it holds; fails the test if it does not within
/// `timeout` seconds (a generous bound: only a hang or a bug reaches it).
nonisolated(nonsending) func waitUntil(
    _ what: String, timeout: Double = 30, file: StaticString = #filePath, line: UInt = #line,
    _ condition: () -> Bool
) async {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        if Date() > deadline {
            XCTFail("timed out waiting until \(what)", file: file, line: line)
            return
        }
        try? await Task.sleep(for: .milliseconds(1))
    }
}

/// A counter for results observed from many tasks.
final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    func increment() { value.add(1, ordering: .relaxed) }
    var count: Int { value.load(ordering: .relaxed) }
}

extension ImagePipeline {
    /// A pipeline for tests: the given loader (by default `DataLoader()`,
    /// the default configuration's loader and lanes: what users get),
    /// concurrency and cache.
    static func testing(
        loader: any ImageDataLoading = DataLoader(), decodeConcurrency: Int = 2,
        cache: MemoryCache? = MemoryCache(costLimit: 64 << 20)
    ) -> ImagePipeline {
        ImagePipeline(
            configuration: Configuration(
                decodeConcurrency: decodeConcurrency, dataLoader: loader,
                memoryCache: cache))
    }
}

extension Error {
    /// Whether this is a cancellation: the pipeline's `.cancelled`, or a loader's `CancellationError`.
    var isCancellation: Bool {
        (self as? VipsError)?.kind == .cancelled || self is CancellationError
    }
}

/// Awaits `body`, expecting a `VipsError` of one of `kinds`; fails the test
/// when it succeeds or fails otherwise. Returns the error for further checks.
@discardableResult
func assertThrows<T>(
    kind kinds: Set<VipsError.Kind>, _ what: @autoclosure () -> String = "",
    file: StaticString = #filePath, line: UInt = #line,
    _ body: () async throws -> T
) async -> VipsError? {
    do {
        let value = try await body()
        XCTFail(
            "\(what()): succeeded with \(value); expected \(kinds.map(\.rawValue).sorted())", file: file, line: line)
        return nil
    } catch let error as VipsError {
        XCTAssertTrue(kinds.contains(error.kind), "\(what()): \(error)", file: file, line: line)
        return error
    } catch {
        XCTFail("\(what()): \(error) is not a VipsError", file: file, line: line)
        return nil
    }
}

/// `assertThrows(kind:)` for one kind.
@discardableResult
func assertThrows<T>(
    kind: VipsError.Kind, _ what: @autoclosure () -> String = "",
    file: StaticString = #filePath, line: UInt = #line,
    _ body: () async throws -> T
) async -> VipsError? {
    await assertThrows(kind: [kind], what(), file: file, line: line, body)
}
