import Foundation

/// The figures one benchmark scenario produced: summary fields and rows,
/// printed as a table or as one JSON object (field names are stable API,
/// documented in the README).
public struct ScenarioReport: Sendable {
    /// One value with its display precision.
    public enum Value: Sendable {
        case int(Int)
        case number(Double, digits: Int)
        case text(String)

        var json: String {
            switch self {
            case .int(let value): return String(value)
            case .number(let value, let digits):
                guard value.isFinite else { return "null" }
                return String(format: "%.\(digits)f", value)
            case .text(let value): return JSONText.string(value)
            }
        }

        /// The value as a number (nil for text).
        public var number: Double? {
            switch self {
            case .int(let value): return Double(value)
            case .number(let value, _): return value
            case .text: return nil
            }
        }

        public var display: String {
            switch self {
            case .int(let value): return String(value)
            case .number(let value, let digits): return value.isFinite ? String(format: "%.\(digits)f", value) : "-"
            case .text(let value): return value
            }
        }
    }

    /// Ordered (name, value) pairs.
    public typealias Fields = [(String, Value)]

    public let scenario: String
    public var summary: Fields
    public var rows: [Fields]
    /// Human-readable remarks printed under the table (not in JSON).
    public var notes: [String]

    public init(scenario: String, summary: Fields = [], rows: [Fields] = [], notes: [String] = []) {
        self.scenario = scenario
        self.summary = summary
        self.rows = rows
        self.notes = notes
    }

    /// A summary field by name.
    public func summaryValue(_ name: String) -> Value? { summary.first { $0.0 == name }?.1 }

    /// The named field of every row, in row order.
    public func column(_ name: String) -> [Value] { rows.compactMap { row in row.first { $0.0 == name }?.1 } }

    /// The report as one line of JSON: `{"scenario": ..., <summary fields>, "rows": [...]}`.
    public var json: String {
        var parts = ["\"scenario\": \(JSONText.string(scenario))"]
        parts += summary.map { "\(JSONText.string($0.0)): \($0.1.json)" }
        if !rows.isEmpty {
            let rowTexts = rows.map { row in
                "{" + row.map { "\(JSONText.string($0.0)): \($0.1.json)" }.joined(separator: ", ") + "}"
            }
            parts.append("\"rows\": [" + rowTexts.joined(separator: ", ") + "]")
        }
        return "{" + parts.joined(separator: ", ") + "}"
    }

    /// The report as a readable block: title, summary line, aligned table, notes.
    public var table: String {
        var lines = ["== \(scenario)"]
        if !summary.isEmpty {
            lines.append(summary.map { "\($0.0) \($0.1.display)" }.joined(separator: "  "))
        }
        if let header = rows.first?.map(\.0) {
            let cells = [header] + rows.map { $0.map(\.1.display) }
            let widths = header.indices.map { column in
                cells.map { $0.indices.contains(column) ? $0[column].count : 0 }.max() ?? 0
            }
            for (index, row) in cells.enumerated() {
                lines.append(
                    row.enumerated().map { column, text in
                        column == 0
                            ? text.padding(toLength: widths[column], withPad: " ", startingAt: 0)
                            : String(repeating: " ", count: widths[column] - text.count) + text
                    }.joined(separator: "  "))
                if index == 0 { lines.append(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")) }
            }
        }
        lines += notes
        return lines.joined(separator: "\n")
    }
}

/// JSON string escaping, shared by every JSON line VipsLoad's tools print.
public enum JSONText {
    /// `text` as a JSON string literal.
    public static func string(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
