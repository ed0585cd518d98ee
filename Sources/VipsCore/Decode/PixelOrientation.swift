/// Turns decoded pixels upright by their EXIF orientation, for the direct
/// decode paths (libvips' `vips_autorot` does it on the libvips path): one
/// copy, as a mirror and rotation table, of a bitmap already at its final size.
enum PixelOrientation {
    /// Copies `width`×`height` pixels of `channels` bytes turned upright by
    /// EXIF `orientation` (2–8; anything else copies them as they are) into
    /// `output`, which holds as many pixels with the sides swapped for 5–8.
    static func orient(
        _ input: UnsafePointer<UInt8>, width: Int, height: Int, channels: Int, orientation: Int,
        into output: UnsafeMutablePointer<UInt8>
    ) {
        let swap = orientation >= 5 && orientation <= 8
        let (outWidth, outHeight) = swap ? (height, width) : (width, height)
        for y in 0..<outHeight {
            let target = output + y * outWidth * channels
            for x in 0..<outWidth {
                let (sx, sy): (Int, Int)
                switch orientation {
                case 2: (sx, sy) = (width - 1 - x, y)
                case 3: (sx, sy) = (width - 1 - x, height - 1 - y)
                case 4: (sx, sy) = (x, height - 1 - y)
                case 5: (sx, sy) = (y, x)
                case 6: (sx, sy) = (y, height - 1 - x)
                case 7: (sx, sy) = (width - 1 - y, height - 1 - x)
                case 8: (sx, sy) = (width - 1 - y, x)
                default: (sx, sy) = (x, y)
                }
                (target + x * channels).update(from: input + (sy * width + sx) * channels, count: channels)
            }
        }
    }

    /// `bitmap` turned upright by EXIF `orientation` into new pixel memory
    /// (sides swapped for 5–8); the bitmap itself for orientation 1.
    static func upright(_ bitmap: Bitmap, orientation: Int, label: String) throws(VipsError) -> Bitmap {
        guard orientation != 1 else { return bitmap }
        let upright = try PixelStorage.allocate(
            width: bitmap.width, height: bitmap.height, channels: bitmap.channels, label: label)
        withExtendedLifetime(bitmap) {
            orient(
                bitmap.storage.pointer.assumingMemoryBound(to: UInt8.self), width: bitmap.width, height: bitmap.height,
                channels: bitmap.channels, orientation: orientation,
                into: upright.pointer.assumingMemoryBound(to: UInt8.self))
        }
        let swap = orientation >= 5 && orientation <= 8
        return Bitmap(
            width: swap ? bitmap.height : bitmap.width, height: swap ? bitmap.width : bitmap.height,
            channels: bitmap.channels, scale: bitmap.scale, storage: upright)
    }
}
