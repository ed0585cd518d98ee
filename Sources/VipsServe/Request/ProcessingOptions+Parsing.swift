import Foundation
import VipsCore

/// The option table: imgproxy's names and argument rules (options/parser/ in
/// imgproxy: the same names, the same argument counts, empty arguments that
/// leave a value as it was). Where imgproxy only warns, this parser refuses:
/// a boolean that is not one (imgproxy reads it as false) is a 404 here (imgproxy's "Invalid URL").
extension ProcessingOptions {
    /// Applies one `name:arg1:arg2…` option.
    ///
    /// - Throws: `.unknownOption`, `.unsupportedOption`, `.invalidOption` or
    ///   `.unsupportedFormat`, naming the option.
    mutating func apply(_ name: Substring, _ arguments: [Substring]) throws(ProcessingURLError) {
        let option = OptionArguments(name: String(name), values: arguments)
        switch name {
        case "resize", "rs": try applyResize(option)
        case "size", "s": try applySize(option, from: 0)
        case "resizing_type", "rt":
            try option.atMost(1)
            resizingType = try option.resizingType(at: 0)
        case "width", "w":
            try option.atMost(1)
            width = try option.nonNegativeInt(at: 0)
        case "height", "h":
            try option.atMost(1)
            height = try option.nonNegativeInt(at: 0)
        case "enlarge", "el":
            try option.atMost(1)
            enlarge = try option.bool(at: 0)
        case "extend", "ex": try applyExtend(option, from: 0)
        case "gravity", "g": try option.gravity(into: &gravity, from: 0, allowing: Self.cropGravityKinds)
        case "crop", "c": try applyCrop(option)
        case "padding", "pd": try applyPadding(option)
        case "background", "bg": try applyBackground(option)
        case "quality", "q":
            try option.atMost(1)
            quality = try option.int(at: 0, in: 0...100)
        case "format", "f", "ext":
            try option.atMost(1)
            format = try Self.format(named: option.values[0], option: option.name)
        case "blur", "bl":
            try option.atMost(1)
            // VipsCore's gaussian blur takes a sigma up to 500.
            blur = try option.nonNegativeDouble(at: 0, atMost: 500)
        case "sharpen", "sh":
            try option.atMost(1)
            // VipsCore's sharpen takes a sigma up to 10.
            sharpen = try option.nonNegativeDouble(at: 0, atMost: 10)
        case "rotate", "rot":
            try option.atMost(1)
            let angle = try option.int(at: 0, in: Int.min...Int.max)
            guard angle % 90 == 0 else { throw option.invalid("the rotation angle \(angle) is not a multiple of 90") }
            rotate = (angle % 360 + 360) % 360
        case "strip_metadata", "sm":
            // As an option name `sm` is strip_metadata; as gravity's argument (`g:sm`) it is smart gravity.
            try option.atMost(1)
            stripMetadata = try option.bool(at: 0)
        case "dpr":
            try option.atMost(1)
            dpr = try option.positiveDouble(at: 0)
        case "watermark", "wm": try applyWatermark(option)
        case "cachebuster", "cb":
            try option.atMost(1)
            cacheBuster = option.values[0].isEmpty ? nil : String(option.values[0])
        case "skip_processing", "skp": try applySkipProcessing(option)
        case "raw":
            try option.atMost(1)
            raw = try option.bool(at: 0)
        case "expires", "exp": try applyExpires(option)
        case "filename", "fn": try applyFilename(option)
        case "return_attachment", "att":
            try option.atMost(1)
            returnAttachment = try option.bool(at: 0)
        case "format_quality", "fq": try applyFormatQuality(option)
        case "max_bytes", "mb":
            try option.atMost(1)
            maxBytes = try option.nonNegativeInt(at: 0)
        case "strip_color_profile", "scp":
            try option.atMost(1)
            stripColorProfile = try option.bool(at: 0)
        case "keep_copyright", "kcr":
            try option.atMost(1)
            keepCopyright = try option.bool(at: 0)
        case "preserve_hdr", "ph":
            try option.atMost(1)
            preserveHDR = try option.bool(at: 0)
        case "min-width", "mw", "min-height", "mh", "zoom", "z", "extend_aspect_ratio", "extend_ar", "exar", "trim",
            "t", "flip", "fl", "pixelate", "pix", "auto_rotate", "ar":
            try applyGeometryOption(option)
        default:
            if let known = Self.unsupportedOptions[String(name)] {
                throw ProcessingURLError(.unsupportedOption, "option \(name) (\(known)) is not supported")
            }
            throw ProcessingURLError(.unknownOption, "unknown option \(name)")
        }
    }

