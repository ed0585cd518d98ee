import VipsCore

/// The geometry and output options of `thumb`: `--size`, `--fit`,
/// `--gravity`, `--background`, `--format`, `--quality`, `--keep-metadata`.
/// Kept apart from the command so its parsing can change without touching them.
enum ProcessingFlags {
    static let valueOptions: Set<String> = ["size", "fit", "gravity", "background", "format", "quality"]
    static let flagOptions: Set<String> = ["keep-metadata", "animated"]
    static let help = """
          -s, --size S       WxH (a box), Wx (width only), xH (height only), or N for N×N
                             (default 256); pixels
          --fit MODE         inside (fit in the box, default), cover (fill the box and crop),
                             contain (fit and pad to the box with --background), fill (stretch
                             to the box); cover, contain and fill need a box
          --gravity G        what cover keeps, or where contain places the image: centre,
                             north, south, east, west, northeast, northwest, southeast,
                             southwest; cover also takes attention or entropy (smart crop)
          --background C     contain's padding and JPEG's colour under transparency: a name
                             (white, black, transparent), #rrggbb[aa] or r,g,b[,a] (default white)
          -f, --format F     jpeg, png, webp, avif or gif (default jpeg)
          -Q, --quality Q    JPEG/WebP/AVIF quality 1-100 (default 80)
          --keep-metadata    keep the EXIF block (orientation reset to 1) and mark the
                             colour profile; stripped by default
          --animated         keep every frame of animated GIF/WebP files (each fitted the same
                             way); needs --format gif or webp and --fit inside
        """

    /// What the flags ask for.
    struct Settings {
        var size: TargetSize
        var mode: ResizeMode
        var format: OutputFormat
        var background: Colour
        var keepMetadata: Bool
        var animated: Bool

        /// Everything that changes an output's pixels or bytes, as text (for
        /// the journal, so a rerun with any other value redoes the output).
        var fingerprint: String {
            let encoding: String
            switch format {
            case .jpeg(let quality, let progressive, let chroma):
                encoding = "jpeg q\(quality) p\(progressive) c\(chroma.rawValue)"
            case .png(let compression, let palette): encoding = "png z\(compression) p\(palette)"
            case .webp(let quality, let lossless, let effort): encoding = "webp q\(quality) l\(lossless) e\(effort)"
            case .avif(let quality, let effort): encoding = "avif q\(quality) e\(effort)"
            case .gif: encoding = "gif"
            case .jxl(let quality, let effort, let lossless): encoding = "jxl q\(quality) e\(effort) l\(lossless)"
            case .heic(let quality, let effort): encoding = "heic q\(quality) e\(effort)"
            case .tiff(let quality): encoding = "tiff q\(quality)"
            case .bmp: encoding = "bmp"
            case .ico: encoding = "ico"
            }
            return "size=\(size) mode=\(mode) format=\(encoding) background=\(background) "
                + "metadata=\(keepMetadata) animated=\(animated)"
        }
    }

    static func settings(_ parsed: ArgumentParser.Parsed) throws(ArgumentParser.UsageError) -> Settings {
        let size = try size(parsed.value("size") ?? "256")
        let quality = try parsed.int("quality", default: 80, in: 1...100)
        let background: Colour
        do throws(VipsError) {
            background =
                try parsed.value("background").map { text throws(VipsError) in try Colour(parsing: text) } ?? .white
        } catch {
            throw ArgumentParser.UsageError(description: "--background: \(error.message)")
        }
        let gravityName = parsed.value("gravity") ?? "centre"
        guard let gravity = Gravity(name: gravityName) else {
            throw ArgumentParser.UsageError(
                description:
                    "--gravity: unknown gravity '\(gravityName)' (choose from \(Gravity.allCases.map(\.description).joined(separator: ", ")))"
            )
        }
        let mode: ResizeMode
        switch try parsed.choice("fit", ["inside", "cover", "contain", "fill"], default: "inside") {
        case "cover": mode = .fill(gravity)
        case "contain": mode = .contain(background: background, gravity: gravity)
        case "fill": mode = .stretch
        default: mode = .fit
        }
        do throws(VipsError) {
            try mode.validate(for: size)
        } catch {
            throw ArgumentParser.UsageError(description: "--fit: \(error.message)")
        }
        let format: OutputFormat
        switch try parsed.choice("format", ["jpeg", "jpg", "png", "webp", "avif", "gif"], default: "jpeg") {
        case "png": format = .png()
        case "webp": format = .webp(quality: quality)
        case "avif": format = .avif(quality: quality)
        case "gif": format = .gif
        default: format = .jpeg(quality: quality)
        }
        let animated = parsed.flag("animated")
        if animated {
            switch (format, mode) {
            case (.gif, .fit), (.webp, .fit): break
            default:
                throw ArgumentParser.UsageError(description: "--animated needs --format gif or webp and --fit inside")
            }
        }
        return Settings(
            size: size, mode: mode, format: format, background: background,
            keepMetadata: parsed.flag("keep-metadata"), animated: animated)
    }

    /// "WxH", "Wx", "xH" or "N" (N×N), each side 1–65500.
    static func size(_ text: String) throws(ArgumentParser.UsageError) -> TargetSize {
        let problem = ArgumentParser.UsageError(
            description: "--size takes WxH, Wx, xH or N with sides from 1 to 65500, not '\(text)'")
        func side(_ part: Substring) throws(ArgumentParser.UsageError) -> Int {
            guard let value = Int(part), (1...65_500).contains(value) else { throw problem }
            return value
        }
        let parts = text.lowercased().split(separator: "x", maxSplits: 1, omittingEmptySubsequences: false)
        switch parts.count {
        case 1: return .maxPixelSize(try side(parts[0]))
        case 2 where parts[1].isEmpty: return .width(try side(parts[0]))
        case 2 where parts[0].isEmpty: return .height(try side(parts[1]))
        case 2: return .fit(width: try side(parts[0]), height: try side(parts[1]))
        default: throw problem
        }
    }
}
