/// What the direct JPEG codec needs from a JPEG's markers, read up to the
/// first scan: the frame (size, precision, components, coding), the EXIF
/// orientation (APP1, through `EXIFOrientation`), the ICC profile (APP2
/// chunks), Adobe's colour transform (APP14).
///
/// Why a reader of its own: TurboJPEG 2.1 (Debian 12's libjpeg-turbo) reads
/// only the frame (`tjDecompressHeader3`: size, subsampling, colour space);
/// it has no getter for the ICC profile or the EXIF block (TurboJPEG 3.0
/// adds one for the profile, none for EXIF), and libjpeg's own marker API reports errors by
/// longjmp, which Swift cannot take. The markers are a length-prefixed list,
/// so this walk is short, and the fuzz harness runs it on every input.
///
/// A hardened reader of untrusted bytes: every length is checked against the
/// buffer before it is used, declared sizes never drive an allocation (the
/// ICC chunks are bounded by the bytes present), and anything it does not
/// understand makes it return nil, which sends the file to libvips.
struct JPEGHeader {
    /// Width and height as stored (before orientation).
    var width = 0
    var height = 0
    /// Bits per sample (8 or 12).
    var precision = 0
    var components = 0
    /// The start-of-frame marker (0xC0 baseline, 0xC1 extended, 0xC2 progressive, ...).
    var frameMarker: UInt8 = 0
    /// EXIF orientation 1–8 (1 when there is no EXIF or no valid orientation tag).
    var orientation = 1
    /// The Adobe APP14 transform flag (0 none/RGB/CMYK, 1 YCbCr, 2 YCCK), when there is one.
    var adobeTransform: Int?
    /// The reassembled ICC profile, when the APP2 chunks are complete and consistent.
    var iccProfile: [UInt8]?
    /// True when APP2 ICC chunks were present but could not be reassembled.
    var iccMalformed = false

    /// Huffman-coded, sequential or progressive (SOF0/1/2): what libjpeg-turbo decodes exactly here.
    var isHuffman: Bool { frameMarker == 0xC0 || frameMarker == 0xC1 || frameMarker == 0xC2 }
    var isProgressive: Bool { frameMarker == 0xC2 }

    /// Parses the markers before the first scan; nil when the bytes are not such a JPEG.
    init?(_ bytes: UnsafeRawBufferPointer) {
        let count = bytes.count
        guard count >= 4, bytes[0] == 0xFF, bytes[1] == 0xD8 else { return nil }
        var index = 2
        var sawFrame = false
        var sawEXIF = false
        var iccChunks: [Int: Range<Int>] = [:]
        var iccTotal: Int?
        while index < count {
            guard bytes[index] == 0xFF else { return nil }
            while index < count && bytes[index] == 0xFF { index += 1 }
            guard index < count else { return nil }
            let marker = bytes[index]
            index += 1
            if (0xD0...0xD7).contains(marker) || marker == 0x01 { continue }
            if marker == 0xD8 || marker == 0xD9 { return nil } // a second SOI, or EOI before any scan
            guard index + 2 <= count else { return nil }
            let length = Int(bytes[index]) << 8 | Int(bytes[index + 1])
            guard length >= 2, index + length <= count else { return nil }
            let body = (index + 2)..<(index + length)
            switch marker {
            case 0xC0...0xC3, 0xC5...0xC7, 0xC9...0xCB, 0xCD...0xCF:
                guard !sawFrame, body.count >= 6 else { return nil }
                sawFrame = true
                frameMarker = marker
                precision = Int(bytes[body.lowerBound])
                height = Int(bytes[body.lowerBound + 1]) << 8 | Int(bytes[body.lowerBound + 2])
                width = Int(bytes[body.lowerBound + 3]) << 8 | Int(bytes[body.lowerBound + 4])
                components = Int(bytes[body.lowerBound + 5])
                guard body.count >= 6 + 3 * components else { return nil }
            case 0xE1 where !sawEXIF:
                // libvips keeps the first APP1 longer than 4 bytes that starts "Exif" (later ones are
                // ignored) and reads it with libexif.
                let block = UnsafeRawBufferPointer(rebasing: bytes[body])
                if block.count > 4, block.starts(with: "Exif".utf8) {
                    sawEXIF = true
                    orientation = EXIFOrientation.read(block) ?? 1
                }
            case 0xE2:
                // "ICC_PROFILE\0", sequence number (1-based), chunk count.
                let tag: [UInt8] = Array("ICC_PROFILE".utf8) + [0]
                if body.count >= 14, (0..<12).allSatisfy({ bytes[body.lowerBound + $0] == tag[$0] }) {
                    let sequence = Int(bytes[body.lowerBound + 12]), total = Int(bytes[body.lowerBound + 13])
                    if sequence < 1 || sequence > total || (iccTotal ?? total) != total || iccChunks[sequence] != nil {
                        iccMalformed = true
                    } else {
                        iccTotal = total
                        iccChunks[sequence] = (body.lowerBound + 14)..<body.upperBound
                    }
                }
            case 0xEE:
                let adobe = Array("Adobe".utf8)
                if body.count >= 12, (0..<5).allSatisfy({ bytes[body.lowerBound + $0] == adobe[$0] }) {
                    adobeTransform = Int(bytes[body.lowerBound + 11])
                }
            case 0xDA:
                guard sawFrame else { return nil }
                if let total = iccTotal {
                    if iccChunks.count == total {
                        iccProfile = (1...total).flatMap { iccChunks[$0].map { Array(bytes[$0]) } ?? [] }
                    } else {
                        iccMalformed = true
                    }
                }
                return
            default:
                break
            }
            index += length
        }
        return nil
    }
}
