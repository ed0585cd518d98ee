import VipsCore
import XCTest

/// `VipsError`'s fields: a message composed from a source and a reason, and
/// re-addressed by its fields, never rewritten.
final class VipsErrorTests: XCTestCase {
    private struct LoaderFailure: Error, CustomStringConvertible {
        var description: String { "the loader's own failure" }
    }

    func testAnErrorAboutASourceNamesItInItsMessage() {
        let error = VipsError(.httpStatus, "HTTP 404", source: "https://h.test/a.jpg", httpStatus: 404)
        XCTAssertEqual(error.message, "https://h.test/a.jpg: HTTP 404")
        XCTAssertEqual(error.description, "httpStatus: https://h.test/a.jpg: HTTP 404")
        XCTAssertEqual(error.source, "https://h.test/a.jpg")
        XCTAssertEqual(error.httpStatus, 404)
        XCTAssertNil(error.underlying)
        let plain = VipsError(.io, "disk full")
        XCTAssertNil(plain.source)
        XCTAssertEqual(plain.message, "disk full")
    }

    func testAboutReAddressesAStandInAndWrapsAnErrorWithoutASource() {
        // About a temporary file: addressed to the URL, the file named nowhere.
        let temporary = VipsError(.io, "cannot write the temporary file: No space left on device", source: "/tmp/w-1")
        let addressed = temporary.about("https://h.test/a.jpg")
        XCTAssertEqual(
            addressed.message, "https://h.test/a.jpg: cannot write the temporary file: No space left on device")
        XCTAssertEqual(addressed.source, "https://h.test/a.jpg")
        XCTAssertEqual(addressed.kind, .io)
        XCTAssertFalse(addressed.description.contains("/tmp/w-1"))
        XCTAssertEqual(addressed.about("https://h.test/a.jpg"), addressed, "already about it: unchanged")

        // Without a source (a processor's error): reported about the source, the original kept.
        let processor = VipsError(.invalidArgument, "blur radius must be positive")
        let reported = processor.about("photo.jpg")
        XCTAssertEqual(reported.message, "photo.jpg: blur radius must be positive")
        XCTAssertEqual(reported.kind, .invalidArgument)
        XCTAssertEqual(reported.underlying as? VipsError, processor)

        // A foreign error reported by a step of the pipeline.
        let foreign = VipsError(.internal, "\(LoaderFailure())", source: "s3://b/k", underlying: LoaderFailure())
        XCTAssertEqual(foreign.message, "s3://b/k: the loader's own failure")
        XCTAssertTrue(foreign.underlying is LoaderFailure)
        XCTAssertEqual(VipsError.cancelled("photo.jpg").message, "photo.jpg: cancelled")
        XCTAssertEqual(VipsError.cancelled("photo.jpg").source, "photo.jpg")
    }

    func testEqualityCoversTheFields() {
        XCTAssertEqual(VipsError(.io, "x", source: "a"), VipsError(.io, "x", source: "a"))
        XCTAssertNotEqual(
            VipsError(.io, "x", source: "a"), VipsError(.io, "a: x"), "the same text, one without a source")
        XCTAssertNotEqual(VipsError(.io, "x").about("a"), VipsError(.io, "x", source: "a"), "one reports another")
        XCTAssertEqual(Set([VipsError(.io, "x", source: "a"), VipsError(.io, "x", source: "a")]).count, 1)
    }

    func testADecoderToldTheInputsNameNamesItAndNeverTheFile() throws {
        let path = NSTemporaryDirectory() + "vipsload-error-" + UUID().uuidString + ".jpg"
        try Data("<html>not an image</html>".utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        var decoder = ImageDecoder()
        decoder.inputName = "https://h.test/page.jpg"
        do {
            _ = try decoder.decode(.file(path), size: .maxPixelSize(32))
            XCTFail("decoded HTML")
        } catch {
            XCTAssertEqual(error.kind, .unsupportedFormat)
            XCTAssertTrue(error.message.hasPrefix("https://h.test/page.jpg: "), error.message)
            XCTAssertFalse(error.message.contains(path), error.message)
        }
        // A file it cannot open is an error about the file, addressed to the name by its fields.
        let missing = NSTemporaryDirectory() + "vipsload-missing-" + UUID().uuidString
        do {
            _ = try decoder.info(.file(missing))
            XCTFail("read a missing file")
        } catch {
            XCTAssertEqual(error.source, missing)
            let reported = error.decodeError(naming: "https://h.test/gone.jpg")
            XCTAssertTrue(reported.message.hasPrefix("https://h.test/gone.jpg: cannot open"), reported.message)
            XCTAssertFalse(reported.message.contains(missing), reported.message)
        }
    }
}
