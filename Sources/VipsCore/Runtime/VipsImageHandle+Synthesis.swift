import CVipsShim
import Foundation

/// The libvips operations `VipsSynthesis` builds its images with, so that it speaks
/// libvips only through VipsCore. Package API: no part of the library's.
extension VipsImageHandle {
    /// A colour space a synthetic image is converted to before it is saved.
    package enum SyntheticColourSpace: Sendable {
        /// 8-bit grey.
        case grey
        /// 16-bit grey.
        case grey16
        /// 16-bit sRGB.
        case rgb16
    }

    /// Layered Perlin noise (smooth shapes at three scales), hard edges and sensor-like
    /// Gaussian noise: 3 bands (4 with alpha), 8-bit sRGB, lazy.
    package static func syntheticPhoto(
        width: Int, height: Int, seed: Int32, alpha: Bool
    ) throws(VipsError)
        -> VipsImageHandle
    {
        let w = Int32(clamping: width), h = Int32(clamping: height)
        let large = max(Int32(8), max(w, h) / 3), medium = max(Int32(4), max(w, h) / 14),
            small = max(Int32(2), max(w, h) / 60)
        func channel(_ index: Int32) throws(VipsError) -> VipsImageHandle {
            let s = seed &* 31 &+ index &* 7
            // Perlin output is roughly -1...1; weight three octaves, then map to 0...255.
            let a = try VipsImageHandle.make(.internal, "perlin") { vl_perlin(LibVips.table, $0, w, h, large, s) }
            let b = try VipsImageHandle.make(.internal, "perlin") { vl_perlin(LibVips.table, $0, w, h, medium, s &+ 1) }
            let c = try VipsImageHandle.make(.internal, "perlin") { vl_perlin(LibVips.table, $0, w, h, small, s &+ 2) }
            let a1 = try a.apply(.internal, "linear") { vl_linear1(LibVips.table, $0, $1, 110, 128) }
            let b1 = try b.apply(.internal, "linear") { vl_linear1(LibVips.table, $0, $1, 45, 0) }
            let c1 = try c.apply(.internal, "linear") { vl_linear1(LibVips.table, $0, $1, 18, 0) }
            // Hard-edged shapes: thresholded medium octave.
            let edges = try b.apply(.internal, "edges") { vl_more_const1(LibVips.table, $0, $1, 0.2) }
            let e1 = try edges.apply(.internal, "linear") { vl_linear1(LibVips.table, $0, $1, 0.25, 0) }
            let noise = try VipsImageHandle.make(.internal, "noise") {
                vl_gaussnoise(LibVips.table, $0, w, h, 0, 5, s &+ 3)
            }
            var sum = try VipsImageHandle.make(.internal, "add") { vl_add(LibVips.table, a1.pointer, b1.pointer, $0) }
            for layer in [c1, e1, noise] {
                let previous = sum
                sum = try VipsImageHandle.make(.internal, "add") {
                    vl_add(LibVips.table, previous.pointer, layer.pointer, $0)
                }
            }
            return try sum.apply(.internal, "cast") { vl_cast(LibVips.table, $0, $1, VIPS_FORMAT_UCHAR) }
        }
        let r = try channel(0), g = try channel(1), b = try channel(2)
        var rgb = try VipsImageHandle.make(.internal, "bandjoin") {
            vl_bandjoin3(LibVips.table, r.pointer, g.pointer, b.pointer, $0)
        }
        if alpha {
            let a = try VipsImageHandle.make(.internal, "perlin") {
                vl_perlin(LibVips.table, $0, w, h, large, seed &+ 99)
            }
            let a1 = try a.apply(.internal, "linear") { vl_linear1(LibVips.table, $0, $1, 160, 150) }
            let a2 = try a1.apply(.internal, "cast") { vl_cast(LibVips.table, $0, $1, VIPS_FORMAT_UCHAR) }
            let previous = rgb
            rgb = try VipsImageHandle.make(.internal, "bandjoin") {
                vl_bandjoin2(LibVips.table, previous.pointer, a2.pointer, $0)
            }
        }
        return try rgb.apply(.internal, "sRGB") {
            vl_copy_interpretation(LibVips.table, $0, $1, VIPS_INTERPRETATION_sRGB)
        }
    }

    /// A copy in memory with its top-left `width` × `height` painted `ink` (one value per band).
    package func paintingCorner(ink: [Double], width: Int, height: Int) throws(VipsError) -> VipsImageHandle {
        let copy = try apply(.internal, "marker") { input, out in
            out.pointee = libvips.vips_image_copy_memory(input)
            return out.pointee == nil ? -1 : 0
        }
        var ink = ink
        let status = vl_draw_rect(
            LibVips.table, copy.pointer, &ink, Int32(ink.count), 0, 0, Int32(clamping: width), Int32(clamping: height))
        guard status == 0 else {
            throw VipsError(.internal, "marker: \(VipsRuntime.takeErrorMessage(default: "draw failed"))")
        }
        return copy
    }

    /// The sRGB pixels converted into `profile` (a libvips built-in name or a file's path), which is embedded.
    package func transformedFromSRGB(to profile: String) throws(VipsError) -> VipsImageHandle {
        try apply(.internal, "ICC \(profile)") { vl_icc_transform(LibVips.table, $0, $1, profile, "srgb") }
    }

    /// The first three bands (the alpha band dropped).
    package func droppingAlpha() throws(VipsError) -> VipsImageHandle {
        try apply(.internal, "flatten") { vl_extract_bands(LibVips.table, $0, $1, 0, 3) }
    }

    /// A copy whose EXIF orientation field is `orientation` (1–8).
    package func settingOrientation(_ orientation: Int) throws(VipsError) -> VipsImageHandle {
        let copy = try apply(.internal, "copy") {
            vl_copy_interpretation(LibVips.table, $0, $1, libvips.vips_image_get_interpretation($0))
        }
        libvips.vips_image_set_int(copy.pointer, "orientation", Int32(clamping: orientation))
        return copy
    }

    /// The image converted to `space`.
    package func converted(to space: SyntheticColourSpace) throws(VipsError) -> VipsImageHandle {
        let interpretation: VipsInterpretation
        let label: String
        switch space {
        case .grey: (interpretation, label) = (VIPS_INTERPRETATION_B_W, "grey")
        case .grey16: (interpretation, label) = (VIPS_INTERPRETATION_GREY16, "16-bit")
        case .rgb16: (interpretation, label) = (VIPS_INTERPRETATION_RGB16, "16-bit")
        }
        return try apply(.internal, label) { vl_colourspace(LibVips.table, $0, $1, interpretation) }
    }

    /// The image saved by the libvips saver `suffix` names, with its options (".png[palette]").
    package func saved(suffix: String) throws(VipsError) -> Data {
        var buffer: UnsafeMutableRawPointer? = nil
        var length = 0
        guard vl_write_to_buffer(LibVips.table, pointer, suffix, &buffer, &length) == 0, let buffer else {
            throw VipsError(
                .encodeFailed, "synthesise \(suffix): \(VipsRuntime.takeErrorMessage(default: "save failed"))")
        }
        return Data(bytesNoCopy: buffer, count: length, deallocator: .custom { pointer, _ in g_free(pointer) })
    }
}
