import Foundation
import VipsCore
import VipsServe

@testable import VipsLoad

// libFuzzer target over VipsServe's processing-URL parser (`FuzzURL`, scripts/fuzz.sh url):
// each input is a request target (`/signature/options/source`). Promises checked:
// - parsing fails only with a `ProcessingURLError` of status 403, 404 or 422;
// - a parsed URL's canonical path parses to the same options and source, and is a
//   fixed point (its own canonical path);
// - signed with a key, the canonical path verifies under that key, and the same
//   path with any one byte after the signature changed is refused as a bad signature;
// - a resolved request is accepted by the pipeline's validation or refused with
//   `.invalidArgument`;
// - for the one local file there is (a small PNG), the request's decode and
//   processors either give a well-formed bitmap within the result limit or fail
//   with `.invalidArgument`.

private func broken(_ message: String) -> Never {
    fatalError("invariant broken: \(message)")
}

/// The fuzzer's world: a root folder holding `seed.png` (and `seed-alpha.png`),
/// hosts allowed by pattern, one signing key.
private struct URLWorld: Sendable {
    let root: String
    let parser: ProcessingURLParser
    let signedParser: ProcessingURLParser
    let key: URLSigningKey
    let decoder = ImageDecoder(options: decodeOptions)
    static let decodeOptions = DecodeOptions(
        limits: DecodeLimits(maxPixelCount: 1 << 20, maxDimension: 1024, maxPages: 4, maxInputBytes: 1 << 20))
    static let limits = ProcessingURLParser.Limits(maxResultDimension: 512, maxDPR: 4)

    static func make() -> URLWorld {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("vipsload-fuzz-url-\(getpid())")
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try seedPNG(width: 48, height: 32, channels: 3).write(to: folder.appendingPathComponent("seed.png"))
            try seedPNG(width: 20, height: 30, channels: 4).write(to: folder.appendingPathComponent("seed-alpha.png"))
            let patterns = try ["example.com", "*.example.org", "https://secure.example.net:8443"].map {
                try SourcePattern($0)
            }
            let sources = try SourcePolicy(localRoot: folder.path, allowedSources: patterns)
            let key = try URLSigningKey(hexKey: "736563726574", hexSalt: "68656C6C6F")
            var parser = ProcessingURLParser(sources: sources, limits: limits)
            var signedParser = ProcessingURLParser(signingKeys: [key], sources: sources, limits: limits)
            // A watermark, so `wm` URLs run the watermark step (its placement, tiling, scaling) too.
            let watermark = try WatermarkImage(
                data: try seedPNG(width: 16, height: 8, channels: 4), opacity: 0.8, decodeOptions: decodeOptions)
            parser.watermark = watermark
            signedParser.watermark = watermark
            return URLWorld(root: folder.path, parser: parser, signedParser: signedParser, key: key)
        } catch {
            broken("cannot set up the URL fuzzer's folder: \(error)")
        }
    }
}

private let world = URLWorld.make()

/// A small PNG of gradients (with a falling alpha for 4 channels), through
/// VipsCore's public API: the harness is its own package and cannot import
/// the root package's VipsSynthesis target.
private func seedPNG(width: Int, height: Int, channels: Int) throws -> Data {
    var pixels: [UInt8] = []
    for y in 0..<height {
        for x in 0..<width {
            pixels += [UInt8(x * 255 / width), UInt8(y * 255 / height), UInt8((x + y) * 127 / (width + height))]
            if channels == 4 { pixels.append(UInt8(255 - x * 200 / width)) }
        }
    }
    let bitmap = try Bitmap(width: width, height: height, channels: channels, pixels: pixels)
    return try ImageEncoder().encode(bitmap, as: .png()).data
}

