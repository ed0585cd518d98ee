import VipsServe

/// `vipsload serve`'s encoding flags, onto `ImageServer.OutputSettings`:
/// `--quality`, `--format-quality`, `--preferred-formats`, `--auto-webp`,
/// `--enforce-webp` (and the AVIF and JPEG XL ones) and `--client-hints`.
/// The list syntaxes are imgproxy's (`IMGPROXY_FORMAT_QUALITY`,
/// `IMGPROXY_PREFERRED_FORMATS`), so its variables' values read the same.
enum ServeOutputFlags {
    static let valueOptions: Set<String> = ["quality", "format-quality", "preferred-formats"]
    static let flagOptions: Set<String> = [
        "auto-webp", "enforce-webp", "auto-avif", "enforce-avif", "auto-jxl", "enforce-jxl", "client-hints"
    ]

    static let usage = """
          --quality N           the quality of formats that have one when the URL sets none, 1-100
                                (default 80, as IMGPROXY_QUALITY)
          --format-quality LIST per-format qualities over --quality, as IMGPROXY_FORMAT_QUALITY:
                                'jpeg=70,avif=40' (default webp=79,avif=63,jxl=77)
          --preferred-formats LIST
                                formats a result keeps or falls back to when the URL names none,
                                as IMGPROXY_PREFERRED_FORMATS (default jpeg,png,gif)
          --auto-webp, --auto-avif, --auto-jxl
                                with no format in the URL, answer in WebP / AVIF / JPEG XL when
                                Accept names it (JPEG XL over AVIF over WebP; Vary: Accept)
          --enforce-webp, --enforce-avif, --enforce-jxl
                                the same, even over the URL's format
          --client-hints        read DPR / Sec-CH-DPR and Width / Sec-CH-Width as the defaults
                                of dpr and width (Vary names them)
        """

    /// The settings the flags describe, over imgproxy's defaults.
    static func settings(
        _ parsed: ArgumentParser.Parsed
    ) throws(ArgumentParser.UsageError)
        -> ImageServer
        .OutputSettings
    {
        var settings = ImageServer.OutputSettings()
        settings.quality = try parsed.int("quality", default: settings.quality, in: 1...100)
        if let text = parsed.value("format-quality") {
            for (format, quality) in try formatQuality(text, origin: "--format-quality") {
                settings.formatQuality[format] = quality
            }
        }
        if let text = parsed.value("preferred-formats") {
            settings.preferredFormats = try formats(text, origin: "--preferred-formats")
        }
        settings.autoWebP = parsed.flag("auto-webp")
        settings.enforceWebP = parsed.flag("enforce-webp")
        settings.autoAVIF = parsed.flag("auto-avif")
        settings.enforceAVIF = parsed.flag("enforce-avif")
        settings.autoJXL = parsed.flag("auto-jxl")
        settings.enforceJXL = parsed.flag("enforce-jxl")
        settings.enableClientHints = parsed.flag("client-hints")
        return settings
    }

    /// `format=quality` pairs, comma-separated (imgproxy's `IMGPROXY_FORMAT_QUALITY`); errors name `origin`.
    static func formatQuality(
        _ text: String, origin: String
    ) throws(ArgumentParser.UsageError) -> [(ProcessingOptions.Format, Int)] {
        var pairs: [(ProcessingOptions.Format, Int)] = []
        for item in text.split(separator: ",") {
            let parts = item.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, let format = format(parts[0]) else {
                throw ArgumentParser.UsageError(
                    description: "\(origin): '\(item)' is not FORMAT=QUALITY with a format serve writes")
            }
            guard let quality = Int(parts[1]), (1...100).contains(quality) else {
                throw ArgumentParser.UsageError(description: "\(origin): \(parts[0]) quality must be 1-100")
            }
            pairs.append((format, quality))
        }
        return pairs
    }

    /// Comma-separated format names (imgproxy's `IMGPROXY_PREFERRED_FORMATS`), at least one.
    static func formats(_ text: String, origin: String) throws(ArgumentParser.UsageError) -> [ProcessingOptions.Format]
    {
        var formats: [ProcessingOptions.Format] = []
        for item in text.split(separator: ",") {
            let name = item.trimmingCharacters(in: .whitespaces)
            guard let format = format(name) else {
                throw ArgumentParser.UsageError(description: "\(origin): '\(name)' is not a format serve writes")
            }
            if !formats.contains(format) { formats.append(format) }
        }
        guard !formats.isEmpty else { throw ArgumentParser.UsageError(description: "\(origin): no format given") }
        return formats
    }

    /// A format by imgproxy's name (`jpeg` or `jpg`, `png`, `webp`, `avif`, `gif`, `jxl`, `heic`, `tiff`, `bmp`, `ico`).
    static func format(_ name: String) -> ProcessingOptions.Format? {
        let lower = name.lowercased()
        return lower == "jpeg" ? .jpeg : ProcessingOptions.Format(rawValue: lower)
    }
}
