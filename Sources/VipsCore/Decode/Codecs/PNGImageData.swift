import CDeflate
import Foundation

/// A PNG's image data inflated whole by libdeflate, then unfiltered row by
/// row in place, for the direct path's plain 8-bit layouts (grey, grey with
/// alpha, RGB, RGBA; not interlaced, no tRNS): the rows libspng would give,
/// without zlib's streaming inflate, which was about 300 M of a 2000×1500
/// PNG's 415 M instructions.
///
/// libdeflate needs the whole stream and its whole output in memory, so this
/// is taken only when the inflated data fits `budget`; larger images stream
/// through libspng and zlib, never held whole. Both blocks are the thread's
/// scratch memory (`ScratchMemory`), kept for its next image.
///
/// Anything unexpected (a chunk cut short, a bad zlib header, a stream that
/// does not inflate to exactly the image's size, a filter type that does not
/// exist, in strict mode a chunk CRC or Adler-32 that does not match) makes
/// `inflate` return nil, and the codec decodes the file through libspng as
/// before, whose errors and partial-image handling are the codec's own. So
/// this path never decides what a damaged file becomes.
struct PNGImageData {
    /// The most inflated bytes (filter bytes included) held at once per
    /// decode: a 2000×2000 RGBA or 2300×2300 RGB image. Larger images stream.
    static let budget = 16 << 20

    private let inflated: ScratchMemory.Lease
    /// Bytes of one row's pixels, without its filter byte.
    private let rowBytes: Int
    private let bytesPerPixel: Int
    private let height: Int
    private var next = 0

    private init(inflated: ScratchMemory.Lease, rowBytes: Int, bytesPerPixel: Int, height: Int) {
        self.inflated = inflated
        self.rowBytes = rowBytes
        self.bytesPerPixel = bytesPerPixel
        self.height = height
    }

    /// The layout of `header`'s image data when this path takes it, nil when
    /// it is not one of its own or its inflated size is over `budget`.
    static func layout(of header: PNGHeader) -> (bytesPerPixel: Int, rowBytes: Int, inflatedSize: Int)? {
        guard !header.interlaced, header.bitDepth == 8, !header.hasTRNS else { return nil }
        let bytesPerPixel: Int
        switch header.colourType {
        case 0: bytesPerPixel = 1
        case 4: bytesPerPixel = 2
        case 2: bytesPerPixel = 3
        case 6: bytesPerPixel = 4
        default: return nil
        }
        let (rowBytes, overflow) = header.width.multipliedReportingOverflow(by: bytesPerPixel)
        guard !overflow, rowBytes < budget else { return nil }
        let (size, overflow2) = (rowBytes + 1).multipliedReportingOverflow(by: header.height)
        guard !overflow2, size <= budget else { return nil }
        return (bytesPerPixel, rowBytes, size)
    }

    /// The image data of the PNG `input` inflated, or nil when this path
    /// does not take it (see the type's notes). Strict checks every IDAT
    /// chunk's CRC and the stream's Adler-32; lenient checks neither, as the
    /// libspng path does.
    static func inflate(_ input: ImageInput, header: PNGHeader, strict: Bool) -> PNGImageData? {
        guard let layout = layout(of: header) else { return nil }
        switch input {
        case .file(let path):
            // Read, not mapped: a mapped file is faulted in page by page, and the thread's
            // scratch block is already there. The IDAT data is then gathered in place.
            guard let file = readWhole(path) else { return nil }
            return withExtendedLifetime(file.lease) { () -> PNGImageData? in
                let bytes = UnsafeRawBufferPointer(start: file.lease.pointer, count: file.count)
                guard let chunks = imageDataChunks(in: bytes, checkingCRCs: strict) else { return nil }
                let size = gather(chunks, of: bytes, into: file.lease.pointer)
                return inflate(UnsafeRawBufferPointer(start: file.lease.pointer, count: size), layout, header, strict)
            }
        case .data(let data):
            return data.withUnsafeBytes { bytes -> PNGImageData? in
                guard let chunks = imageDataChunks(in: bytes, checkingCRCs: strict) else { return nil }
                if chunks.count == 1, let only = chunks.first {
                    return inflate(UnsafeRawBufferPointer(rebasing: bytes[only]), layout, header, strict)
                }
                let size = chunks.reduce(0) { $0 + $1.count }
                guard size <= budget, let gathered = ScratchMemory.lease(size, for: .compressedPNG) else { return nil }
                return withExtendedLifetime(gathered) {
                    _ = gather(chunks, of: bytes, into: gathered.pointer)
                    return inflate(UnsafeRawBufferPointer(start: gathered.pointer, count: size), layout, header, strict)
                }
            }
        }
    }

    /// Copies the data of `chunks` (ranges of `file`) to `target`, in order, and returns its size.
    /// `target` may be `file`'s own start: each chunk's data lies after where it goes, and
    /// `memmove` copies overlapping bytes safely.
    private static func gather(
        _ chunks: [Range<Int>], of file: UnsafeRawBufferPointer, into target: UnsafeMutableRawPointer
    ) -> Int {
        guard let base = file.baseAddress else { return 0 }
        var offset = 0
        for chunk in chunks {
            memmove(target + offset, base + chunk.lowerBound, chunk.count)
            offset += chunk.count
        }
        return offset
    }

