import CSPNG
import Foundation

/// What the direct path needs from a PNG's chunks before the image data.
struct PNGHeader {
    var width: Int, height: Int
    var bitDepth: Int, colourType: Int
    var interlaced: Bool
    var hasTRNS: Bool
    /// An acTL chunk: an APNG.
    var animated: Bool
    var iccProfile: Data?
    /// From an eXIf chunk before IDAT (1 without one), as libvips reads it.
    var orientation: Int

    var sixteenBit: Bool { bitDepth == 16 }
    var grey: Bool { colourType == 0 || colourType == 4 }
    /// Alpha as libvips' loader gives it: an alpha channel, or tRNS expanded to one.
    var hasAlpha: Bool { colourType == 4 || colourType == 6 || hasTRNS }
    /// Bands of the image libvips would load (palette expanded).
    var channels: Int { (grey ? 1 : 3) + (hasAlpha ? 1 : 0) }

    /// The libspng output format and its channels per pixel (16-bit formats always carry alpha).
    var spngFormat: (Int32, Int) {
        // libspng 0.7's GA formats do not take grey + alpha files; their own layout is GA already
        // (host-endian at 16 bits).
        if colourType == 4 { return (Int32(SPNG_FMT_PNG.rawValue), 2) }
        if sixteenBit { return grey ? (Int32(SPNG_FMT_GA16.rawValue), 2) : (Int32(SPNG_FMT_RGBA16.rawValue), 4) }
        if grey { return hasAlpha ? (Int32(SPNG_FMT_GA8.rawValue), 2) : (Int32(SPNG_FMT_G8.rawValue), 1) }
        return hasAlpha ? (Int32(SPNG_FMT_RGBA8.rawValue), 4) : (Int32(SPNG_FMT_RGB8.rawValue), 3)
    }
}
