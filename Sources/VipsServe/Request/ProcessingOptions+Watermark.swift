extension ProcessingOptions {
    /// imgproxy's `wm:%opacity:%position:%x_offset:%y_offset:%scale`
    /// (options/parser's `applyWatermarkOption`): the opacity is required
    /// (0–1); each later argument, when given and not empty, sets its value
    /// and an empty one keeps it. The scale is a positive number. imgproxy
    /// takes up to seven arguments and its open-source version reads five:
    /// the sixth and seventh are accepted and mean nothing, as there.
    mutating func applyWatermark(_ option: OptionArguments) throws(ProcessingURLError) {
        try option.atMost(7)
        var updated = watermark
        let opacity = try option.double(at: 0)
        guard (0...1).contains(opacity) else { throw option.invalid("the opacity \(opacity) is outside 0–1") }
        updated.opacity = opacity == 0 ? 0 : opacity
        if option.has(1) {
            guard let position = Watermark.Position(rawValue: String(option.values[1])) else {
                let names = Watermark.Position.allCases.map(\.rawValue).joined(separator: ", ")
                throw option.invalid("\(option.values[1]) is not a watermark position (\(names))")
            }
            updated.position = position
        }
        if option.has(2) {
            let x = try option.double(at: 2)
            updated.x = x == 0 ? 0 : x
        }
        if option.has(3) {
            let y = try option.double(at: 3)
            updated.y = y == 0 ? 0 : y
        }
        if option.has(4) { updated.scale = try option.positiveDouble(at: 4) }
        watermark = updated
    }
}
