/// The output format a client's `Accept` field asks for, when the URL leaves
/// it to the server: AVIF if accepted, else WebP, else the source's family
/// (JPEG, or PNG for an image with alpha).
///
/// Only an explicit media type counts (`image/avif`, `image/webp`, with a
/// quality above 0): `image/*` and `*/*` do not promise a decoder for either.
enum FormatNegotiation: String, Sendable, Hashable {
    case avif
    case webp
    /// JPEG, or PNG for alpha.
    case sourceFamily = "jpeg-png"

    /// The choice for the `Accept` field `accept` (nil: none sent).
    init(accept: String?) {
        var accepted: Set<String> = []
        for range in (accept ?? "").split(separator: ",") {
            let parts = range.split(separator: ";")
            guard let type = parts.first?.trimmingCharacters(in: .whitespaces).lowercased() else { continue }
            var quality = 1.0
            for parameter in parts.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1)
                if pair.count == 2, pair[0].trimmingCharacters(in: .whitespaces).lowercased() == "q" {
                    quality = Double(pair[1].trimmingCharacters(in: .whitespaces)) ?? 0
                }
            }
            if quality > 0 { accepted.insert(type) }
        }
        if accepted.contains("image/avif") {
            self = .avif
        } else if accepted.contains("image/webp") {
            self = .webp
        } else {
            self = .sourceFamily
        }
    }
}
