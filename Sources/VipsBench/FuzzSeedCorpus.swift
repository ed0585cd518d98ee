import Foundation
import VipsCore
import VipsSynthesis

/// The fuzzer's seed corpus (scripts/fuzz.sh, Fuzz/): small generated images
/// covering every decode path VipsCore has (each format and its variants,
/// EXIF orientation, ICC profiles, a progressive JPEG large enough for the
/// DC-only 1/8 path), plus tiny inputs for formats that must be refused.
/// Deterministic: the same bytes every run. Written by `vipsload corpus
/// --fuzz-seeds DIR`: the fuzz harness is a package of its own, and the
/// synthesiser (`VipsSynthesis`) is no product it could import.
public enum FuzzSeedCorpus {
    private struct Seed {
        let name: String
        let width: Int
        let height: Int
        var alpha = false
        var iccProfile: String? = nil
        let format: ImageSynthesizer.Format
    }

    private static let images: [Seed] = [
        Seed(name: "baseline.jpg", width: 96, height: 64, format: .jpeg(quality: 70)),
        // 512 px decoded to 64 px is a 1/8 shrink: the progressive DC-only path.
        Seed(name: "progressive-512.jpg", width: 512, height: 384, format: .jpeg(quality: 30, progressive: true)),
        Seed(name: "progressive-small.jpg", width: 80, height: 48, format: .jpeg(quality: 60, progressive: true)),
        Seed(name: "orientation6.jpg", width: 40, height: 24, format: .jpeg(quality: 60, orientation: 6)),
        Seed(name: "orientation3.jpg", width: 24, height: 40, format: .jpeg(quality: 50, orientation: 3)),
        // An embedded ICC profile: libvips' sRGB one (the direct path) and P3 (libvips converts).
        Seed(name: "icc-srgb.jpg", width: 32, height: 24, iccProfile: "srgb", format: .jpeg(quality: 50)),
        Seed(name: "icc-p3.jpg", width: 32, height: 24, iccProfile: "p3", format: .jpeg(quality: 50)),
        Seed(name: "icc-p3.png", width: 24, height: 16, iccProfile: "p3", format: .png()),
        // (No CMYK seed: libvips embeds its ~1 MB CMYK profile, far above the fuzzer's max_len.)
        Seed(name: "rgb.png", width: 48, height: 32, format: .png()),
        Seed(name: "rgba.png", width: 40, height: 40, alpha: true, format: .png()),
        Seed(name: "grey16.png", width: 24, height: 24, format: .png(sixteenBit: true, grey: true)),
        Seed(name: "palette.png", width: 32, height: 24, format: .png(palette: true)),
        Seed(name: "interlaced.png", width: 33, height: 17, format: .png(interlaced: true)),
        // The direct PNG path's other layouts: grey + alpha, 16-bit RGBA, palette with tRNS.
        Seed(name: "grey-alpha.png", width: 30, height: 20, alpha: true, format: .png(grey: true)),
        Seed(name: "rgba16.png", width: 20, height: 30, alpha: true, format: .png(sixteenBit: true)),
        Seed(name: "palette-trns.png", width: 32, height: 24, alpha: true, format: .png(palette: true)),
        Seed(name: "lossy.webp", width: 64, height: 48, format: .webp(quality: 50)),
        Seed(name: "lossless-alpha.webp", width: 32, height: 32, alpha: true, format: .webp(lossless: true)),
        // The direct WebP path's routes: lossy alpha (ALPH chunk), EXIF orientation, an sRGB profile (direct), P3 (libvips).
        Seed(name: "lossy-alpha.webp", width: 40, height: 24, alpha: true, format: .webp(quality: 40)),
        Seed(name: "orientation6.webp", width: 40, height: 24, format: .webp(quality: 40, orientation: 6)),
        Seed(name: "icc-srgb.webp", width: 24, height: 16, iccProfile: "srgb", format: .webp(quality: 40)),
        Seed(name: "icc-p3.webp", width: 24, height: 16, iccProfile: "p3", format: .webp(quality: 40)),
        Seed(name: "still.gif", width: 40, height: 30, format: .gif),
        Seed(name: "deflate.tif", width: 32, height: 24, format: .tiff)
    ]

