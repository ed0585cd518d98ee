import Foundation
import XCTest

@testable import VipsCore

/// Asserts that the route `decoder` reports for `input` is the one its decode
/// takes: a direct route decodes on the direct codec (or, lenient and met with
/// damage, hands the file to libvips), a libvips route never touches a direct
/// codec and gives exactly libvips' answer. Errors must be typed input errors.
/// Returns the route.
@discardableResult
func assertRouteHolds(
    _ decoder: ImageDecoder, _ input: ImageInput, size: TargetSize, _ label: String,
    file: StaticString = #filePath, line: UInt = #line
) -> DecodeRoute? {
    var reference = decoder
    reference.usesDirectPaths = false
    func outcome(_ body: () throws(VipsError) -> Bitmap?) -> Result<Data?, VipsError> {
        do throws(VipsError) { return .success(try body()?.pixelData) } catch { return .failure(error) }
    }
    let route: DecodeRoute
    do {
        route = try decoder.route(input, size: size)
    } catch {
        HostileFiles.assertTyped(error, "\(label): route", file: file, line: line)
        return nil
    }
    let decoded = outcome { () throws(VipsError) in try decoder.decode(input, size: size) }
    if case .failure(let error) = decoded { HostileFiles.assertTyped(error, label, file: file, line: line) }
    switch route {
    case .direct:
        let direct = outcome { () throws(VipsError) in try decoder.decodeDirectly(input, size: size) }
        // Nil: damage met by a lenient direct decode, so libvips' answer; a failure: the error.
        guard case .success(let pixels?) = direct else { return route }
        XCTAssertEqual(
            try? decoded.get(), pixels, "\(label): a direct route decodes on the direct codec", file: file, line: line)
    case .libvips(let reason):
        XCTAssertNil(
            try? decoder.decodeDirectly(input, size: size), "\(label): routed to libvips (\(reason))", file: file,
            line: line)
        let viaLibvips = outcome { () throws(VipsError) in try reference.decode(input, size: size) }
        switch (decoded, viaLibvips) {
        case (.success(let pixels), .success(let expected)):
            XCTAssertEqual(pixels, expected, "\(label): libvips' pixels (\(reason))", file: file, line: line)
        case (.failure(let error), .failure(let expected)):
            XCTAssertEqual(error.kind, expected.kind, "\(label): libvips' error (\(reason))", file: file, line: line)
        default:
            XCTFail("\(label): decode gave \(decoded), libvips \(viaLibvips) (\(reason))", file: file, line: line)
        }
    }
    return route
}

/// Asserts that a lenient `decoder` decodes `input` (metadata the codecs pass
/// over) to a 3-channel bitmap within `side` × `side`, and that a strict one
/// either does too or fails with a typed input error.
func assertThumbnailOrStrictFailure(
    _ decoder: ImageDecoder, _ input: ImageInput, side: Int, _ label: String,
    file: StaticString = #filePath, line: UInt = #line
) {
    do {
        let bitmap = try decoder.decode(input, size: .maxPixelSize(side))
        XCTAssertTrue(
            bitmap.width <= side && bitmap.height <= side && bitmap.channels == 3, label, file: file, line: line)
    } catch {
        HostileFiles.assertTyped(error, label, file: file, line: line)
        XCTAssertTrue(decoder.options.strict, "\(label): lenient decodes these: \(error)", file: file, line: line)
    }
}