private func checkStatus(_ error: ProcessingURLError, _ what: String) {
    guard [403, 404, 422].contains(error.status) else { broken("\(what): status \(error.status) for \(error)") }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzURL(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
    let data = bytes.map { Data(bytes: $0, count: count) } ?? Data()
    let target = String(decoding: data, as: UTF8.self)
    fuzzURLTarget(target)
    return 0
}

private func fuzzURLTarget(_ target: String) {
    let url: ProcessingURL
    do throws(ProcessingURLError) {
        url = try world.parser.parseURL(target)
    } catch {
        checkStatus(error, "parse")
        // Signature checking must fail too, and with a 4xx, for any input the unsigned parser refuses.
        do throws(ProcessingURLError) {
            _ = try world.signedParser.parseURL(target)
            if error.reason != .badSignature {
                broken("the signed parser accepted \(target.debugDescription) that the unsigned one refused")
            }
        } catch {
            checkStatus(error, "signed parse")
        }
        return
    }
    checkCanonicalForm(url, target)
    checkSignature(url)
    let request: ProcessingRequest
    do throws(ProcessingURLError) {
        request = try world.parser.parse(target)
    } catch {
        checkStatus(error, "resolve")
        return
    }
    checkRequest(request)
}

/// The canonical path parses back to the same URL and is its own canonical path.
private func checkCanonicalForm(_ url: ProcessingURL, _ target: String) {
    let canonical = url.canonicalPath
    do throws(ProcessingURLError) {
        let again = try world.parser.parseURL(canonical)
        guard again.options == url.options, again.source == url.source else {
            broken(
                "\(target.debugDescription) → \(canonical.debugDescription) parses to other options or source: "
                    + "\(url.options) / \(again.options), \(url.source.debugDescription) / \(again.source.debugDescription)"
            )
        }
        guard again.canonicalPath == canonical else {
            broken(
                "canonical path not a fixed point: \(canonical.debugDescription) → \(again.canonicalPath.debugDescription)"
            )
        }
    } catch {
        broken("canonical path \(canonical.debugDescription) of \(target.debugDescription) refused: \(error)")
    }
}

/// Signed, the canonical path verifies; any one byte after the signature changed, it does not.
private func checkSignature(_ url: ProcessingURL) {
    let path = url.canonicalPathAfterSignature
    let signature = world.key.signature(forPath: path)
    do throws(ProcessingURLError) {
        let signed = try world.signedParser.parseURL("/\(signature)\(path)")
        guard signed.isSigned, signed.options == url.options, signed.source == url.source else {
            broken("the signed canonical path \(path.debugDescription) parses differently")
        }
    } catch {
        broken("the signed canonical path \(path.debugDescription) is refused: \(error)")
    }
    var bytes = Array(path.utf8)
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
    let index = Int(hash % UInt64(bytes.count))
    bytes[index] = bytes[index] == UInt8(ascii: "a") ? UInt8(ascii: "b") : UInt8(ascii: "a")
    let tampered = String(decoding: bytes, as: UTF8.self)
    do throws(ProcessingURLError) {
        _ = try world.signedParser.parseURL("/\(signature)\(tampered)")
        broken("a tampered signed path was accepted: \(tampered.debugDescription) for \(path.debugDescription)")
    } catch {
        // The byte may have become a `?` (the rest is then a query, outside the signature) or
        // broken the path's shape; either way the signature no longer matches what it covers.
        if error.reason != .badSignature, error.reason != .malformedURL {
            broken("a tampered signed path failed with \(error), not a bad signature")
        }
    }
}

/// The pipeline's validation accepts the request or refuses it as an invalid argument; for the
/// local seed, the decode and processors give a well-formed bitmap or an invalid argument.
private func checkRequest(_ request: ProcessingRequest) {
    let image = request.imageRequest
    do throws(VipsError) {
        _ = try image.validated()
    } catch {
        if error.kind != .invalidArgument { broken("validation failed with \(error.kind): \(error.message)") }
        return
    }
    guard let path = image.source.filePath, path.hasPrefix(world.root + "/") else { return }
    let what = "\(request.variantKey) of \(path)"
    do throws(VipsError) {
        // The server's requests are planned from the header (`ImageRequest.geometry`), as the pipeline decodes them.
        var bitmap: Bitmap
        if let geometry = image.geometry {
            bitmap = try world.decoder.decode(.file(path), geometry: geometry, scale: image.scale)
        } else {
            bitmap = try world.decoder.decode(
                .file(path), size: image.size, mode: image.mode, scale: image.scale,
                allowUpscale: image.options.contains(.allowUpscale))
        }
        for processor in image.processors {
            try processor.validate()
            bitmap = try processor.process(bitmap)
        }
        let limit = URLWorld.limits.maxResultDimension
        guard bitmap.width > 0, bitmap.height > 0, bitmap.channels == 3 || bitmap.channels == 4,
            bitmap.cost == bitmap.width * bitmap.height * bitmap.channels
        else { broken("\(what): bitmap \(bitmap.width)×\(bitmap.height)×\(bitmap.channels), \(bitmap.cost) bytes") }
        // Decoded within the limit (the seed is small); padding and extend stay within it too.
        guard bitmap.width <= limit, bitmap.height <= limit else {
            broken("\(what): \(bitmap.width)×\(bitmap.height) is past the result limit")
        }
        if request.options.background != nil, bitmap.channels != 3 {
            broken("\(what): a background was set and the result kept its alpha")
        }
    } catch {
        if error.kind != .invalidArgument { broken("\(what): \(error.kind): \(error.message)") }
    }
}