    /// Writes the corpus into `folder` (created when missing); returns how many files it wrote.
    public static func write(to folder: URL) throws -> Int {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for seed in images {
            let data = try ImageSynthesizer.data(
                width: seed.width, height: seed.height, seed: 7, alpha: seed.alpha,
                iccProfile: seed.iccProfile, format: seed.format)
            try data.write(to: folder.appendingPathComponent(seed.name))
        }
        // Text formats libvips reads only with loaders it marks untrusted: they must be refused.
        let svg = #"<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16"><rect width="8" height="8"/></svg>"#
        try Data(svg.utf8).write(to: folder.appendingPathComponent("tiny.svg"))
        let written = try writeLegacyFormats(to: folder)
        var ppm = Data("P6\n4 4\n255\n".utf8)
        ppm.append(Data(repeating: 0x80, count: 4 * 4 * 3))
        try ppm.write(to: folder.appendingPathComponent("tiny.ppm"))
        return images.count + 2 + written
    }

    /// BMP, ICO/CUR and TGA seeds (VipsCore's own decoders), written by `LegacyFormatWriter`:
    /// every BMP header and layout, icons with BMP and PNG entries, every TGA type and origin.
    private static func writeLegacyFormats(to folder: URL) throws -> Int {
        let small = try LegacyFormatWriter.Pixels.generated(width: 13, height: 7, alpha: true)
        let icon = try LegacyFormatWriter.Pixels.generated(width: 16, height: 16, alpha: true)
        let larger = try LegacyFormatWriter.Pixels.generated(width: 32, height: 32, seed: 9, alpha: true)
        var files: [(String, Data)] = []
        let layouts: [(String, LegacyFormatWriter.BMPLayout)] = [
            ("pal1", .palette(bits: 1)), ("pal2", .palette(bits: 2)), ("pal4", .palette(bits: 4)),
            ("pal8", .palette(bits: 8)), ("rle8", .rle(bits: 8)), ("rle4", .rle(bits: 4)),
            ("555", .sixteen(rgb565: false)), ("565", .sixteen(rgb565: true)), ("24", .twentyFour),
            ("32x", .thirtyTwo(alpha: false)), ("32a", .thirtyTwo(alpha: true))
        ]
        for (name, layout) in layouts {
            files.append(("\(name).bmp", LegacyFormatWriter.bmp(small, layout: layout, header: .info).data))
        }
        files.append(("core.bmp", LegacyFormatWriter.bmp(small, layout: .palette(bits: 8), header: .core).data))
        files.append(("os2.bmp", LegacyFormatWriter.bmp(small, layout: .palette(bits: 4), header: .os2).data))
        files.append(
            (
                "v5-topdown.bmp",
                LegacyFormatWriter.bmp(small, layout: .thirtyTwo(alpha: true), header: .v5, topDown: true).data
            ))
        files.append(("v4-565.bmp", LegacyFormatWriter.bmp(small, layout: .sixteen(rgb565: true), header: .v4).data))
        files.append(
            (
                "icon.ico",
                try LegacyFormatWriter.ico([.init(icon, layout: .palette(bits: 4)), .init(larger, png: true)]).data
            ))
        files.append(("icon24.ico", try LegacyFormatWriter.ico([.init(icon, layout: .twentyFour), .init(small)]).data))
        files.append(
            ("cursor.cur", try LegacyFormatWriter.ico([.init(icon, layout: .palette(bits: 1))], cursor: true).data))
        let tgas: [(String, LegacyFormatWriter.TGALayout, Bool, Bool, Bool)] = [
            ("rgb24", .trueColour(bits: 24), false, false, false),
            ("rgba32-rle", .trueColour(bits: 32), true, true, false),
            ("rgb16-right", .trueColour(bits: 16), false, false, true),
            ("grey", .grey(alpha: false), true, false, false),
            ("grey-alpha", .grey(alpha: true), false, true, true), ("mapped", .colourMapped, false, false, false),
            ("mapped-rle", .colourMapped, true, true, false)
        ]
        for (name, layout, rle, top, right) in tgas {
            files.append(
                ("\(name).tga", LegacyFormatWriter.tga(small, layout: layout, rle: rle, top: top, right: right).data))
        }
        for (name, data) in files { try data.write(to: folder.appendingPathComponent(name)) }
        return files.count
    }
}
