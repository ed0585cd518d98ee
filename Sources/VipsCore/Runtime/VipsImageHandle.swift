import CVipsShim

/// Owns one reference to a `VipsImage` and releases it when dropped.
///
/// libvips images are reference-counted GObjects; each operation returns a new
/// reference. Wrapping every result keeps the ownership rules in one place, so
/// no early return or thrown error can leak a reference.
package final class VipsImageHandle {
    package let pointer: UnsafeMutablePointer<VipsImage>

    init(_ pointer: UnsafeMutablePointer<VipsImage>) {
        self.pointer = pointer
        // Inside `DecodeCancellation.run`, every image can be killed from another thread.
        DecodeCancellation.active?.watch(self)
    }

    deinit {
        g_object_unref(pointer)
    }

    var width: Int { Int(libvips.vips_image_get_width(pointer)) }
    var height: Int { Int(libvips.vips_image_get_height(pointer)) }
    var bands: Int { Int(libvips.vips_image_get_bands(pointer)) }
    var bandFormat: VipsBandFormat { libvips.vips_image_get_format(pointer) }
    var interpretation: VipsInterpretation { libvips.vips_image_get_interpretation(pointer) }
    var hasAlpha: Bool { libvips.vips_image_hasalpha(pointer) != 0 }

    func int(_ name: String) -> Int? {
        guard libvips.vips_image_get_typeof(pointer, name) != 0 else { return nil }
        var value: Int32 = 0
        guard libvips.vips_image_get_int(pointer, name, &value) == 0 else {
            _ = VipsRuntime.takeErrorMessage(default: "")
            return nil
        }
        return Int(value)
    }

    func string(_ name: String) -> String? {
        guard libvips.vips_image_get_typeof(pointer, name) != 0 else { return nil }
        var value: UnsafePointer<CChar>? = nil
        guard libvips.vips_image_get_string(pointer, name, &value) == 0, let value else {
            _ = VipsRuntime.takeErrorMessage(default: "")
            return nil
        }
        return String(cString: value)
    }

    /// Calls `body` with the bytes of a blob field (e.g. "icc-profile-data"); nil when there is none.
    func withBlob<T>(_ name: String, _ body: (UnsafeRawBufferPointer) -> T) -> T? {
        guard libvips.vips_image_get_typeof(pointer, name) != 0 else { return nil }
        var data: UnsafeRawPointer? = nil
        var length = 0
        guard libvips.vips_image_get_blob(pointer, name, &data, &length) == 0, let data else {
            _ = VipsRuntime.takeErrorMessage(default: "")
            return nil
        }
        return body(UnsafeRawBufferPointer(start: data, count: length))
    }

    /// Runs one libvips operation that writes a new image to `out`.
    ///
    /// On failure the libvips error buffer is taken and thrown as `kind`.
    package static func make(
        _ kind: VipsError.Kind, _ context: String,
        _ body: (UnsafeMutablePointer<UnsafeMutablePointer<VipsImage>?>) -> Int32
    ) throws(VipsError) -> VipsImageHandle {
        var out: UnsafeMutablePointer<VipsImage>? = nil
        let status = body(&out)
        guard status == 0, let out else {
            if let out { g_object_unref(out) }
            throw VipsError(kind, "\(context): \(VipsRuntime.takeErrorMessage(default: "libvips gave no reason"))")
        }
        return VipsImageHandle(out)
    }

    /// Runs one operation on this image, producing a new one.
    package func apply(
        _ kind: VipsError.Kind, _ context: String,
        _ body: (UnsafeMutablePointer<VipsImage>, UnsafeMutablePointer<UnsafeMutablePointer<VipsImage>?>) -> Int32
    ) throws(VipsError) -> VipsImageHandle {
        try VipsImageHandle.make(kind, context) { out in body(pointer, out) }
    }
}
