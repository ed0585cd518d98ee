/// The pixel memory one of the Swift decoders (BMP, ICO, TGA) writes into:
/// 8-bit RGB or RGBA rows, top-down, allocated only after the header was
/// checked against the limits, zeroed (so pixels a lenient decode of a short
/// or damaged file never reaches are black, or transparent with alpha), and
/// with the cancellation checked between rows.
struct RasterCanvas {
    let width: Int
    let height: Int
    /// 3 (RGB) or 4 (RGBA).
    let channels: Int
    private let storage: PixelStorage
    private let cancellation = DecodeCancellation.active

    /// A zeroed canvas (`.tooLarge` when the memory is not there).
    init(width: Int, height: Int, channels: Int, label: String) throws(VipsError) {
        storage = try PixelStorage.allocate(width: width, height: height, channels: channels, label: label)
        storage.pointer.initializeMemory(as: UInt8.self, repeating: 0, count: storage.count)
        (self.width, self.height, self.channels) = (width, height, channels)
    }

    /// Bytes per row.
    var rowBytes: Int { width * channels }

    /// Writes one pixel; coordinates outside the canvas are ignored.
    func set(_ x: Int, _ y: Int, _ red: UInt8, _ green: UInt8, _ blue: UInt8, _ alpha: UInt8 = 255) {
        guard x >= 0, x < width, y >= 0, y < height else { return }
        let pixel = storage.pointer.assumingMemoryBound(to: UInt8.self) + y * rowBytes + x * channels
        pixel[0] = red
        pixel[1] = green
        pixel[2] = blue
        if channels == 4 { pixel[3] = alpha }
    }

    /// The alpha of a pixel (255 without alpha, 0 outside).
    func alpha(_ x: Int, _ y: Int) -> UInt8 {
        guard x >= 0, x < width, y >= 0, y < height else { return 0 }
        guard channels == 4 else { return 255 }
        return storage.pointer.load(fromByteOffset: y * rowBytes + x * 4 + 3, as: UInt8.self)
    }

    /// Sets the alpha of a pixel (ignored without alpha or outside).
    func setAlpha(_ x: Int, _ y: Int, _ alpha: UInt8) {
        guard channels == 4, x >= 0, x < width, y >= 0, y < height else { return }
        storage.pointer.storeBytes(of: alpha, toByteOffset: y * rowBytes + x * 4 + 3, as: UInt8.self)
    }

    /// Throws when the decode must stop (`DecodeCancellation`); call between rows.
    func checkCancellation(row: Int) throws(VipsError) {
        try cancellation?.check(progress: "stopped after \(row) of \(height) rows")
    }

    /// The pixels as a bitmap (scale 1; the decoder sets the caller's scale when it fits the box).
    func bitmap() -> Bitmap {
        Bitmap(width: width, height: height, channels: channels, scale: 1, storage: storage)
    }
}
