/// A decode decided from the image's header: a crop of the upright source,
/// the exact pixel size that crop is resized to, and a crop of the result.
///
/// An `ImageGeometry` makes one from the header (`ImageInfo`) before any
/// pixel is decoded, so the decoder can shrink on load as far as the plan's
/// output allows and cut the crop at the shrunk scale: a 4000×3000 JPEG whose
/// centre 2000×2000 is resized to 250×250 is decoded at 1/8, never at full size.
///
/// All sizes are in pixels. A plan larger than its crop enlarges it.
public struct DecodePlan: Sendable, Hashable, CustomStringConvertible {
    /// A region to keep.
    public enum Crop: Sendable, Hashable, CustomStringConvertible {
        /// The rectangle at (`x`, `y`), `width` × `height`.
        case rect(x: Int, y: Int, width: Int, height: Int)
        /// A `width` × `height` region found by a smart `gravity` (`.attention`
        /// or `.entropy`); a compass gravity places it.
        case smart(width: Int, height: Int, gravity: Gravity)

        /// The region's size.
        public var size: (width: Int, height: Int) {
            switch self {
            case .rect(_, _, let width, let height), .smart(let width, let height, _): return (width, height)
            }
        }

        public var description: String {
            switch self {
            case .rect(let x, let y, let width, let height): return "\(width)x\(height)+\(x)+\(y)"
            case .smart(let width, let height, let gravity): return "\(width)x\(height)@\(gravity)"
            }
        }
    }

    /// The part of the upright source to keep before resizing; nil for the whole image.
    public var crop: Crop?
    /// The width the crop (or the whole image) is resized to, exactly.
    public var width: Int
    /// The height the crop (or the whole image) is resized to, exactly.
    public var height: Int
    /// The part of the resized image to keep, in its pixels; nil for all of it.
    public var resultCrop: Crop?

    /// A plan; each parameter is the property of that name.
    public init(crop: Crop? = nil, width: Int, height: Int, resultCrop: Crop? = nil) {
        self.crop = crop
        self.width = width
        self.height = height
        self.resultCrop = resultCrop
    }

    /// The whole image at its own size.
    public static func original(_ info: ImageInfo) -> DecodePlan {
        DecodePlan(width: info.width, height: info.height)
    }

    /// The output's size: the result crop's, else the resized size.
    public var outputSize: (width: Int, height: Int) { resultCrop?.size ?? (width, height) }

    public var description: String {
        (crop.map { "crop \($0) → " } ?? "") + "\(width)x\(height)" + (resultCrop.map { " → crop \($0)" } ?? "")
    }

    /// `.invalidArgument` unless every size is positive and each crop lies within what it crops.
    public func validate(for info: ImageInfo) throws(VipsError) {
        func check(_ crop: Crop?, within bounds: (width: Int, height: Int), _ name: String) throws(VipsError) {
            guard let crop else { return }
            let (width, height) = crop.size
            var inside = width > 0 && height > 0 && width <= bounds.width && height <= bounds.height
            if case .rect(let x, let y, _, _) = crop {
                inside = inside && x >= 0 && y >= 0 && x <= bounds.width - width && y <= bounds.height - height
            }
            guard inside else {
                throw VipsError(
                    .invalidArgument,
                    "decode plan \(self): the \(name) \(crop) is not within \(bounds.width)x\(bounds.height)")
            }
        }
        guard width > 0, height > 0, width <= Int(Int32.max), height <= Int(Int32.max) else {
            throw VipsError(.invalidArgument, "decode plan \(self): the size must be positive")
        }
        try check(crop, within: (info.width, info.height), "crop")
        try check(resultCrop, within: (width, height), "result crop")
    }
}

/// Decides how an image is decoded from its header: the size, crops and
/// enlargement that depend on the image's own size, orientation or pages.
///
/// Set one as `ImageRequest.geometry` (or pass it to
/// `ImageDecoder.decode(_:geometry:scale:keepingMetadata:)`): the decoder
/// reads the header, asks `plan(for:)`, and decodes straight to the plan,
/// shrinking on load as far as the output allows. Conforming types must be
/// pure: the same header gives the same plan, and two geometries with one
/// `identifier` plan alike for every header, since caches key the result by it.
///
/// ```swift
/// /// The centre square of any image, 256 px a side.
/// struct CentreSquare: ImageGeometry {
///     var identifier: String { "centre-square-256" }
///     func plan(for info: ImageInfo) -> DecodePlan {
///         let side = min(info.width, info.height)
///         let crop = DecodePlan.Crop.rect(
///             x: (info.width - side) / 2, y: (info.height - side) / 2, width: side, height: side)
///         return DecodePlan(crop: crop, width: 256, height: 256)
///     }
/// }
/// ```
public protocol ImageGeometry: Sendable {
    /// Names the plan in cache keys: it must say everything `plan(for:)` depends on besides the header.
    var identifier: String { get }
    /// The decode for an image with header `info` (upright size, format, orientation, pages).
    ///
    /// - Throws: a `VipsError` to refuse the image (the decode fails with it).
    func plan(for info: ImageInfo) throws(VipsError) -> DecodePlan
}
