import CVipsShim

extension ImageProcessors {
    /// A gaussian blur of standard deviation `sigma` pixels (0 < sigma ≤ 500).
    public struct GaussianBlur: ImageProcessing {
        public let sigma: Double

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
                try image.apply(.internal, "blur") { vl_gaussblur($0, $1, sigma) }
            }
        }
    }

    /// Sharpens (libvips' unsharp mask on lightness) with a gaussian of
    /// `sigma` pixels (0 < sigma ≤ 10).
    public struct Sharpen: ImageProcessing {
        public let sigma: Double

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
                try image.apply(.internal, "sharpen") { vl_sharpen($0, $1, sigma) }
            }
        }
    }

    /// Greyscale (libvips' B_W), still as sRGB bands; alpha is kept.
    public struct Greyscale: ImageProcessing {
        public init() {}

        public var identifier: String { "vipsload.greyscale" }

        public func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            try BitmapOperation.run(bitmap, "greyscale") { image throws(VipsError) in
                let grey = try image.apply(.internal, "greyscale") { vl_colourspace($0, $1, VIPS_INTERPRETATION_B_W) }
                return try grey.apply(.internal, "greyscale") { vl_colourspace($0, $1, VIPS_INTERPRETATION_sRGB) }
            }
        }
    }
}
