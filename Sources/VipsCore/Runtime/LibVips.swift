import CVipsShim
import Foundation

/// libvips, opened the first time an image needs it instead of at process
/// start-up.
///
/// Linked, libvips and the shared libraries it needs (about 100 on Debian 12)
/// are loaded and relocated before `main` by every process, at about 25 ms of
/// CPU, although the direct JPEG, PNG and WebP paths never call it. Opened
/// here instead, a `vipsload thumb` of JPEGs, PNGs or WebPs never pays that,
/// and a process that does need libvips pays it once, on its first image.
///
/// `VipsRuntime.start()` opens the library and binds every function VipsLoad
/// calls (`CVipsShim/libvips.h` lists them) before libvips starts, and throws
/// if either fails. After that, `libvips` is the table of those functions,
/// and the shim's wrappers take `LibVips.table`.
package enum LibVips {
    /// The names tried, in order: the soname of the ABI VipsLoad was built
    /// against (libtool's current − age, 42 for libvips 8.x; `vl_init`
    /// checks it again), then the development symlink.
    static let fileNames = ["libvips.so.\(VIPS_LIBRARY_CURRENT - VIPS_LIBRARY_AGE)", "libvips.so"]

    /// The bound functions. Only after `VipsRuntime.start()` succeeded: every
    /// libvips object VipsLoad holds was made after it.
    package static var table: UnsafePointer<VLLibVips> {
        switch binding {
        case .success(let bound): return bound.pointer
        case .failure(let error): preconditionFailure("libvips used although it could not be opened: \(error)")
        }
    }

    /// The table, written once by `vl_libvips_bind` before it is shared and
    /// never written or freed after: reading it from any thread is safe.
    struct BoundTable: @unchecked Sendable {
        let pointer: UnsafePointer<VLLibVips>
    }

    /// libvips, opened and bound once (Swift runs a `static let` initialiser
    /// exactly once, thread-safely); the library stays open for the process.
    static let binding = open(fileNames)

    /// Opens the first of `fileNames` that loads and has every function the
    /// table lists, and binds the table (a `dlopen` search, as the dynamic
    /// linker would have made for a linked libvips).
    static func open(_ fileNames: [String]) -> Result<BoundTable, VipsError> {
        var reasons: [String] = []
        for name in fileNames {
            guard let handle = dlopen(name, RTLD_NOW | RTLD_LOCAL) else {
                reasons.append(dlerror().map { String(cString: $0) } ?? "\(name): not found")
                continue
            }
            let table = UnsafeMutablePointer<VLLibVips>.allocate(capacity: 1)
            if let missing = vl_libvips_bind(table, handle) {
                table.deallocate()
                dlclose(handle)
                reasons.append("\(name) has no \(String(cString: missing))")
                continue
            }
            return .success(BoundTable(pointer: UnsafePointer(table)))
        }
        return .failure(
            VipsError(.internal, "libvips could not be opened (install libvips42): \(reasons.joined(separator: "; "))"))
    }
}

/// libvips' functions, for a direct call (`libvips.vips_image_get_width(image)`);
/// only after `VipsRuntime.start()` succeeded.
package var libvips: VLLibVips { LibVips.table.pointee }