    /// `rs:%type:%width:%height:%enlarge:%extend:%gravity…`.
    private mutating func applyResize(_ option: OptionArguments) throws(ProcessingURLError) {
        try option.atMost(8)
        if !option.values[0].isEmpty { resizingType = try option.resizingType(at: 0) }
        if option.values.count > 1 { try applySize(option, from: 1) }
    }

    /// `s:%width:%height:%enlarge:%extend:%gravity…`, its arguments from `start`.
    private mutating func applySize(_ option: OptionArguments, from start: Int) throws(ProcessingURLError) {
        try option.atMost(start + 7)
        if option.has(start) { width = try option.nonNegativeInt(at: start) }
        if option.has(start + 1) { height = try option.nonNegativeInt(at: start + 1) }
        if option.has(start + 2) { enlarge = try option.bool(at: start + 2) }
        if option.has(start + 3) { try applyExtend(option, from: start + 3) }
    }

    /// `ex:%extend:%gravity:%x:%y`, its arguments from `start`.
    private mutating func applyExtend(_ option: OptionArguments, from start: Int) throws(ProcessingURLError) {
        try option.atMost(start + 4)
        extend = try option.bool(at: start)
        if option.values.count > start + 1 {
            try option.gravity(into: &extendGravity, from: start + 1, allowing: Self.extendGravityKinds)
        }
    }

    /// `c:%width:%height:%gravity:%x:%y`.
    private mutating func applyCrop(_ option: OptionArguments) throws(ProcessingURLError) {
        cropWidth = try option.nonNegativeDouble(at: 0, atMost: .greatestFiniteMagnitude)
        if option.values.count > 1 {
            cropHeight = try option.nonNegativeDouble(at: 1, atMost: .greatestFiniteMagnitude)
        }
        if option.values.count > 2 {
            var spec = cropGravity ?? .centre
            try option.gravity(into: &spec, from: 2, allowing: Self.cropGravityKinds)
            cropGravity = spec
        }
    }

    /// `pd:%top:%right:%bottom:%left`, CSS-style: right defaults to top, bottom
    /// to top, left to right.
    private mutating func applyPadding(_ option: OptionArguments) throws(ProcessingURLError) {
        try option.atMost(4)
        if option.has(0) { padding.top = try option.nonNegativeInt(at: 0) }
        padding.right = option.has(1) ? try option.nonNegativeInt(at: 1) : padding.top
        padding.bottom = option.has(2) ? try option.nonNegativeInt(at: 2) : padding.top
        padding.left = option.has(3) ? try option.nonNegativeInt(at: 3) : padding.right
    }

    /// `bg:%hex` (3 or 6 digits), `bg:%r:%g:%b`, or `bg:` (none).
    private mutating func applyBackground(_ option: OptionArguments) throws(ProcessingURLError) {
        switch option.values.count {
        case 1:
            let hex = option.values[0]
            if hex.isEmpty {
                background = nil
                return
            }
            let digits = hex.utf8.compactMap(\.hexValue)
            guard digits.count == hex.utf8.count, digits.count == 3 || digits.count == 6 else {
                throw option.invalid("\(hex) is not a hex colour (3 or 6 digits)")
            }
            let channels =
                digits.count == 3
                ? digits.map { $0 * 17 }
                : [digits[0] << 4 | digits[1], digits[2] << 4 | digits[3], digits[4] << 4 | digits[5]]
            background = Colour(red: channels[0], green: channels[1], blue: channels[2])
        case 3:
            var channels: [UInt8] = []
            for index in 0..<3 {
                let text = option.values[index]
                guard !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = UInt8(text)
                else { throw option.invalid("\(text) is not a channel value 0–255") }
                channels.append(value)
            }
            background = Colour(red: channels[0], green: channels[1], blue: channels[2])
        default:
            throw option.invalid("takes a hex colour or three channel values, not \(option.values.count) arguments")
        }
    }

