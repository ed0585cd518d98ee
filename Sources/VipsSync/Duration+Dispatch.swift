import Dispatch

extension Duration {
    /// The duration as a dispatch interval (saturating: a limit of centuries waits for ever).
    package var dispatchInterval: DispatchTimeInterval {
        let (seconds, attoseconds) = components
        let (nanoseconds, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return .never }
        let (total, overflowed) = nanoseconds.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflowed ? .never : .nanoseconds(Int(clamping: total))
    }
}
