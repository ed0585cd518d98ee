/// `vips_thumbnail`'s output size, written once: the libvips fast path
/// (`ImageDecoder.fastResidualResize`) and every direct codec size their
/// output with it, so a direct decode is exactly as large as libvips' would be.
enum ThumbnailSize {
    /// The size `vips_thumbnail` gives an image stored `width`×`height` brought
    /// into `box` (upright, already clamped to the source's upright size;
    /// `swapped` when the orientation, 5–8, turns the stored sides), or nil when
    /// the box needs no shrink. The result may still equal the stored size.
    ///
    /// The arithmetic is libvips': the side needing the larger shrink decides,
    /// and each side is `VIPS_ROUND_UINT(side × (1 / shrink))`, at least 1.
    static func fitting(
        width: Int, height: Int, into box: (width: Int, height: Int), swapped: Bool
    ) -> (width: Int, height: Int)? {
        let (boxWidth, boxHeight) = swapped ? (box.height, box.width) : (box.width, box.height)
        let shrink = max(Double(width) / Double(boxWidth), Double(height) / Double(boxHeight))
        guard shrink > 1 else { return nil }
        return (max(1, Int(Double(width) * (1 / shrink) + 0.5)), max(1, Int(Double(height) * (1 / shrink) + 0.5)))
    }
}
