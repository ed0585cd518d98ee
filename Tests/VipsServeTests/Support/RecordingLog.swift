import Foundation
import VipsServe
import XCTest

/// A log sink that keeps what the server reports, and lets a test wait for
/// an event by its text.
final class RecordingLog: ImageServerLogging, @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [AccessLogEntry] = []
    private var events: [String] = []
    private var waiters: [(String, XCTestExpectation)] = []

    func request(_ entry: AccessLogEntry) {
        lock.withLock { entries.append(entry) }
    }

    func event(_ message: String) {
        let matched = lock.withLock { () -> [XCTestExpectation] in
            events.append(message)
            return waiters.filter { message.contains($0.0) }.map(\.1)
        }
        for expectation in matched { expectation.fulfill() }
    }

    /// An expectation fulfilled by the first event containing `text` (also one already reported).
    func expectEvent(_ text: String) -> XCTestExpectation {
        let expectation = XCTestExpectation(description: "event '\(text)'")
        let seen = lock.withLock { () -> Bool in
            if events.contains(where: { $0.contains(text) }) { return true }
            waiters.append((text, expectation))
            return false
        }
        if seen { expectation.fulfill() }
        return expectation
    }

    var requests: [AccessLogEntry] { lock.withLock { entries } }
    var messages: [String] { lock.withLock { events } }
}
