import CWebP

/// What the direct WebP codec reads from a WebP's RIFF chunks, through
/// libwebp's demuxer (the calls libvips' webpload makes).
struct WebPHeader {
    /// The canvas size, as stored (before orientation).
    var width: Int
    var height: Int
    var hasAlpha: Bool
    var isAnimated: Bool
    var iccProfile: [UInt8]?
    /// EXIF orientation (1 when there is no EXIF chunk or no valid tag).
    var orientation: Int

    /// Reads the header as libvips' webpload does; nil when the demuxer refuses the bytes.
    init?(_ bytes: UnsafeRawBufferPointer) {
        guard
            let header = Self.withDemuxer(
                bytes,
                { demuxer -> WebPHeader? in
                    let flags = WebPDemuxGetI(demuxer, WEBP_FF_FORMAT_FLAGS)
                    func chunk(_ fourcc: String, _ flag: WebPFeatureFlags) -> [UInt8]? {
                        guard flags & flag.rawValue != 0 else { return nil }
                        var iterator = WebPChunkIterator()
                        defer { WebPDemuxReleaseChunkIterator(&iterator) }
                        guard WebPDemuxGetChunk(demuxer, fourcc, 1, &iterator) != 0, let base = iterator.chunk.bytes
                        else { return [] }
                        return Array(UnsafeBufferPointer(start: base, count: iterator.chunk.size))
                    }
                    // The chunk as libvips hands it to libexif (a bare TIFF structure, or one after "Exif\0\0").
                    let orientation = chunk("EXIF", EXIF_FLAG).flatMap { $0.withUnsafeBytes(EXIFOrientation.read) } ?? 1
                    return WebPHeader(
                        width: Int(WebPDemuxGetI(demuxer, WEBP_FF_CANVAS_WIDTH)),
                        height: Int(WebPDemuxGetI(demuxer, WEBP_FF_CANVAS_HEIGHT)),
                        hasAlpha: flags & ALPHA_FLAG.rawValue != 0, isAnimated: flags & ANIMATION_FLAG.rawValue != 0,
                        iccProfile: chunk("ICCP", ICCP_FLAG), orientation: orientation)
                })
        else { return nil }
        self = header
    }

    private init(
        width: Int, height: Int, hasAlpha: Bool, isAnimated: Bool, iccProfile: [UInt8]?, orientation: Int
    ) {
        (self.width, self.height, self.hasAlpha, self.isAnimated) = (width, height, hasAlpha, isAnimated)
        (self.iccProfile, self.orientation) = (iccProfile, orientation)
    }

    /// Whether the RIFF header declares more bytes than there are: a truncated file.
    static func isTruncated(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count >= 12, bytes.starts(with: Array("RIFF".utf8)) else { return false }
        let declared = (0..<4).reduce(0) { $0 | Int(bytes[4 + $1]) << (8 * $1) }
        return declared + 8 > bytes.count
    }

    /// Runs `body` with a demuxer over `bytes` (complete files only, as libvips asks); nil when it refuses them.
    static func withDemuxer<R>(_ bytes: UnsafeRawBufferPointer, _ body: (OpaquePointer) -> R?) -> R? {
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
        var data = WebPData(bytes: base, size: bytes.count)
        guard let demuxer = WebPDemux(&data) else { return nil }
        defer { WebPDemuxDelete(demuxer) }
        return body(demuxer)
    }
}
