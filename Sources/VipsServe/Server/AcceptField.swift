/// What a client's `Accept` field names, as `ImageServer.OutputSettings.negotiated`
/// reads it (with imgproxy's `AUTO_*`/`ENFORCE_*` switches).
///
/// Only an explicit media type counts (`image/avif`, `image/webp`, with a
/// quality above 0): `image/*` and `*/*` do not promise a decoder for either.
enum AcceptField {
    /// The media types an `Accept` field names with a quality above 0, in lower case.
    static func acceptedTypes(_ accept: String?) -> Set<String> {
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
        return accepted
    }
}
