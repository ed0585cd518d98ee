/// Builds Prometheus text exposition output: a `# HELP` and `# TYPE` line
/// per metric family, then its samples.
struct PrometheusText {
    private(set) var output = ""

    /// A family of samples, each with its label text (`code="200"`, or "" for none).
    mutating func family(_ name: String, _ type: String, _ help: String, _ samples: [(String, Double)]) {
        output += "# HELP \(name) \(help).\n# TYPE \(name) \(type)\n"
        for (labels, value) in samples {
            output += labels.isEmpty ? "\(name) \(Self.format(value))\n" : "\(name){\(labels)} \(Self.format(value))\n"
        }
    }

    mutating func counter(_ name: String, _ help: String, _ value: Int) {
        family(name, "counter", help, [("", Double(value))])
    }

    mutating func gauge(_ name: String, _ help: String, _ value: Int) {
        family(name, "gauge", help, [("", Double(value))])
    }

    /// A histogram: cumulative bucket counts by `le` label, then `_sum` and `_count`.
    mutating func histogram(_ name: String, _ help: String, buckets: [(String, Double)], sum: Double, count: Int) {
        output += "# HELP \(name) \(help).\n# TYPE \(name) histogram\n"
        for (labels, value) in buckets { output += "\(name)_bucket{\(labels)} \(Self.format(value))\n" }
        output += "\(name)_sum \(Self.format(sum))\n\(name)_count \(count)\n"
    }

    /// Whole numbers without a fraction, others as Swift prints a Double.
    static func format(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int(value)) }
        return String(value)
    }
}
