import VipsCore

extension ImageServer {
    /// How results are encoded when the URL leaves it open: imgproxy's
    /// `IMGPROXY_QUALITY`, `IMGPROXY_FORMAT_QUALITY`, `IMGPROXY_PREFERRED_FORMATS`,
    /// `IMGPROXY_AUTO_WEBP` / `IMGPROXY_ENFORCE_WEBP` (and the AVIF and JPEG XL
    /// ones), `IMGPROXY_ENABLE_CLIENT_HINTS`, `IMGPROXY_STRIP_COLOR_PROFILE`,
    /// `IMGPROXY_KEEP_COPYRIGHT` and `IMGPROXY_PRESERVE_HDR`. Every default is imgproxy's.
    public struct OutputSettings: Sendable, Hashable {
        /// The quality of a format that has one, when neither the URL
        /// (`quality`, `format_quality`) nor `formatQuality` sets it. 1–100; default 80.
        public var quality = 80
        /// Qualities by format (1–100), over `quality`. Default WebP 79, AVIF 63, JPEG XL 77.
        public var formatQuality: [ProcessingOptions.Format: Int] = [.webp: 79, .avif: 63, .jxl: 77]
        /// The formats a result is written in when the URL names none and no
        /// `Accept` preference applies: the source's format when it is in this
        /// list, else the first format in it that can hold the result (not
        /// JPEG for a result with transparency), else the first. Never empty
        /// (an empty list is read as the default). Default JPEG, PNG, GIF.
        public var preferredFormats: [ProcessingOptions.Format] = [.jpeg, .png, .gif]
        /// With no format in the URL, WebP for a client whose `Accept` names
        /// `image/webp`. Default false.
        public var autoWebP = false
        /// `autoWebP`, and WebP even over the URL's format. Default false.
        public var enforceWebP = false
        /// As `autoWebP`, for AVIF (`image/avif`); AVIF is preferred over WebP. Default false.
        public var autoAVIF = false
        /// As `enforceWebP`, for AVIF. Default false.
        public var enforceAVIF = false
        /// As `autoWebP`, for JPEG XL (`image/jxl`); preferred over AVIF and WebP. Default false.
        public var autoJXL = false
        /// As `enforceWebP`, for JPEG XL. Default false.
        public var enforceJXL = false
        /// Reads the `Sec-CH-DPR` / `DPR` and `Sec-CH-Width` / `Width` request
        /// fields as the defaults of `dpr` and `width` (the width in physical
        /// pixels, divided by the dpr), which the URL's options override.
        /// Default false.
        public var enableClientHints = false
        /// Whether the result carries no colour profile; with false, a source
        /// that had one gets the sRGB profile its decoded pixels are in
        /// (formats that store one). The URL's `strip_color_profile` overrides it. Default true.
        public var stripColorProfile = true
        /// imgproxy's `keep_copyright` default (see docs/serve-url.md for
        /// what `serve` keeps). The URL's `keep_copyright` overrides it. Default true.
        public var keepCopyright = true
        /// imgproxy's `preserve_hdr` default: `serve` decodes to 8 bits a
        /// sample, so results are 8-bit either way. Default false.
        public var preserveHDR = false

        /// imgproxy's defaults.
        public init() {}

        /// The preferred formats, never empty.
        var preferred: [ProcessingOptions.Format] {
            preferredFormats.isEmpty ? OutputSettings().preferredFormats : preferredFormats
        }

        /// Whether any `Accept` preference is on.
        var readsAccept: Bool { autoWebP || enforceWebP || autoAVIF || enforceAVIF || autoJXL || enforceJXL }

        /// Whether any format is enforced over the URL's.
        var enforcesAny: Bool { enforceWebP || enforceAVIF || enforceJXL }

        /// imgproxy's `Quality(format)`: the URL's `quality`, else its
        /// `format_quality` for `format`, else `formatQuality`, else `quality`.
        func quality(for format: ProcessingOptions.Format, options: ProcessingOptions) -> Int {
            if options.quality > 0 { return options.quality }
            if let quality = options.formatQuality[format], quality > 0 { return quality }
            if let quality = formatQuality[format], (1...100).contains(quality) { return quality }
            return min(100, max(1, quality))
        }

        /// The format `Accept` asks for under these settings: preferred (the
        /// URL names none) or enforced (over the URL's). nil when none applies.
        func negotiated(
            accept: String?, urlFormat: ProcessingOptions.Format?
        ) -> ProcessingOptions.Format? {
            guard readsAccept else { return nil }
            let accepted = AcceptField.acceptedTypes(accept)
            let candidates: [(ProcessingOptions.Format, String, auto: Bool, enforce: Bool)] = [
                (.jxl, "image/jxl", autoJXL, enforceJXL), (.avif, "image/avif", autoAVIF, enforceAVIF),
                (.webp, "image/webp", autoWebP, enforceWebP)
            ]
            for (format, type, auto, enforce) in candidates where accepted.contains(type) {
                if urlFormat == nil ? (auto || enforce) : enforce { return format }
            }
            return nil
        }

        /// The part of a cache key these settings decide for a result of
        /// `options` (the qualities, and the preferred formats when the format
        /// is chosen after the decode), in one fixed order.
        func keyText(options: ProcessingOptions, chosenFromSource: Bool) -> String {
            var parts: [String] = []
            if chosenFromSource {
                parts.append("pref=" + preferred.map(\.rawValue).joined(separator: ","))
            }
            let qualities = ProcessingOptions.Format.allCases.filter(\.hasQuality).map {
                "\($0.rawValue)\(quality(for: $0, options: options))"
            }
            parts.append("q=" + qualities.joined(separator: ","))
            parts.append("scp=\(options.stripColorProfile ?? stripColorProfile ? 1 : 0)")
            parts.append("kcr=\(options.keepCopyright ?? keepCopyright ? 1 : 0)")
            return parts.joined(separator: ";")
        }
    }
}
