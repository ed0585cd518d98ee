import CVipsShim
import VipsSynthesis
import XCTest

@testable import VipsCore

/// libvips opened at run time: bound whole or not at all, with a typed
/// error that says why.
final class LibVipsTests: XCTestCase {
    func testLibvipsOpensWithEveryFunctionBoundAndStarts() throws {
        try VipsRuntime.start()
        guard case .success(let bound) = LibVips.binding else {
            return XCTFail("libvips did not open: \(LibVips.binding)")
        }
        XCTAssertEqual(bound.pointer.pointee.vips_version(0), VIPS_MAJOR_VERSION, "the library the headers describe")
        XCTAssertTrue(VipsRuntime.libraryVersion.hasPrefix("\(VIPS_MAJOR_VERSION).\(VIPS_MINOR_VERSION)."))
        // Calls through the table and the shim's wrappers: libvips' loader, its header, its pixels.
        let jpeg = try ImageSynthesizer.data(width: 40, height: 30, format: .jpeg())
        let bitmap = try ImageDecoder.libvipsOnly().decode(.data(jpeg))
        XCTAssertEqual([bitmap.width, bitmap.height], [40, 30])
    }

    func testALibraryThatIsMissingOrIsNotLibvipsIsATypedErrorNamingEachTry() {
        let missing = "libvips-not-installed.so.99"
        // libz is loaded in every VipsLoad process (libtiff needs it) and has none of libvips' functions.
        let other = "libz.so.1"
        guard case .failure(let error) = LibVips.open([missing, other]) else {
            return XCTFail("a missing library and a library without libvips' functions were bound")
        }
        XCTAssertEqual(error.kind, .internal)
        XCTAssertTrue(error.message.contains("libvips could not be opened"), error.message)
        XCTAssertTrue(error.message.contains(missing), error.message)
        XCTAssertTrue(error.message.contains("\(other) has no vips_add"), error.message)
    }
}
