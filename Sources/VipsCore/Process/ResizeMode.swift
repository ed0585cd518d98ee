/// How an image is brought to a target box (`TargetSize.fit` or `.maxPixelSize`).
///
/// Every mode shrinks on load as far as its output allows: a 4000×3000 JPEG
/// filled into 256×256 is decoded at 1/8 just as a fit is. No mode enlarges
/// an image unless upscaling is allowed (`allowUpscale`); without it the
/// output is never larger than the image on any side, except for `contain`'s
/// padding.
public enum ResizeMode: Sendable, Hashable, CustomStringConvertible {
    /// Fit inside the box, keeping the aspect ratio (sharp's `inside`). The
    /// default, and the only mode for one-sided targets (`.width`, `.height`).
    case fit
    /// Cover the box, keeping the aspect ratio, then crop to exactly the box
    /// (sharp's `cover`, Nuke's `.aspectFill` with crop): the part kept is
    /// chosen by `gravity`, including `.attention` and `.entropy` smart crops.
    case fill(Gravity = .centre)
    /// Fit inside the box, then pad to exactly the box with `background`
    /// (letterbox; sharp's `contain`), the image placed at `gravity`. A
    /// background with alpha below 255 gives an RGBA bitmap.
    case contain(background: Colour = .white, gravity: Gravity = .centre)
    /// Scale each side to the box independently, ignoring the aspect ratio
    /// (sharp's `fill`).
    case stretch

    /// A stable text for cache keys and logs.
    public var description: String {
        switch self {
        case .fit: return "fit"
        case .fill(let gravity): return "fill-\(gravity)"
        case .contain(let background, let gravity): return "contain-\(background)-\(gravity)"
        case .stretch: return "stretch"
        }
    }

    /// `.invalidArgument` when this mode cannot be applied to `size`.
    public func validate(for size: TargetSize) throws(VipsError) {
        if case .fit = self { return }
        guard size.isBox else {
            throw VipsError(.invalidArgument, "resize mode \(self) needs a width×height box, not \(size)")
        }
        if case .contain(_, let gravity) = self, gravity.isSmart {
            throw VipsError(.invalidArgument, "contain places the image by a compass gravity, not \(gravity)")
        }
    }
}

/// Where the kept part of an image (or an overlay, or a letterboxed image) sits.
public enum Gravity: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Where in the box: the centre, an edge or a corner.
    case centre, north, south, east, west, northEast, northWest, southEast, southWest
    /// libvips' attention strategy: skin tones, saturated colour and edges (smart crop).
    case attention
    /// The region of highest entropy (smart crop).
    case entropy

    /// Whether the position is found from the content (crops only).
    public var isSmart: Bool { self == .attention || self == .entropy }

    /// The gravity named as the CLI and sharp spell it ("centre"/"center",
    /// "north", "northeast"/"north-east", "attention", ...); nil if unknown.
    public init?(name: String) {
        let key = name.lowercased().replacingOccurrences(of: "-", with: "").replacingOccurrences(of: "_", with: "")
        if key == "center" { self = .centre; return }
        guard let found = Self.allCases.first(where: { $0.rawValue.lowercased() == key }) else { return nil }
        self = found
    }

    /// The name in lower case, as `init(name:)` reads it.
    public var description: String { rawValue.lowercased() }

    /// The offset of a `part`-sized piece within `whole` along one axis:
    /// `low` is north/west, `high` south/east.
    func offset(whole: Int, part: Int, low: Bool, high: Bool) -> Int {
        let room = max(0, whole - part)
        if low { return 0 }
        if high { return room }
        return room / 2
    }

    /// The top-left corner of a `part` rectangle placed in `whole` at this gravity
    /// (smart gravities place at the centre).
    func origin(whole: (width: Int, height: Int), part: (width: Int, height: Int)) -> (x: Int, y: Int) {
        let west = self == .west || self == .northWest || self == .southWest
        let east = self == .east || self == .northEast || self == .southEast
        let north = self == .north || self == .northWest || self == .northEast
        let south = self == .south || self == .southWest || self == .southEast
        return (
            offset(whole: whole.width, part: part.width, low: west, high: east),
            offset(whole: whole.height, part: part.height, low: north, high: south)
        )
    }
}
