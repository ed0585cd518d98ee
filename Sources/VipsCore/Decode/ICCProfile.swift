import CLittleCMS
import Foundation

/// What the decoder needs to know about an embedded ICC profile: its colour
/// space, and whether it describes sRGB closely enough that its pixels can be
/// used as they are (no colour transform).
///
/// The profile is read by Little CMS, the library libvips converts profiles
/// with: a profile it cannot open is `nil` here and is never converted there
/// either, so the check and the conversion agree on what a profile is. Only
/// the decision is this type's: sRGB's primaries and tone curve, within
/// tolerances that a gamma 2.2 curve or Display P3's primaries do not meet.
struct ICCProfile: Equatable {
    /// The profile's data colour space.
    enum ColourSpace: Equatable {
        case rgb, grey, cmyk, other
    }

    let colourSpace: ColourSpace
    /// True for an RGB profile with sRGB's primaries (D50-adapted, as every
    /// ICC v2/v4 profile stores them) and sRGB's tone curve on all three
    /// channels, or a grey profile with sRGB's tone curve.
    let isSRGB: Bool

    /// Reads the profile with Little CMS; nil when the bytes are no ICC profile it opens.
    init?(_ bytes: UnsafeRawBufferPointer) {
        // The ICC header alone is 128 bytes and the tag count 4 more; 64 MiB bounds a copy Little CMS makes.
        guard bytes.count >= 132, bytes.count <= 64 << 20, let base = bytes.baseAddress,
            let profile = cmsOpenProfileFromMemTHR(Self.context.pointer, base, cmsUInt32Number(bytes.count))
        else { return nil }
        defer { cmsCloseProfile(profile) }
        switch cmsGetColorSpace(profile) {
        case cmsSigRgbData: colourSpace = .rgb
        case cmsSigGrayData: colourSpace = .grey
        case cmsSigCmykData: colourSpace = .cmyk
        default: colourSpace = .other
        }
        func curveIsSRGB(_ tag: cmsTagSignature) -> Bool {
            guard let curve = cmsReadTag(profile, tag) else { return false }
            return Self.isSRGB { Double(cmsEvalToneCurveFloat(OpaquePointer(curve), Float($0))) }
        }
        switch colourSpace {
        case .rgb:
            let colorants = [cmsSigRedColorantTag, cmsSigGreenColorantTag, cmsSigBlueColorantTag].map { tag in
                cmsReadTag(profile, tag).map { $0.load(as: cmsCIEXYZ.self) }
            }
            let primariesMatch = zip(colorants, Self.srgbColorants).allSatisfy { found, expected in
                guard let found else { return false }
                return zip([found.X, found.Y, found.Z], expected).allSatisfy { abs($0 - $1) < 0.01 }
            }
            isSRGB =
                primariesMatch && [cmsSigRedTRCTag, cmsSigGreenTRCTag, cmsSigBlueTRCTag].allSatisfy(curveIsSRGB)
        case .grey:
            isSRGB = curveIsSRGB(cmsSigGrayTRCTag)
        case .cmyk, .other:
            isSRGB = false
        }
    }

    /// sRGB's red, green and blue colorants adapted to D50 (IEC 61966-2-1 via Bradford).
    static let srgbColorants: [[Double]] = [
        [0.4361, 0.2225, 0.0139], [0.3851, 0.7169, 0.0971], [0.1431, 0.0606, 0.7141]
    ]

    /// Whether a tone curve is within 0.002 (linear light) of sRGB's across the
    /// range: a gamma 2.2 curve differs by 0.004 at 0.1, so it does not pass.
    static func isSRGB(_ curve: (Double) -> Double) -> Bool {
        stride(from: 0.05, through: 1.0, by: 0.05).allSatisfy { x in
            let expected = x <= 0.04045 ? x / 12.92 : pow((x + 0.055) / 1.055, 2.4)
            let value = curve(x)
            return value.isFinite && abs(value - expected) < 0.002
        }
    }

    /// The Little CMS context profiles are opened in. Its error handler drops
    /// what Little CMS says of a malformed profile (nil says it): the default,
    /// which libvips sets, would leave the text in libvips' error buffer for
    /// an unrelated failure to report.
    private static let context = LittleCMSContext()
}

/// One Little CMS context, made once and only read afterwards: opening and
/// reading profiles in it from several threads at once is what Little CMS's
/// `THR` functions are for.
private final class LittleCMSContext: @unchecked Sendable {
    let pointer: cmsContext?

    init() {
        pointer = cmsCreateContext(nil, nil)
        // (A nil context would set the process-wide handler, libvips'; then profiles open in that one.)
        if pointer != nil { cmsSetLogErrorHandlerTHR(pointer) { _, _, _ in } }
    }
}