    /// `skp:%format1:%format2…`: adds each source format (imgproxy's names).
    private mutating func applySkipProcessing(_ option: OptionArguments) throws(ProcessingURLError) {
        for name in option.values {
            guard let format = Self.skipProcessingFormats[String(name)] else {
                throw option.invalid("\(name.isEmpty ? "an empty value" : name) is not an image format")
            }
            skipProcessing.insert(format)
        }
    }

    /// `exp:%timestamp`: a Unix time; one in the past (above 0) is refused,
    /// as imgproxy refuses it ("Expired URL"), with a 404.
    private mutating func applyExpires(_ option: OptionArguments) throws(ProcessingURLError) {
        try option.atMost(1)
        let timestamp = try option.int(at: 0, in: Int.min...Int.max)
        if timestamp > 0, timestamp < Int(Date().timeIntervalSince1970) { throw option.invalid("the URL has expired") }
        expires = timestamp == 0 ? nil : timestamp
    }

    /// `fn:%filename:%encoded`: the name as it is, or base64url-encoded
    /// (padding optional) when `%encoded` is true.
    private mutating func applyFilename(_ option: OptionArguments) throws(ProcessingURLError) {
        try option.atMost(2)
        let value = option.values[0]
        if option.has(1), try option.bool(at: 1) {
            var encoded = String(value)
            while encoded.hasSuffix("=") { encoded.removeLast() }
            guard let bytes = URLSigningKey.bytes(base64URL: encoded),
                let text = String(validating: bytes, as: UTF8.self)
            else { throw option.invalid("\(value) is not base64url-encoded UTF-8") }
            filename = text.isEmpty ? nil : text
        } else {
            filename = value.isEmpty ? nil : String(value)
        }
    }

    /// Source formats `skip_processing` names, by imgproxy's names.
    static let skipProcessingFormats: [String: ImageFormat] = [
        "jpg": .jpeg, "jpeg": .jpeg, "png": .png, "webp": .webp, "gif": .gif, "avif": .avif, "heic": .heif,
        "tiff": .tiff, "bmp": .bmp, "ico": .ico, "svg": .svg, "jxl": .jxl, "pdf": .pdf
    ]

    /// A source format's imgproxy name, for `skp:` in the canonical segments.
    static func skipProcessingName(_ format: ImageFormat) -> String {
        switch format {
        case .jpeg: return "jpg"
        case .heif: return "heic"
        default: return format.rawValue
        }
    }

    /// `fq:%format1:%quality1:%format2:%quality2…`: pairs, each setting one
    /// format's quality (0 clears it), as imgproxy's `applyFormatQualityOption`.
    private mutating func applyFormatQuality(_ option: OptionArguments) throws(ProcessingURLError) {
        guard option.values.count % 2 == 0 else {
            throw option.invalid("missing the quality for \(option.values[option.values.count - 1])")
        }
        var updated = formatQuality
        for index in stride(from: 0, to: option.values.count, by: 2) {
            let name = option.values[index]
            guard let format = try Self.format(named: name, option: option.name) else {
                throw option.invalid("\(name) is not an output format")
            }
            let quality = try option.int(at: index + 1, in: 0...100)
            updated[format] = quality == 0 ? nil : quality
        }
        formatQuality = updated
    }

    /// An output format by its imgproxy name.
    static func format(named name: Substring, option: String) throws(ProcessingURLError) -> Format? {
        switch name {
        case "jpg", "jpeg": return .jpeg
        case "auto": return nil
        default:
            if let format = Format(rawValue: String(name)) { return format }
            if unsupportedFormats.contains(String(name)) {
                throw ProcessingURLError(.unsupportedFormat, "\(option): \(name) output is not supported")
            }
            throw ProcessingURLError(.invalidOption, "\(option): unknown format \(name)")
        }
    }

