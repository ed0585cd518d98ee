/// An ICO or CUR file's directory: its entries, each an image of its own
/// (a PNG, or a DIB without a file header whose rows are followed by the
/// AND mask), with the sizes and depths read from the payloads themselves
/// (the directory's own fields are often 0 or wrong).
struct ICODirectory {
    /// One image of the file.
    struct Entry {
        var width: Int
        var height: Int
        /// Bits per pixel, for choosing between entries of one size.
        var bitsPerPixel: Int
        /// Where the payload starts, and its bytes as far as the file holds them.
        var offset: Int
        var length: Int
        /// The DIB's header; nil for a PNG payload.
        var dib: BMPHeader?

        var area: Int { width * height }
    }

    /// The entries that can be decoded, in file order.
    var entries: [Entry]

    /// The most entries read (the count field is 16 bits).
    static let maxEntries = 1024

    /// Whether the first bytes start an ICO (`type` 1) or CUR (`type` 2) directory:
    /// reserved 0, the type, at least one entry, and the first entry's payload after the directory.
    static func isPlausible(_ prefix: [UInt8], type: UInt8) -> Bool {
        guard prefix.count >= 22, prefix[0] == 0, prefix[1] == 0, prefix[2] == type, prefix[3] == 0 else {
            return false
        }
        let count = Int(prefix[4]) | Int(prefix[5]) << 8
        let offset = Int(prefix[18]) | Int(prefix[19]) << 8 | Int(prefix[20]) << 16 | Int(prefix[21]) << 24
        return count > 0 && prefix[9] == 0 && offset >= 6 + 16 * min(count, maxEntries)
    }

    /// Reads the directory and every entry's header; `.corruptData` when no entry can be read.
    init(_ bytes: ByteView, format: ImageFormat, label: String) throws(VipsError) {
        guard let count = bytes.u16(4), count > 0 else {
            throw VipsError(.truncatedData, "\(label): the \(format) directory is cut short")
        }
        var entries: [Entry] = []
        var firstError: VipsError?
        for index in 0..<min(count, Self.maxEntries) {
            let at = 6 + index * 16
            guard let size = bytes.u32(at + 8), let offset = bytes.u32(at + 12) else {
                firstError = firstError ?? VipsError(.truncatedData, "\(label): the \(format) directory is cut short")
                break
            }
            let start = Int(offset)
            guard start >= 6, start < bytes.count else { continue }
            let length = min(Int(size), bytes.count - start)
            let payload = bytes.tail(from: start)
            if payload.bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) {
                // IHDR: width, height, bit depth and colour type.
                guard let width = payload.u32BigEndian(16), let height = payload.u32BigEndian(20),
                    let depth = payload.u8(24),
                    let colourType = payload.u8(25), width > 0, height > 0, width <= Int32.max, height <= Int32.max
                else { continue }
                let channels = [0: 1, 2: 3, 3: 1, 4: 2, 6: 4][Int(colourType)] ?? 1
                entries.append(
                    Entry(
                        width: Int(width), height: Int(height), bitsPerPixel: Int(depth) * channels, offset: start,
                        length: length, dib: nil))
            } else {
                do throws(VipsError) {
                    let dib = try BMPHeader(dib: payload, at: 0, pixelOffset: nil, icon: true, label: label)
                    entries.append(
                        Entry(
                            width: dib.width, height: dib.height, bitsPerPixel: dib.bitsPerPixel, offset: start,
                            length: length, dib: dib))
                } catch {
                    firstError = firstError ?? error
                }
            }
        }
        guard !entries.isEmpty else {
            throw firstError ?? VipsError(.corruptData, "\(label): the \(format) file has no image that can be read")
        }
        // An icon's entries are one picture at several sizes. One of another shape than the largest
        // (a 13×7 beside a 16×16, a 16×16 beside a 3328×7: a broken or hostile file) is another
        // picture and is left out, so every entry decoded has the shape `info` reports and fits
        // within the size the limits are checked against (one of the same shape and larger would
        // be the largest).
        let largest = Self.largest(of: entries)
        self.entries = entries.filter { $0.width * largest.height == $0.height * largest.width }
    }

    /// The largest of `entries` by area, ties to the deeper one.
    private static func largest(of entries: [Entry]) -> Entry {
        entries.max { ($0.area, $0.bitsPerPixel) < ($1.area, $1.bitsPerPixel) } ?? entries[0]
    }

    /// The largest entry (ties to the deeper one): what the original size shows.
    var largest: Entry { Self.largest(of: entries) }

    /// The entry that fits `box` best: the smallest that is at least as large
    /// as the box (one that needs no upscaling to fit it), else the largest;
    /// ties to the deeper one. The original size (no box) is the largest.
    func entry(fitting box: (width: Int, height: Int)?) -> Entry {
        guard let box else { return largest }
        let covering = entries.filter { $0.width >= box.width || $0.height >= box.height }
        return covering.min { ($0.area, -$0.bitsPerPixel) < ($1.area, -$1.bitsPerPixel) } ?? largest
    }
}
