import CVipsShim

/// One immutable block of pixel memory allocated with GLib's allocator.
///
/// The decoder copies each strip libvips computes straight into this block,
/// which then becomes the bitmap's storage as it is: no full-size
/// intermediate buffer and no second copy into a Swift array. The memory is
/// written once before the storage is created and never again, which is why
/// sharing it across threads is safe.
final class PixelStorage: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
    let count: Int

    /// Takes ownership of a `g_malloc` block.
    init(adopting pointer: UnsafeMutableRawPointer, count: Int) {
        self.pointer = pointer
        self.count = count
    }

    /// Copies `bytes` into a new block.
    convenience init(copying bytes: UnsafeRawBufferPointer) {
        let block: UnsafeMutableRawPointer = g_malloc(gsize(max(1, bytes.count)))
        if let base = bytes.baseAddress, bytes.count > 0 { block.copyMemory(from: base, byteCount: bytes.count) }
        self.init(adopting: block, count: bytes.count)
    }

    /// A new block for `width`×`height` pixels of `channels` bytes each: the one
    /// allocator of every decode path's pixels. `.tooLarge` when the size is
    /// empty or overflows, or the memory is not there (`g_try_malloc`, never an abort).
    static func allocate(width: Int, height: Int, channels: Int, label: String) throws(VipsError) -> PixelStorage {
        let (rowBytes, rowOverflow) = width.multipliedReportingOverflow(by: channels)
        let (size, overflow) = rowBytes.multipliedReportingOverflow(by: height)
        guard width > 0, height > 0, channels > 0, !rowOverflow, !overflow, let block = g_try_malloc(gsize(size)) else {
            throw VipsError(.tooLarge, "\(label): cannot allocate \(width)×\(height)×\(channels) pixels")
        }
        return PixelStorage(adopting: block, count: size)
    }

    deinit {
        g_free(pointer)
    }

    var buffer: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: pointer, count: count) }
}
