import XCTest

@testable import VipsCore

/// Each thread keeps one block per use between images, up to `keptLimit`, so the next image's
/// scratch memory is the same pages (no fresh mapping, no page faults).
final class ScratchMemoryTests: XCTestCase {
    func testABlockIsReusedByTheNextLeaseOfTheSameUseOnTheSameThread() throws {
        // (Leases end where their variables are set to nil.)
        var first = ScratchMemory.lease(1 << 20, for: .boxImage)
        let address = try XCTUnwrap(first).pointer
        // A nested lease of the same use while the first is out gets a block of its own.
        var nested = ScratchMemory.lease(1 << 20, for: .boxImage)
        let nestedAddress = try XCTUnwrap(nested).pointer
        XCTAssertNotEqual(nestedAddress, address)
        nested = nil // kept: the slot was empty
        first = nil // freed: the slot is taken
        XCTAssertNil(first)
        // The next lease of that use, no larger, gets the kept block back; another use does not.
        let again = try XCTUnwrap(ScratchMemory.lease(512 << 10, for: .boxImage))
        XCTAssertEqual(again.pointer, nestedAddress)
        var other = ScratchMemory.lease(512 << 10, for: .resizeRows)
        XCTAssertNotEqual(try XCTUnwrap(other).pointer, again.pointer)
        other = nil
        XCTAssertNil(other)
    }

    func testBlocksAboveTheKeptLimitAreFreedNotKept() throws {
        var small = ScratchMemory.lease(64 << 10, for: .boxImage)
        XCTAssertNotNil(small)
        small = nil
        XCTAssertGreaterThanOrEqual(ScratchMemory.keptBytes(for: .boxImage), 64 << 10)
        // A lease larger than the kept limit takes the kept block's place, and is not kept after it.
        var large = ScratchMemory.lease(ScratchMemory.Use.boxImage.keptLimit + 1, for: .boxImage)
        let pointer = try XCTUnwrap(large).pointer
        pointer.initializeMemory(as: UInt8.self, repeating: 0xA5, count: ScratchMemory.Use.boxImage.keptLimit + 1)
        XCTAssertEqual(pointer.load(fromByteOffset: ScratchMemory.Use.boxImage.keptLimit, as: UInt8.self), 0xA5)
        XCTAssertEqual(ScratchMemory.keptBytes(for: .boxImage), 0, "taken off the thread while in use")
        large = nil
        XCTAssertEqual(ScratchMemory.keptBytes(for: .boxImage), 0, "freed, not kept")
    }

    func testThePNGBlocksAreMadeAtTheirKeptLimitSoALargerImageFindsThemAgain() throws {
        for use in [ScratchMemory.Use.inflatedPNG, .compressedPNG] {
            var first = ScratchMemory.lease(9 << 20, for: use)
            let pointer = try XCTUnwrap(first).pointer
            first = nil
            XCTAssertEqual(ScratchMemory.keptBytes(for: use), use.keptLimit, "\(use): made at the limit, kept")
            // A 12 MB image after a 9 MB one: the same block, not a new one to fault in.
            let second = ScratchMemory.lease(12 << 20, for: use)
            XCTAssertEqual(second?.pointer, pointer, "\(use)")
        }
        XCTAssertFalse(ScratchMemory.Use.boxImage.reservesKeptLimit)
    }

    func testImpossibleSizesAreRefused() {
        XCTAssertNil(ScratchMemory.lease(-1, for: .boxImage))
        XCTAssertNil(ScratchMemory.lease(Int.max, for: .boxImage))
    }

    func testEachThreadHasItsOwnBlocks() throws {
        var mine = ScratchMemory.lease(256 << 10, for: .boxImage)
        let here = try XCTUnwrap(mine).pointer
        mine = nil // kept in this thread's slot
        XCTAssertNil(mine)
        // A semaphore, not an XCTest expectation: XCTest's wait leaves a weak-reference side table
        // that LeakSanitizer reports at exit (scripts/sanitize.sh).
        let done = DispatchSemaphore(value: 0)
        let box = AddressBox()
        let thread = Thread {
            if let theirs = ScratchMemory.lease(256 << 10, for: .boxImage) { box.set(Int(bitPattern: theirs.pointer)) }
            done.signal()
        }
        thread.start()
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success, "the other thread leased")
        XCTAssertNotEqual(box.get(), 0)
        XCTAssertNotEqual(box.get(), Int(bitPattern: here), "the other thread did not get this thread's block")
        let back = try XCTUnwrap(ScratchMemory.lease(256 << 10, for: .boxImage))
        XCTAssertEqual(back.pointer, here, "this thread's block waited for it")
    }
}

/// An address handed from the other thread (under a lock).
private final class AddressBox: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func set(_ address: Int) { lock.withLock { value = address } }
    func get() -> Int { lock.withLock { value } }
}