    /// Gravity types a crop or `gravity` accepts: all of them.
    static let cropGravityKinds = Set(Gravity.Kind.allCases)
    /// Gravity types `extend` accepts: all but smart.
    static let extendGravityKinds = Set(Gravity.Kind.allCases).subtracting([.smart])
    /// Formats imgproxy writes and this server does not (422).
    /// SVG is only passed through by imgproxy (never written from pixels);
    /// `best` is imgproxy Pro's.
    static let unsupportedFormats: Set<String> = ["svg", "best"]

    /// imgproxy's other options (open source and Pro), refused by name with what they do.
    static let unsupportedOptions: [String: String] = {
        var table: [String: String] = [:]
        for (names, what) in [
            (["enforce_thumbnail", "eth"], "enforce thumbnail"),
            (["max_result_dimension", "mrd"], "max result dimension"),
            (["resizing_algorithm", "ra"], "resizing algorithm"), (["adjust", "a"], "adjust"),
            (["brightness", "br"], "brightness"), (["contrast", "co"], "contrast"),
            (["saturation", "sa"], "saturation"), (["monochrome", "mc"], "monochrome"), (["duotone", "dt"], "duotone"),
            (["unsharp_masking", "ush"], "unsharp masking"), (["blur_areas", "ba"], "blur areas"),
            (["blur_detections", "bd"], "blur detections"), (["draw_detections", "dd"], "draw detections"),
            (["colorize", "col"], "colorize"), (["gradient", "gr"], "gradient"),
            (["watermark_url", "wmu"], "watermark URL"), (["watermark_text", "wmt"], "watermark text"),
            (["watermark_size", "wms"], "watermark size"), (["watermark_rotate", "wmr", "wm_rot"], "watermark rotate"),
            (["watermark_shadow", "wmsh"], "watermark shadow"), (["style", "st"], "style"),
            (["background_alpha", "bga"], "background alpha"),
            (["objects_position", "obj_pos", "op"], "objects position"),
            (["crop_aspect_ratio", "crop_ar", "car"], "crop aspect ratio"), (["crop_objects", "cob"], "crop objects"),
            (["jpeg_options", "jpgo"], "JPEG options"), (["png_options", "pngo"], "PNG options"),
            (["webp_options", "webpo"], "WebP options"), (["avif_options", "avifo"], "AVIF options"),
            (["autoquality", "aq"], "autoquality"), (["page", "pg"], "page"), (["pages", "pgs"], "pages"),
            (["disable_animation", "da"], "disable animation"),
            (["video_thumbnail_second", "vts"], "video thumbnail second"),
            (["video_thumbnail_keyframes", "vtk"], "video thumbnail keyframes"),
            (["video_thumbnail_tile", "vtt"], "video thumbnail tile"),
            (["video_thumbnail_animation", "vta"], "video thumbnail animation"),
            (["fallback_image_url", "fiu"], "fallback image URL"), (["hashsum", "hs"], "hashsum"),
            (["dpi"], "DPI"), (["color_profile", "cp", "icc"], "color profile"),
            (["progressive_blur", "pbl"], "progressive blur"), (["bypass_cache"], "bypass cache"),
            (["cache_tags"], "cache tags")
        ] {
            for name in names { table[name] = what }
        }
        return table
    }()
}

