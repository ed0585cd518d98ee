/// The five PNG row filters (PNG specification §9), undone in place: each
/// byte of a filtered row is a difference against its left neighbour (`a`,
/// `bytesPerPixel` back), the byte above (`b`) and the byte above-left (`c`);
/// the first row's "above" is zero.
enum PNGRowFilter {
    /// Whether `type` names one of the five filters.
    static func isValid(_ type: UInt8) -> Bool { type <= 4 }

    /// Undoes filter `type` over `count` bytes of `row`, against `previous`
    /// (the row above, already unfiltered; nil for the first row). `type`
    /// must be valid; `bytesPerPixel` is 1 to 4 (the 8-bit layouts) and
    /// `count` a multiple of it, at least one pixel.
    static func unfilter(
        _ type: UInt8, _ row: UnsafeMutablePointer<UInt8>, previous: UnsafePointer<UInt8>?, count: Int,
        bytesPerPixel: Int
    ) {
        // Each width is its own loop, so the compiler sees a constant distance to the left neighbour.
        switch bytesPerPixel {
        case 1: unfilter(type, row, previous, count, 1)
        case 2: unfilter(type, row, previous, count, 2)
        case 3: unfilter(type, row, previous, count, 3)
        default: unfilter(type, row, previous, count, 4)
        }
    }

    @inline(__always)
    private static func unfilter(
        _ type: UInt8, _ row: UnsafeMutablePointer<UInt8>, _ previous: UnsafePointer<UInt8>?, _ count: Int,
        _ bpp: Int
    ) {
        // `count` is a whole number of pixels, at least one: for a row of one pixel the loops from
        // `bpp` are empty and only the byte above counts.
        switch (type, previous) {
        case (1, _), (4, nil):
            // Sub; Paeth against a zero row above is Sub.
            for i in bpp..<count { row[i] &+= row[i - bpp] }
        case (2, let above?):
            for i in 0..<count { row[i] &+= above[i] }
        case (3, let above?):
            for i in 0..<bpp { row[i] &+= above[i] >> 1 }
            for i in bpp..<count {
                row[i] &+= UInt8(truncatingIfNeeded: (UInt16(row[i - bpp]) &+ UInt16(above[i])) >> 1)
            }
        case (3, nil):
            for i in bpp..<count { row[i] &+= row[i - bpp] >> 1 }
        case (4, let above?):
            for i in 0..<bpp { row[i] &+= above[i] }
            for i in bpp..<count { row[i] &+= paeth(row[i - bpp], above[i], above[i - bpp]) }
        default:
            // None, or Up against a zero row above.
            break
        }
    }

    /// The Paeth predictor: whichever of left, above and above-left is
    /// nearest to left + above − above-left, ties in that order.
    @inline(__always)
    static func paeth(_ left: UInt8, _ above: UInt8, _ aboveLeft: UInt8) -> UInt8 {
        let (a, b, c) = (Int16(left), Int16(above), Int16(aboveLeft))
        let pa = abs(b &- c)
        let pb = abs(a &- c)
        let pc = abs(a &+ b &- c &- c)
        if pa <= pb && pa <= pc { return left }
        return pb <= pc ? above : aboveLeft
    }
}