    /// Inflates `stream` and checks the filter types.
    private static func inflate(
        _ stream: UnsafeRawBufferPointer, _ layout: (bytesPerPixel: Int, rowBytes: Int, inflatedSize: Int),
        _ header: PNGHeader, _ strict: Bool
    ) -> PNGImageData? {
        guard let inflated = ScratchMemory.lease(layout.inflatedSize, for: .inflatedPNG),
            inflate(stream, into: inflated.pointer, layout.inflatedSize, strict)
        else { return nil }
        // Every row's filter type is checked before the first row is handed on.
        let bytes = inflated.pointer.assumingMemoryBound(to: UInt8.self)
        for y in 0..<header.height where !PNGRowFilter.isValid(bytes[y * (layout.rowBytes + 1)]) { return nil }
        return PNGImageData(
            inflated: inflated, rowBytes: layout.rowBytes, bytesPerPixel: layout.bytesPerPixel, height: header.height)
    }

    /// The whole file at `path` in the thread's scratch block, when it is no larger than `budget`.
    private static func readWhole(_ path: String) -> (lease: ScratchMemory.Lease, count: Int)? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_size > 8, status.st_size <= budget else { return nil }
        let count = Int(status.st_size)
        guard let lease = ScratchMemory.lease(count, for: .compressedPNG) else { return nil }
        var done = 0
        while done < count {
            let n = read(fd, lease.pointer + done, count - done)
            if n < 0 && errno == EINTR { continue }
            // A file that shrank meanwhile, or cannot be read: libspng's path reads it and says so.
            guard n > 0 else { return nil }
            done += n
        }
        return (lease, count)
    }

    /// The next row, unfiltered (in place, in the inflated data); rows come in order.
    /// Nil after the last.
    mutating func nextRow() -> UnsafeMutableRawPointer? {
        guard next < height else { return nil }
        let bytes = inflated.pointer.assumingMemoryBound(to: UInt8.self)
        let start = bytes + next * (rowBytes + 1)
        let row = start + 1
        let previous = next == 0 ? nil : UnsafePointer(row - (rowBytes + 1))
        PNGRowFilter.unfilter(start[0], row, previous: previous, count: rowBytes, bytesPerPixel: bytesPerPixel)
        next += 1
        return UnsafeMutableRawPointer(row)
    }

    // MARK: - The stream

    /// The byte ranges of the IDAT chunks' data, in order; nil when the
    /// chunks after the signature cannot be walked to the end of the image
    /// data and the chunk after it, or (when checking) a CRC does not match.
    private static func imageDataChunks(in file: UnsafeRawBufferPointer, checkingCRCs: Bool) -> [Range<Int>]? {
        guard let base = file.baseAddress, file.count >= 8 else { return nil }
        func bigEndian(at offset: Int) -> UInt32 {
            UInt32(bigEndian: (base + offset).loadUnaligned(as: UInt32.self))
        }
        let idat: UInt32 = 0x4944_4154
        var chunks: [Range<Int>] = []
        var offset = 8
        // Length, type, data, CRC: 12 bytes around the data.
        while file.count - offset >= 12 {
            let length = Int(bigEndian(at: offset))
            let dataStart = offset + 8
            guard length <= Int(Int32.max), length <= file.count - dataStart - 4 else { return nil }
            let type = bigEndian(at: offset + 4)
            if type == idat {
                if checkingCRCs {
                    let crc = libdeflate_crc32(0, base + offset + 4, length + 4)
                    guard crc == bigEndian(at: dataStart + length) else { return nil }
                }
                chunks.append(dataStart..<dataStart + length)
            } else if !chunks.isEmpty {
                // The chunk after the image data is there: the stream is complete.
                return chunks
            }
            offset = dataStart + length + 4
        }
        return nil
    }

    /// Inflates a zlib stream to exactly `size` bytes at `output`.
    private static func inflate(
        _ stream: UnsafeRawBufferPointer, into output: UnsafeMutableRawPointer, _ size: Int, _ strict: Bool
    ) -> Bool {
        guard stream.count > 2, let start = stream.baseAddress else { return false }
        // RFC 1950: deflate (method 8), a window of at most 32 KiB, no preset dictionary, a checked header.
        let (cmf, flg) = (stream[0], stream[1])
        guard cmf & 0x0F == 8, cmf >> 4 <= 7, flg & 0x20 == 0, (UInt16(cmf) << 8 | UInt16(flg)) % 31 == 0 else {
            return false
        }
        guard let decompressor = libdeflate_alloc_decompressor() else { return false }
        defer { libdeflate_free_decompressor(decompressor) }
        // Exactly `size` bytes or a failure (no actual-size pointer: a short stream is LIBDEFLATE_SHORT_OUTPUT).
        let result =
            strict
            ? libdeflate_zlib_decompress(decompressor, start, stream.count, output, size, nil)
            // Lenient: the raw DEFLATE stream after the header; the Adler-32 after it is not read.
            : libdeflate_deflate_decompress(decompressor, start + 2, stream.count - 2, output, size, nil)
        return result == LIBDEFLATE_SUCCESS
    }
}
