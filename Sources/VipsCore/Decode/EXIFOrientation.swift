import CEXIF
import Foundation

/// The EXIF orientation of an image, read from its EXIF block exactly as
/// libvips 8.14 reads it (`vips__exif_parse`), with the same library
/// (libexif) and the same options, so a direct codec and the libvips path
/// give every file the same orientation, however odd its EXIF: an entry
/// stored as LONG or as text, a value out of range, a block without JPEG's
/// "Exif\0\0" prefix.
///
/// libexif is a C parser of untrusted bytes with a CVE history; libvips
/// already runs it on every image it loads, so using it here adds no new
/// parser to the process, and the fuzz harness (Fuzz/) runs it on every input.
enum EXIFOrientation {
    /// The orientation libvips gives an image with this EXIF block (its TIFF
    /// structure, with or without "Exif\0\0" in front): 1–8, 1 for a value
    /// out of range, nil when IFD0 has no orientation entry (or libexif
    /// reads no IFD0 at all).
    static func read(_ block: UnsafeRawBufferPointer) -> Int? {
        // vips_exif_load_data_without_fix: 4 bytes to 1 MiB, "Exif\0\0" put in front unless it starts "Exif".
        guard block.count >= 4, block.count <= 1 << 20, let base = block.baseAddress, let exif = exif_data_new() else {
            return nil
        }
        defer { exif_data_unref(exif) }
        exif_data_unset_option(exif, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION)
        if block.starts(with: "Exif".utf8) {
            exif_data_load_data(exif, base.assumingMemoryBound(to: UInt8.self), UInt32(block.count))
        } else {
            let prefixed = Array("Exif".utf8) + [0, 0] + Array(block)
            prefixed.withUnsafeBufferPointer { exif_data_load_data(exif, $0.baseAddress, UInt32($0.count)) }
        }
        guard let ifd0 = exif.pointee.ifd.0, let entry = exif_content_get_entry(ifd0, EXIF_TAG_ORIENTATION) else {
            return nil
        }
        // libvips runs exif_data_fix before it reads a tag. Of what that does, only the fix of this
        // entry itself (an entry of the wrong format becomes SHORT) reaches the orientation: adding
        // missing mandatory entries and dropping ones an IFD may not hold leaves an IFD0
        // orientation entry as it is (it is optional there for every data type). So only this
        // entry is fixed: the whole-block fix was four fifths of the cost of this read.
        exif_entry_fix(entry)
        let value = leadingInteger(of: entry.pointee, order: exif_data_get_byte_order(exif))
        return (1...8).contains(value) ? value : 1
    }

    /// What `atoi` reads from the text libvips makes of an entry (`vips_exif_to_s`): an ASCII
    /// value as it is; the first of fewer than 10 integers, or the numerator of the first
    /// (signed) rational; else libexif's description, which starts with no digit.
    private static func leadingInteger(of entry: ExifEntry, order: ExifByteOrder) -> Int {
        guard let data = entry.data, entry.size > 0 else { return 0 }
        if entry.format == EXIF_FORMAT_ASCII {
            // libvips copies at most 254 bytes and ends them with a NUL.
            let text = UnsafeBufferPointer(start: data, count: min(254, Int(entry.size)))
            return atoi(text.prefix { $0 != 0 })
        }
        guard entry.components > 0, entry.components < 10 else { return 0 }
        switch entry.format {
        case EXIF_FORMAT_SHORT: return Int(exif_get_short(data, order))
        case EXIF_FORMAT_SSHORT: return Int(exif_get_sshort(data, order))
        // libvips casts the unsigned value to int.
        case EXIF_FORMAT_LONG: return Int(Int32(truncatingIfNeeded: exif_get_long(data, order)))
        case EXIF_FORMAT_SLONG: return Int(exif_get_slong(data, order))
        case EXIF_FORMAT_RATIONAL: return Int(Int32(truncatingIfNeeded: exif_get_rational(data, order).numerator))
        case EXIF_FORMAT_SRATIONAL: return Int(exif_get_srational(data, order).numerator)
        default: return 0
        }
    }

    /// glibc's `atoi` on bytes, `(int) strtol(…)`: white space, an optional sign, then digits
    /// (0 when there are none), saturated to a 64-bit long, then truncated to 32 bits.
    private static func atoi<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Int {
        var rest = bytes.drop { [0x20, 0x09, 0x0A, 0x0B, 0x0C, 0x0D].contains($0) }
        var negative = false
        if let first = rest.first, first == UInt8(ascii: "-") || first == UInt8(ascii: "+") {
            negative = first == UInt8(ascii: "-")
            rest = rest.dropFirst()
        }
        var magnitude = 0
        var overflow = false
        for byte in rest {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { break }
            let (shifted, over) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, carry) = shifted.addingReportingOverflow(Int(byte - UInt8(ascii: "0")))
            if over || carry { overflow = true } else if !overflow { magnitude = sum }
        }
        let long = overflow ? (negative ? Int.min : Int.max) : (negative ? -magnitude : magnitude)
        return Int(Int32(truncatingIfNeeded: long))
    }
}
