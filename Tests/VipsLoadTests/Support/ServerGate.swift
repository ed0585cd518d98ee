import Foundation
import VipsCore

/// Holds server handlers until the test opens it, so a test can have every
/// caller waiting on one response before any response is sent.
final class ServerGate: Sendable {
    private let isOpen = LockedState(false)

    /// Called in a handler: returns once the gate is open (or after `timeout`,
    /// a generous bound only a hung test reaches).
    func pass(timeout: TimeInterval = 60) {
        let deadline = Date().addingTimeInterval(timeout)
        while !isOpen.withLock({ $0 }), Date() < deadline {
            Thread.sleep(forTimeInterval: 0.005)
        }
    }

    func open() { isOpen.withLock { $0 = true } }
    func close() { isOpen.withLock { $0 = false } }
}
