import CSPNG
import Foundation

/// A libspng decoder context over one input, freed (with its file) when the reader goes.
final class PNGReader {
    let context: OpaquePointer
    private let file: UnsafeMutablePointer<FILE>?
    /// The header, or nil when libspng could not read it.
    private(set) var header: PNGHeader?

    /// A reader of `file`, which it owns from here (closed even when this fails).
    convenience init?(file: UnsafeMutablePointer<FILE>) {
        guard let context = spng_ctx_new(Int32(SPNG_CTX_IGNORE_ADLER32.rawValue)) else { fclose(file); return nil }
        self.init(context: context, file: file)
        guard spng_set_png_file(context, file) == 0 else { return nil }
        header = readHeader()
    }

    /// A reader of `count` bytes at `buffer`, which must outlive it.
    convenience init?(buffer: UnsafeRawPointer, count: Int) {
        guard let context = spng_ctx_new(Int32(SPNG_CTX_IGNORE_ADLER32.rawValue)) else { return nil }
        self.init(context: context, file: nil)
        guard spng_set_png_buffer(context, buffer, count) == 0 else { return nil }
        header = readHeader()
    }

    private init(context: OpaquePointer, file: UnsafeMutablePointer<FILE>?) {
        self.context = context
        self.file = file
        // Ancillary chunks as libvips allows them (50 MB each), a bounded total; acTL is an
        // unknown chunk to libspng, kept so an APNG can be told.
        spng_set_chunk_limits(context, 50 << 20, 64 << 20)
        spng_set_option(context, SPNG_KEEP_UNKNOWN_CHUNKS, 1)
    }

    deinit {
        spng_ctx_free(context)
        if let file { fclose(file) }
    }

    /// IHDR and the chunks before IDAT; nil when libspng refuses them or
    /// cannot read them all (a file cut short before its image data, a chunk
    /// libspng finds damaged): libvips then reads the header, and says what it is.
    private func readHeader() -> PNGHeader? {
        var ihdr = spng_ihdr()
        guard spng_get_ihdr(context, &ihdr) == 0, ihdr.width > 0, ihdr.height > 0 else { return nil }
        // Each getter reads the chunks before IDAT (once) and returns 0 for a chunk that is
        // there, SPNG_ECHUNKAVAIL for one that is not, and anything else when reading failed.
        func present(_ status: Int32) -> Bool? {
            status == 0 ? true : status == Int32(SPNG_ECHUNKAVAIL.rawValue) ? false : nil
        }
        var trns = spng_trns()
        guard let hasTRNS = present(spng_get_trns(context, &trns)) else { return nil }
        var iccp = spng_iccp()
        var profile: Data?
        guard let hasICCP = present(spng_get_iccp(context, &iccp)) else { return nil }
        if hasICCP, let bytes = iccp.profile, iccp.profile_len > 0 {
            profile = Data(bytes: bytes, count: iccp.profile_len)
        }
        var orientation = 1
        var exif = spng_exif()
        guard let hasEXIF = present(spng_get_exif(context, &exif)) else { return nil }
        if hasEXIF, let bytes = exif.data, exif.length > 0 {
            orientation = EXIFOrientation.read(UnsafeRawBufferPointer(start: bytes, count: exif.length)) ?? 1
        }
        var animated = false
        var count: UInt32 = 0
        guard let hasUnknown = present(spng_get_unknown_chunks(context, nil, &count)) else { return nil }
        if hasUnknown, count > 0, count < 10_000 {
            var chunks = [spng_unknown_chunk](repeating: spng_unknown_chunk(), count: Int(count))
            if spng_get_unknown_chunks(context, &chunks, &count) == 0 {
                animated = chunks.prefix(Int(count)).contains { $0.type == (0x61, 0x63, 0x54, 0x4C) } // "acTL"
            }
        }
        return PNGHeader(
            width: Int(ihdr.width), height: Int(ihdr.height), bitDepth: Int(ihdr.bit_depth),
            colourType: Int(ihdr.color_type), interlaced: ihdr.interlace_method != 0, hasTRNS: hasTRNS,
            animated: animated, iccProfile: profile, orientation: orientation)
    }
}