extension ProcessingOptions {
    /// min-width/height, zoom, extend_aspect_ratio, trim, flip, pixelate and
    /// auto_rotate, with imgproxy's arguments.
    fileprivate mutating func applyGeometryOption(_ option: OptionArguments) throws(ProcessingURLError) {
        switch option.name {
        case "min-width", "mw":
            try option.atMost(1)
            minWidth = try option.nonNegativeInt(at: 0)
        case "min-height", "mh":
            try option.atMost(1)
            minHeight = try option.nonNegativeInt(at: 0)
        case "zoom", "z":
            // `z:%zoom` sets both factors, `z:%x:%y` each.
            try option.atMost(2)
            zoomWidth = try option.positiveDouble(at: 0)
            zoomHeight = option.values.count > 1 ? try option.positiveDouble(at: 1) : zoomWidth
        case "extend_aspect_ratio", "extend_ar", "exar":
            try option.atMost(4)
            extendAspectRatio = try option.bool(at: 0)
            if option.values.count > 1 {
                try option.gravity(into: &extendAspectRatioGravity, from: 1, allowing: Self.extendGravityKinds)
            }
        case "trim", "t":
            // `t:%threshold:%colour:%equal_hor:%equal_ver`: an empty threshold turns trimming off,
            // an empty colour goes back to the top-left pixel's, an empty flag keeps its value.
            try option.atMost(4)
            // imgproxy passes a negative threshold on to libvips, which fails; here it is an invalid option.
            trimThreshold = option.has(0) ? try option.nonNegativeDouble(at: 0, atMost: .greatestFiniteMagnitude) : nil
            trimColour = option.has(1) ? try option.hexColour(at: 1) : nil
            if option.has(2) { trimEqualHorizontal = try option.bool(at: 2) }
            if option.has(3) { trimEqualVertical = try option.bool(at: 3) }
        case "flip", "fl":
            try option.atMost(2)
            if option.has(0) { flipHorizontal = try option.bool(at: 0) }
            if option.has(1) { flipVertical = try option.bool(at: 1) }
        case "pixelate", "pix":
            try option.atMost(1)
            pixelate = try option.nonNegativeInt(at: 0)
        default:
            try option.atMost(1)
            autoRotate = try option.bool(at: 0)
        }
    }
}

/// One option's arguments and the rules for reading them, each failure naming the option.
struct OptionArguments {
    let name: String
    /// The arguments; at least one (`w:` has one empty argument).
    let values: [Substring]

    func invalid(_ detail: String) -> ProcessingURLError {
        ProcessingURLError(.invalidOption, "\(name): \(detail)")
    }

    /// Refuses more than `count` arguments.
    func atMost(_ count: Int) throws(ProcessingURLError) {
        guard values.count <= count else { throw invalid("takes at most \(count) arguments, not \(values.count)") }
    }

    /// Whether argument `index` is given and not empty.
    func has(_ index: Int) -> Bool { index < values.count && !values[index].isEmpty }

    func int(at index: Int, in range: ClosedRange<Int>) throws(ProcessingURLError) -> Int {
        let text = values[index]
        guard let value = Int(text) else {
            throw invalid("\(text.isEmpty ? "an empty value" : text) is not an integer")
        }
        guard range.contains(value) else {
            throw invalid("\(value) is outside \(range.lowerBound)–\(range.upperBound)")
        }
        return value
    }

    func nonNegativeInt(at index: Int) throws(ProcessingURLError) -> Int {
        let value = try int(at: index, in: Int.min...Int.max)
        guard value >= 0 else { throw invalid("\(value) is negative") }
        return value
    }

    /// Go's `strconv.ParseBool`: 1, t, T, TRUE, true, True; 0, f, F, FALSE, false, False.
    func bool(at index: Int) throws(ProcessingURLError) -> Bool {
        switch values[index] {
        case "1", "t", "T", "TRUE", "true", "True": return true
        case "0", "f", "F", "FALSE", "false", "False": return false
        default: throw invalid("\(values[index].isEmpty ? "an empty value" : values[index]) is not a boolean")
        }
    }

    /// A finite decimal number: `[+-]digits[.digits][e[+-]digits]` (or `.5`, `5.`).
    func double(at index: Int) throws(ProcessingURLError) -> Double {
        let text = values[index]
        guard Self.isDecimal(text), let value = Double(text), value.isFinite else {
            throw invalid("\(text.isEmpty ? "an empty value" : text) is not a number")
        }
        return value
    }

    func nonNegativeDouble(at index: Int, atMost limit: Double) throws(ProcessingURLError) -> Double {
        let value = try double(at: index)
        guard value >= 0 else { throw invalid("\(value) is negative") }
        guard value <= limit else { throw invalid("\(value) is over \(limit)") }
        return value == 0 ? 0 : value
    }

