import CVipsShim

extension ImageProcessors {
    /// A gaussian blur of standard deviation `sigma` pixels (0 < sigma ≤ 500).
    public struct GaussianBlur: ImageProcessing {
        /// The blur's standard deviation in pixels (above 0, at most 1000).
        public let sigma: Double

        /// A blur of `sigma` pixels.
        public init(sigma: Double) { self.sigma = sigma }

        public var identifier: String { "vipsload.blur(\(sigma))" }

        public func validate() throws(VipsError) {
            guard sigma.isFinite, sigma > 0, sigma <= 500 else {
                throw .badParameter("blur", "sigma \(sigma) is outside 0 < sigma ≤ 500")
            }
        }

        public func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            try validate()
            return try BitmapOperation.run(bitmap, "blur") { image throws(VipsError) in
                try image.apply(.internal, "blur") { vl_gaussblur(LibVips.table, $0, $1, sigma) }
            }
        }
    }

    /// Sharpens (libvips' unsharp mask on lightness) with a gaussian of
    /// `sigma` pixels (0 < sigma ≤ 10).
    public struct Sharpen: ImageProcessing {
        /// The size of the sharpening mask in pixels (above 0, at most 1000).
        public let sigma: Double

        /// Sharpening with a mask of `sigma` pixels.
        public init(sigma: Double = 1) { self.sigma = sigma }

        public var identifier: String { "vipsload.sharpen(\(sigma))" }

        public func validate() throws(VipsError) {
            guard sigma.isFinite, sigma > 0, sigma <= 10 else {
                throw .badParameter("sharpen", "sigma \(sigma) is outside 0 < sigma ≤ 10")
            }
        }

        public func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            try validate()
            return try BitmapOperation.run(bitmap, "sharpen") { image throws(VipsError) in
                try image.apply(.internal, "sharpen") { vl_sharpen(LibVips.table, $0, $1, sigma) }
            }
        }
    }

    /// Greyscale (libvips' B_W), still as sRGB bands; alpha is kept.
    public struct Greyscale: ImageProcessing {
        /// Converts to grey (alpha kept).
        public init() {}

        public var identifier: String { "vipsload.greyscale" }

        public func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            try BitmapOperation.run(bitmap, "greyscale") { image throws(VipsError) in
                let grey = try image.apply(.internal, "greyscale") {
                    vl_colourspace(LibVips.table, $0, $1, VIPS_INTERPRETATION_B_W)
                }
                return try grey.apply(.internal, "greyscale") {
                    vl_colourspace(LibVips.table, $0, $1, VIPS_INTERPRETATION_sRGB)
                }
            }
        }
    }
}
