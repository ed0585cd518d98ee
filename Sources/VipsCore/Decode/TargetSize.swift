/// The size a decode should produce.
///
/// Sizes are in **points**, not pixels: the pixel size is points × the
/// request's `scale` (as UIKit's `UIImage(data:scale:)`). So
/// `.maxPixelSize(128)` at `scale: 2` gives an image 256 pixels on its long
/// side; at the default `scale: 1` points and pixels are the same.
public enum TargetSize: Sendable, Hashable, CustomStringConvertible {
    /// The image at its own size.
    case original
    /// Fit inside a square of this many points: the longer side becomes this.
    case maxPixelSize(Int)
    /// Fit inside a width × height box, keeping the aspect ratio.
    case fit(width: Int, height: Int)
    /// This many points wide; the height follows from the aspect ratio.
    case width(Int)
    /// This many points high; the width follows from the aspect ratio.
    case height(Int)

    /// The pixel extent standing for "no bound" on the free side of `.width`
    /// and `.height` (libvips' own largest coordinate, as `vipsthumbnail` uses).
    public static let unboundedSide = 10_000_000

    /// The pixel box for `scale`, or nil for `.original`. Each side is at
    /// least 1 and at most `Int32.max` (libvips' coordinate type), so no size
    /// or scale can trap the conversion; a NaN scale gives 1.
    public func pixelBox(scale: Double) -> (width: Int, height: Int)? {
        func px(_ points: Int) -> Int {
            let pixels = (Double(points) * scale).rounded()
            if pixels.isNaN || pixels < 1 { return 1 }
            return pixels < Double(Int32.max) ? Int(pixels) : Int(Int32.max)
        }
        switch self {
        case .original: return nil
        case .maxPixelSize(let side): return (px(side), px(side))
        case .fit(let width, let height): return (px(width), px(height))
        case .width(let width): return (px(width), Self.unboundedSide)
        case .height(let height): return (Self.unboundedSide, px(height))
        }
    }

    /// Whether both sides are bounded (a box, not one side or the original):
    /// what the resize modes other than fit need.
    public var isBox: Bool {
        switch self {
        case .maxPixelSize, .fit: return true
        case .original, .width, .height: return false
        }
    }

    /// Whether a valid (positive) size is described.
    public var isValid: Bool {
        switch self {
        case .original: return true
        case .maxPixelSize(let side): return side > 0
        case .fit(let width, let height): return width > 0 && height > 0
        case .width(let side), .height(let side): return side > 0
        }
    }

    public var description: String {
        switch self {
        case .original: return "original"
        case .maxPixelSize(let side): return "max\(side)"
        case .fit(let width, let height): return "\(width)x\(height)"
        case .width(let width): return "\(width)x"
        case .height(let height): return "x\(height)"
        }
    }
}
