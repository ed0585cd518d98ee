import Foundation

/// The head of one HTTP response as libcurl parsed it: the status and the
/// header fields in the order they came, repeated fields kept apart.
struct HTTPResponseHead: Sendable {
    /// One header field, its name as sent.
    struct Field: Sendable {
        let name: String
        let value: String
    }

    let statusCode: Int
    let fields: [Field]

    /// Every value of the field `name` (case-insensitive), in order.
    func values(of name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
    }

    /// The field `name` (case-insensitive); repeated fields are joined with
    /// ", ", as a list-valued field may be (RFC 9110 §5.3).
    func value(forHTTPHeaderField name: String) -> String? {
        let all = values(of: name)
        return all.isEmpty ? nil : all.joined(separator: ", ")
    }

    /// The body length the head declares, or -1 when it declares none: no
    /// `Content-Length`, one that is not a number, or a `Transfer-Encoding`,
    /// which overrides it (RFC 9112 §6.3). A list of one value repeated
    /// counts as that value; `HTTPTransfer.contentLengthProblem` refuses the rest.
    var expectedContentLength: Int64 {
        guard values(of: "Transfer-Encoding").isEmpty,
            let first = values(of: "Content-Length").first?.split(separator: ",").first,
            let length = Int64(first.trimmingCharacters(in: .whitespaces)), length >= 0
        else { return -1 }
        return length
    }

    /// The body length to report as progress: the declared length when the
    /// body has no content coding (with one, the declared length is the
    /// encoded one, not what is written).
    var progressTotal: Int? {
        let encoding = value(forHTTPHeaderField: "Content-Encoding")?.lowercased() ?? "identity"
        let expected = expectedContentLength
        return expected >= 0 && encoding == "identity" ? Int(expected) : nil
    }
}