    /// A hex colour of 3 or 6 digits.
    func hexColour(at index: Int) throws(ProcessingURLError) -> Colour {
        let hex = values[index]
        let digits = hex.utf8.compactMap(\.hexValue)
        guard digits.count == hex.utf8.count, digits.count == 3 || digits.count == 6 else {
            throw invalid("\(hex) is not a hex colour (3 or 6 digits)")
        }
        let channels =
            digits.count == 3
            ? digits.map { $0 * 17 }
            : [digits[0] << 4 | digits[1], digits[2] << 4 | digits[3], digits[4] << 4 | digits[5]]
        return Colour(red: channels[0], green: channels[1], blue: channels[2])
    }

    func positiveDouble(at index: Int) throws(ProcessingURLError) -> Double {
        let value = try double(at: index)
        guard value > 0 else { throw invalid("\(value) is not positive") }
        return value
    }

    func resizingType(at index: Int) throws(ProcessingURLError) -> ProcessingOptions.ResizingType {
        guard let type = ProcessingOptions.ResizingType(rawValue: String(values[index])) else {
            throw invalid("\(values[index]) is not fit, fill, fill-down, force or auto")
        }
        return type
    }

    /// imgproxy's `parseGravity`: sets the type, and each offset given (an
    /// empty one keeps the old value); smart gravity clears the offsets and
    /// takes none; a focus point needs both coordinates, 0–1.
    func gravity(
        into spec: inout ProcessingOptions.Gravity, from start: Int, allowing kinds: Set<ProcessingOptions.Gravity.Kind>
    ) throws(ProcessingURLError) {
        let count = values.count - start
        guard let kind = ProcessingOptions.Gravity.Kind(rawValue: String(values[start])), kinds.contains(kind) else {
            let names = ProcessingOptions.Gravity.Kind.allCases.filter(kinds.contains).map(\.rawValue)
            throw invalid("\(values[start]) is not a gravity (\(names.joined(separator: ", ")))")
        }
        switch kind {
        case .smart:
            guard count == 1 else { throw invalid("smart gravity takes no offsets") }
            spec = ProcessingOptions.Gravity(.smart)
            return
        case .focusPoint:
            guard count == 3 else { throw invalid("a focus point takes x and y") }
        default:
            guard count <= 3 else { throw invalid("gravity takes a type and at most two offsets") }
        }
        var updated = spec
        updated.kind = kind
        for (axis, index) in [(0, start + 1), (1, start + 2)] where has(index) {
            let value = try double(at: index)
            if kind == .focusPoint, !(0...1).contains(value) {
                throw invalid("the focus point \(value) is outside 0–1")
            }
            if axis == 0 { updated.x = value } else { updated.y = value }
        }
        spec = updated
    }

    static func isDecimal(_ text: Substring) -> Bool {
        var bytes = text.utf8[...]
        if let first = bytes.first, first == UInt8(ascii: "+") || first == UInt8(ascii: "-") {
            bytes = bytes.dropFirst()
        }
        let isDigit = { (byte: UInt8) in (0x30...0x39).contains(byte) }
        let whole = bytes.prefix(while: isDigit)
        bytes = bytes.dropFirst(whole.count)
        var fraction = bytes.prefix(0)
        if bytes.first == UInt8(ascii: ".") {
            fraction = bytes.dropFirst().prefix(while: isDigit)
            bytes = bytes.dropFirst(1 + fraction.count)
        }
        guard !whole.isEmpty || !fraction.isEmpty else { return false }
        if let e = bytes.first, e == UInt8(ascii: "e") || e == UInt8(ascii: "E") {
            bytes = bytes.dropFirst()
            if let sign = bytes.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
                bytes = bytes.dropFirst()
            }
            let exponent = bytes.prefix(while: isDigit)
            guard !exponent.isEmpty else { return false }
            bytes = bytes.dropFirst(exponent.count)
        }
        return bytes.isEmpty
    }
}
