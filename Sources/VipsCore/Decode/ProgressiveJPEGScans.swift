import Foundation

/// The complete scans of a progressive JPEG that is still arriving: what a
/// preview while downloading decodes.
///
/// A progressive JPEG (SOF2) sends the whole image several times over, each
/// scan refining the last; a scan is complete once the next marker after its
/// entropy-coded data has arrived (the next scan's SOS, a table, or EOI). The
/// bytes up to there, closed with an EOI, are a well-formed progressive JPEG
/// that libjpeg decodes like any other (the coefficients of the scans still
/// missing are zero), so a preview is a normal decode of a shorter, valid
/// stream, never of a truncated one.
///
/// Baseline JPEGs have one scan: nothing here (their rows arrive top to
/// bottom, a preview would be a partly grey image). Every length and marker
/// is bounds-checked; anything not understood is "no complete scan".
package enum ProgressiveJPEGScans {
    /// The bytes of `received` up to the end of its last complete scan and the
    /// number of complete scans, or nil when `received` is not a progressive
    /// JPEG, has no complete scan yet, or is already whole (its EOI arrived:
    /// the final image is on its way).
    package static func completeScans(in received: UnsafeRawBufferPointer) -> (length: Int, scans: Int)? {
        let bytes = received.bindMemory(to: UInt8.self)
        let count = bytes.count
        guard count > 4, bytes[0] == 0xFF, bytes[1] == 0xD8, bytes.baseAddress != nil else { return nil }
        var index = 2
        var progressive = false
        var scans = 0
        var completeEnd = 0

        while index < count - 1 {
            guard bytes[index] == 0xFF else { return nil }
            while index < count && bytes[index] == 0xFF { index += 1 }
            guard index < count else { break }
            let marker = bytes[index]
            index += 1
            if marker == 0xD9 { return nil }
            if (0xD0...0xD7).contains(marker) || marker == 0x01 { continue }
            guard index + 2 <= count else { break }
            let length = Int(bytes[index]) << 8 | Int(bytes[index + 1])
            guard length >= 2 else { return nil }
            guard index + length <= count else { break }
            switch marker {
            case 0xC2:
                progressive = true
            case let other where JPEGMarkers.isOtherFrame(other):
                return nil // not a progressive Huffman frame: nothing to gain, or nothing handled here
            default:
                break
            }
            if marker == 0xDA {
                guard progressive else { return nil }
                guard let end = JPEGMarkers.endOfEntropyData(bytes, from: index + length) else { break }
                scans += 1
                completeEnd = end
                index = end
            } else {
                index += length
            }
        }
        guard progressive, scans > 0 else { return nil }
        return (completeEnd, scans)
    }

    /// The complete scans of `received` as a JPEG of their own (closed with
    /// an EOI), and how many there are; nil as for `completeScans(in:)`.
    package static func preview(of received: Data) -> (data: Data, scans: Int)? {
        guard let found = received.withUnsafeBytes({ completeScans(in: $0) }) else { return nil }
        var data = Data(capacity: found.length + 2)
        data.append(received.prefix(found.length))
        data.append(contentsOf: [0xFF, 0xD9])
        return (data, found.scans)
    }
}
