import XCTest

@testable import VipsCore

/// `tuneAllocatorForImageWork` leaves glibc's allocator alone when the
/// environment configures it.
final class AllocatorTuningTests: XCTestCase {
    func testGlibcVariablesAndTunablesConfigureTheAllocator() {
        XCTAssertTrue(VipsRuntime.environmentConfiguresAllocator(["MALLOC_ARENA_MAX": "2"]))
        XCTAssertTrue(VipsRuntime.environmentConfiguresAllocator(["MALLOC_MMAP_THRESHOLD_": "131072"]))
        XCTAssertTrue(VipsRuntime.environmentConfiguresAllocator(["MALLOC_TRIM_THRESHOLD_": "0"]))
        XCTAssertTrue(
            VipsRuntime.environmentConfiguresAllocator([
                "GLIBC_TUNABLES": "glibc.rtld.optional_static_tls=512:glibc.malloc.arena_max=4"
            ]))
    }

    func testOtherVariablesLeaveTheTuningOn() {
        XCTAssertFalse(VipsRuntime.environmentConfiguresAllocator([:]))
        XCTAssertFalse(VipsRuntime.environmentConfiguresAllocator(["PATH": "/usr/bin", "MALLOC": "x"]))
        XCTAssertFalse(
            VipsRuntime.environmentConfiguresAllocator(["GLIBC_TUNABLES": "glibc.rtld.optional_static_tls=512"]))
        XCTAssertFalse(
            VipsRuntime.environmentConfiguresAllocator(["LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"]))
    }
}
