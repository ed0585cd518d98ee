/// Percentiles of a set of latencies (seconds), by the nearest-rank method.
public struct LatencyStatistics: Sendable {
    public let count: Int
    public let p50: Double
    public let p95: Double
    public let p99: Double
    public let max: Double

    public init(_ samples: [Double]) {
        let sorted = samples.sorted()
        count = sorted.count
        func rank(_ p: Double) -> Double {
            guard !sorted.isEmpty else { return 0 }
            let index = Int((p * Double(sorted.count)).rounded(.up)) - 1
            return sorted[Swift.max(0, Swift.min(sorted.count - 1, index))]
        }
        p50 = rank(0.50)
        p95 = rank(0.95)
        p99 = rank(0.99)
        max = sorted.last ?? 0
    }

    /// The median of `values` (0 when empty).
    public static func median(_ values: [Double]) -> Double {
        LatencyStatistics(values).p50
    }
}
