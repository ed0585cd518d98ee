import Foundation

/// When and how often a failed download is tried again.
///
/// Only transient failures are retried: connection errors (refused, reset,
/// dropped mid-body), timeouts, 5xx statuses other than 501 and 505, and 429.
/// Other 4xx statuses, oversized, empty or non-image bodies never are.
public struct HTTPRetryPolicy: Sendable, Hashable {
    /// Attempts after the first; 0 turns retrying off. Default 2.
    public var maxRetries: Int
    /// The delay before the first retry, doubled for each further one, with
    /// random jitter down to half of it. Default 0.5 s.
    public var initialDelay: TimeInterval
    /// The longest delay. A `Retry-After` asking for longer than this is not
    /// retried at all (the server asked for a pause the caller will not wait
    /// for). Default 30 s.
    public var maxDelay: TimeInterval

    /// A policy of up to `maxRetries` retries of transient failures, with the delays its properties document.
    public init(maxRetries: Int = 2, initialDelay: TimeInterval = 0.5, maxDelay: TimeInterval = 30) {
        self.maxRetries = maxRetries
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
    }

    /// No retries.
    public static let none = HTTPRetryPolicy(maxRetries: 0)

    /// The pause before retry number `retry` (from 1), or nil when no retry is due.
    func delay(beforeRetry retry: Int, retryAfter: TimeInterval?) -> TimeInterval? {
        guard retry <= maxRetries else { return nil }
        if let retryAfter {
            return retryAfter <= maxDelay ? max(0, retryAfter) : nil
        }
        let base = min(maxDelay, initialDelay * pow(2, Double(retry - 1)))
        return base * Double.random(in: 0.5...1)
    }

    /// Whether an HTTP status is worth another attempt.
    static func isTransient(status: Int) -> Bool {
        status == 429 || (status >= 500 && status != 501 && status != 505)
    }
}
