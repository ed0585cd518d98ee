import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// `DecodeCancellation`: a decode on one thread stopped from another, or by
/// its time limit, part-way through, with the kind that says why.
final class DecodeCancellationTests: XCTestCase {
    /// A 4000×3000 TIFF: libvips decodes it strip by strip (no shrink on
    /// load), so a thumbnail of it is long, interruptible work.
    private static let tiff = Result { () throws(VipsError) -> Data in
        try ImageSynthesizer.data(width: 4000, height: 3000, seed: 7, format: .tiff)
    }

    /// Made once, and never inside a run (where a time limit would stop it).
    private func largeTIFF() throws -> Data {
        try Self.tiff.get()
    }
    private let thumbnail = TargetSize.fit(width: 256, height: 256)

    func testCancelFromAnotherThreadStopsADecodePartWay() throws {
        let input = ImageInput.data(try largeTIFF())
        let cancellation = DecodeCancellation()
        let outcome = LockedState<Result<Bitmap, VipsError>?>(nil)
        let size = thumbnail
        let thread = Thread {
            let result = Result { () throws(VipsError) -> Bitmap in
                try cancellation.run { () throws(VipsError) -> Bitmap in
                    try ImageDecoder().decode(input, size: size)
                }
            }
            outcome.withLock { $0 = result }
        }
        thread.start()
        // Once libvips has made the decode's first image, the decode is under way.
        let deadline = Date().addingTimeInterval(30)
        while cancellation.watchedImageCount == 0, outcome.withLock({ $0 }) == nil, Date() < deadline { usleep(100) }
        cancellation.cancel()
        while outcome.withLock({ $0 }) == nil, Date() < deadline { usleep(1000) }

        let result = try XCTUnwrap(outcome.withLock { $0 }, "the decode never returned")
        guard case .failure(let error) = result else { return XCTFail("a cancelled decode returned a bitmap") }
        XCTAssertEqual(error.kind, .cancelled, error.message)
        // Only the copying loop says this: the decode stopped before its last row.
        XCTAssertTrue(error.message.contains("stopped after"), error.message)
        XCTAssertTrue(cancellation.isCancelled)

        // The kill flags were on that decode's images only: the next decode works.
        let bitmap = try ImageDecoder().decode(input, size: thumbnail)
        XCTAssertEqual(bitmap.width, 256)
        XCTAssertEqual(
            VipsRuntime.takeErrorMessage(default: ""), "", "a stopped decode left libvips' error text behind")
    }

    func testATimeLimitStopsADecodeWithTimedOut() throws {
        let tiff = try largeTIFF()
        let cancellation = DecodeCancellation()
        XCTAssertThrowsError(
            try cancellation.run(timeLimit: .milliseconds(1)) { () throws(VipsError) -> Bitmap in
                try ImageDecoder().decode(.data(tiff), size: thumbnail)
            }
        ) { error in
            XCTAssertEqual((error as? VipsError)?.kind, .timedOut, "\(error)")
        }
        XCTAssertTrue(cancellation.isCancelled)
        XCTAssertEqual(
            VipsRuntime.takeErrorMessage(default: ""), "", "a stopped decode left libvips' error text behind")

        // The next decode of the same image on the same thread runs normally,
        // under a limit of its own that it does not reach.
        let bitmap = try DecodeCancellation().run(timeLimit: .seconds(3600)) { () throws(VipsError) -> Bitmap in
            try ImageDecoder().decode(.data(tiff), size: thumbnail)
        }
        XCTAssertEqual(bitmap.width, 256)
    }

    func testACancelledCancellationRunsNothing() {
        let cancellation = DecodeCancellation()
        cancellation.cancel()
        var ran = false
        XCTAssertThrowsError(
            try cancellation.run { () throws(VipsError) -> Int in
                ran = true
                return 1
            }
        ) { error in
            XCTAssertEqual((error as? VipsError)?.kind, .cancelled)
        }
        XCTAssertFalse(ran)
    }

    func testAFinishedDecodeWithinItsLimitIsReturned() throws {
        let small = try ImageSynthesizer.data(width: 320, height: 240, format: .png())
        let bitmap = try DecodeCancellation().run(timeLimit: .seconds(600)) { () throws(VipsError) -> Bitmap in
            try ImageDecoder().decode(.data(small), size: .fit(width: 100, height: 100))
        }
        XCTAssertEqual(bitmap.width, 100)
    }

    func testAnErrorOfTheDecodeItselfIsKept() {
        XCTAssertThrowsError(
            try DecodeCancellation().run(timeLimit: .seconds(600)) { () throws(VipsError) -> Bitmap in
                try ImageDecoder().decode(.data(Data("not an image".utf8)))
            }
        ) { error in
            XCTAssertEqual((error as? VipsError)?.kind, .unsupportedFormat, "\(error)")
        }
    }

    func testATimeLimitThatIsNotPositiveIsRefused() {
        for limit: Duration in [.zero, .seconds(-1)] {
            XCTAssertThrowsError(try DecodeCancellation().run(timeLimit: limit) { () throws(VipsError) -> Int in 1 }) {
                error in
                XCTAssertEqual((error as? VipsError)?.kind, .invalidArgument)
            }
        }
    }

    func testARunInsideAnotherStopsWhenTheOuterOneTimesOut() throws {
        let tiff = try largeTIFF()
        let outer = DecodeCancellation(), inner = DecodeCancellation()
        // The inner run decodes until a stop ends it, so the outer limit always falls inside it (with a
        // limit shorter than the machine takes to reach the inner run, the outer one would stop before
        // the inner one began, and there would be nothing to stop with it).
        XCTAssertThrowsError(
            try outer.run(timeLimit: .milliseconds(200)) { () throws(VipsError) -> Bitmap in
                try inner.run { () throws(VipsError) -> Bitmap in
                    while true { _ = try ImageDecoder().decode(.data(tiff), size: thumbnail) }
                }
            }
        ) { error in
            XCTAssertEqual((error as? VipsError)?.kind, .timedOut, "\(error)")
        }
        XCTAssertTrue(inner.isCancelled, "the inner run was stopped with the outer one")
    }

    /// The direct PNG path checks between the rows it reads: a time limit
    /// stops it among the source's 3,000 rows (the libvips path would name
    /// the thumbnail's 192).
    ///
    /// A limit can also pass before the decode reaches its rows (its thread
    /// preempted for longer than the limit on a loaded machine): that stop
    /// names no rows, and the limit is doubled until one passes among them.
    /// A decode that finishes first was never stopped between rows: a failure.
    func testTheDirectPNGPathStopsBetweenRows() throws {
        let png = try ImageSynthesizer.data(width: 4000, height: 3000, seed: 8, format: .png())
        var limit = Duration.milliseconds(1)
        while true {
            do throws(VipsError) {
                _ = try DecodeCancellation().run(timeLimit: limit) { () throws(VipsError) -> Bitmap in
                    try ImageDecoder().decode(.data(png), size: thumbnail)
                }
                return XCTFail("the decode finished within \(limit) without being stopped between its rows")
            } catch {
                XCTAssertEqual(error.kind, .timedOut, error.message)
                if error.message.contains(" of 3000 rows") { return }
                guard !error.message.contains("rows") else { return XCTFail("not the direct path: \(error.message)") }
                limit *= 2
            }
        }
    }
}
