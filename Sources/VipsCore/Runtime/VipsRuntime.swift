import CVipsShim
import Foundation
import Synchronization

/// The process-wide libvips state, started once and configured deliberately.
///
/// libvips keeps global state (initialisation, the error buffer, the operation
/// cache, the worker thread pool, GLib logging). Every libvips call in VipsCore
/// goes through `VipsRuntime.start()` first, which runs the start-up exactly
/// once, thread-safely (Swift `static let` initialisers are run under
/// `swift_once`).
public enum VipsRuntime {
    /// The libvips version this process runs against, for example "8.14.1"
    /// ("unavailable" when libvips cannot be opened). Asking opens libvips
    /// (see `LibVips`), without starting it.
    public static var libraryVersion: String {
        guard case .success(let bound) = LibVips.binding else { return "unavailable" }
        let version = bound.pointer.pointee.vips_version
        return "\(version(0)).\(version(1)).\(version(2))"
    }

    /// Number of libvips/loader warnings swallowed since start-up.
    ///
    /// Library code never prints: libvips' warnings (for example "premature end
    /// of JPEG file") would otherwise go to stderr through GLib's default handler.
    /// Package-only: a count for the project's tests and tools.
    package static var warningCount: Int { warnings.load(ordering: .relaxed) }

    /// Threads libvips may use inside one image operation (default 1).
    ///
    /// VipsLoad parallelises across images (the pipeline's decode concurrency),
    /// so libvips' own per-image worker pool would only oversubscribe the cores
    /// and pay thread start-up for thumbnail-sized outputs. A tool that decodes
    /// one huge image at a time can raise this.
    public static func setThreadsPerImage(_ count: Int) throws(VipsError) {
        try start()
        libvips.vips_concurrency_set(Int32(clamping: max(1, count)))
    }

    /// Allows or blocks libvips loaders marked untrusted (SVG, PDF, ImageMagick,
    /// FITS, ...). Blocked by default: they are large parsers not fuzzed for
    /// hostile input.
    public static func setUntrustedLoadersAllowed(_ allowed: Bool) throws(VipsError) {
        try start()
        libvips.vips_block_untrusted_set(allowed ? 0 : 1)
        allowJXLSaver()
    }

    /// libvips marks all of libjxl untrusted, its saver too; but the saver
    /// only ever encodes this process's own pixels (nothing hostile is
    /// parsed), so it stays open while the loader stays blocked.
    private static func allowJXLSaver() {
        libvips.vips_operation_block_set("VipsForeignSaveJxl", 0)
    }

    /// Tunes glibc's allocator for a process that decodes many images on
    /// several threads. Opt-in, for applications (the `vipsload` CLI calls it);
    /// a library should not change its host's allocator behind its back.
    ///
    /// Why: libjpeg allocates whole-image buffers for progressive files (36 MB
    /// for 12 megapixels) and libvips many mid-sized ones, from whichever
    /// thread decodes. By default glibc gives each thread its own arena and
    /// keeps freed memory there, so peak RSS grows with threads × largest image
    /// and never falls. Two arenas and a fixed 256 KiB mmap threshold (large
    /// blocks go back to the kernel when freed) measured 30–50 % lower peak RSS
    /// in `vipsload bench`, at no measurable throughput cost.
    ///
    /// An environment that sets glibc's allocator itself (`MALLOC_ARENA_MAX`,
    /// `MALLOC_MMAP_THRESHOLD_` and the other `MALLOC_*_` variables, or
    /// `glibc.malloc` tunables in `GLIBC_TUNABLES`) wins: nothing is changed,
    /// so an operator's setting holds (and `Benchmarks/serve.sh soak` can
    /// compare settings). Package-only: for the project's own executables, not
    /// the library's API.
    package static func tuneAllocatorForImageWork(arenas: Int = 2, mmapThreshold: Int = 256 << 10) {
        guard !environmentConfiguresAllocator(ProcessInfo.processInfo.environment) else { return }
        _ = mallopt(M_ARENA_MAX, Int32(clamping: max(1, arenas)))
        _ = mallopt(M_MMAP_THRESHOLD, Int32(clamping: max(4096, mmapThreshold)))
    }

    /// Whether `environment` sets glibc's malloc options (the variables glibc
    /// reads at start-up), so `tuneAllocatorForImageWork` leaves them alone.
    static func environmentConfiguresAllocator(_ environment: [String: String]) -> Bool {
        let variables = [
            "MALLOC_ARENA_MAX", "MALLOC_ARENA_TEST", "MALLOC_MMAP_THRESHOLD_", "MALLOC_MMAP_MAX_",
            "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"
        ]
        if variables.contains(where: { environment[$0] != nil }) { return true }
        return environment["GLIBC_TUNABLES"]?.contains("glibc.malloc.") ?? false
    }

    /// Gives memory the process has freed back to the kernel (glibc's
    /// `malloc_trim`): after a burst of large decodes, or after emptying the
    /// caches on memory pressure, so the resident size falls with them.
    public static func releaseFreedMemory() {
        _ = malloc_trim(0)
    }

    /// Starts libvips if needed; throws when the library cannot start.
    public static func start() throws(VipsError) {
        if let failure = startup.failure { throw failure }
    }

    // MARK: - Error buffer

    /// Takes (and clears) libvips' error buffer as one trimmed line.
    ///
    /// libvips 8.14 keeps one global error buffer guarded by its own lock;
    /// `vips_error_buffer_copy` reads and clears it atomically. Under heavy
    /// concurrency a message may therefore also carry another thread's failure
    /// text; the error *kind* is always decided by VipsCore from the step that
    /// failed, so only the wording can be affected, never the classification.
    package static func takeErrorMessage(default fallback: String) -> String {
        // Before vips_init the buffer's lock does not exist (a direct decode
        // runs without libvips): there is nothing to take.
        guard isStarted else { return fallback }
        return readErrorBuffer(default: fallback)
    }

    /// Takes the error buffer (libvips must have got as far as creating it).
    private static func readErrorBuffer(default fallback: String) -> String {
        guard let raw = libvips.vips_error_buffer_copy() else { return fallback }
        defer { g_free(raw) }
        let text = String(cString: raw)
            .split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
            .joined(separator: "; ")
        if text.isEmpty { return fallback }
        return text.count > 1_000 ? String(text.prefix(1_000)) + "…" : text
    }

    /// Empties the error buffer after a call that succeeded.
    ///
    /// Lenient decodes succeed with libjpeg's warnings ("premature end of
    /// JPEG file") left in the buffer; kept, they would be taken as the reason
    /// for the next failure, and could even decide its kind.
    static func discardErrorMessages() {
        guard isStarted else { return }
        libvips.vips_error_clear()
    }

    /// libvips objects (images, sources, operations) alive now, 0 before
    /// libvips started. libvips registers every object in a global table,
    /// which hides a leaked reference from LeakSanitizer; counting the table
    /// finds it. For the hostile-input tests and the fuzzer.
    static var liveObjectCount: Int {
        guard isStarted else { return 0 }
        var count = 0
        withUnsafeMutablePointer(to: &count) { counter in
            _ = libvips.vips_object_map(
                { _, counter, _ in
                    counter?.assumingMemoryBound(to: Int.self).pointee += 1
                    return nil
                }, counter, nil)
        }
        return count
    }

    /// Whether libvips has started (its error buffer and lock exist).
    private static var isStarted: Bool { started.load(ordering: .acquiring) }
    private static let started = Atomic<Bool>(false)

    /// Some loaders (libpng's, through libvips 8.14) report why they failed
    /// only as a GLib warning, leaving the error buffer empty. The last
    /// warning on each thread is kept so a failure on that thread can still
    /// say why (`takeLastWarning`), instead of "no reason".
    private static let lastWarningKey = "org.vipsload.lastWarning"

    fileprivate static func noteWarning(_ message: String) {
        let text = message.count > 300 ? String(message.prefix(300)) + "…" : message
        Thread.current.threadDictionary[lastWarningKey] = text
    }

    /// Counts a warning a decoder outside libvips (the direct JPEG path)
    /// swallowed in lenient mode, and keeps it as this thread's last warning,
    /// so the decode is reported as lenient like a libvips one.
    static func countWarning(_ message: String) {
        warnings.add(1, ordering: .relaxed)
        noteWarning(message)
    }

    /// Takes (and clears) the last libvips warning raised on this thread.
    static func takeLastWarning() -> String? {
        let dictionary = Thread.current.threadDictionary
        defer { dictionary.removeObject(forKey: lastWarningKey) }
        return dictionary[lastWarningKey] as? String
    }

    // MARK: - Start-up

    private static let warnings = Atomic<Int>(0)

    private struct Startup: Sendable {
        let failure: VipsError?
    }

    private static let startup: Startup = {
        // libvips is opened here, by the first call that needs it, not at process start-up.
        if case .failure(let failure) = LibVips.binding { return Startup(failure: failure) }
        if vl_init(LibVips.table, "vipsload") != 0 {
            let message = readErrorBuffer(default: "vips_init failed")
            return Startup(failure: VipsError(.internal, "libvips failed to start: \(message)"))
        }
        // Operation cache off: it memoises operations by their arguments and
        // keeps their images (and the input buffers they reference) alive. Our
        // own caches decide what to keep; libvips' would only hold memory and
        // file descriptors for inputs we will never decode twice.
        libvips.vips_cache_set_max(0)
        libvips.vips_cache_set_max_mem(0)
        libvips.vips_cache_set_max_files(0)
        // No ORC (libvips' run-time generated SIMD kernels): with libvips 8.14
        // and liborc 0.4.33, decodes and downscales running on several threads
        // at once corrupt the heap (segfaults inside liborc, glibc's
        // "malloc_consolidate(): unaligned fastbin chunk", libvips' pspec
        // assertion) in about one run in thirty of the pipeline stress test;
        // with ORC off, none in hundreds. libvips falls back to its C loops.
        libvips.vips_vector_set_enabled(0)
        // One worker per image: see `setThreadsPerImage`.
        libvips.vips_concurrency_set(1)
        // Hostile input is the normal case: untrusted loaders stay off unless asked.
        libvips.vips_block_untrusted_set(1)
        allowJXLSaver()
        // Route libvips' GLib messages away from stderr; count the warnings.
        // Info and debug messages (libvips narrating every thumbnail step)
        // are swallowed without counting: they are not problems.
        let levels = GLogLevelFlags(
            rawValue: G_LOG_LEVEL_WARNING.rawValue | G_LOG_LEVEL_MESSAGE.rawValue
                | G_LOG_LEVEL_INFO.rawValue | G_LOG_LEVEL_DEBUG.rawValue)
        _ = g_log_set_handler(
            "VIPS", levels,
            { _, level, message, _ in
                if level.rawValue & G_LOG_LEVEL_WARNING.rawValue != 0 {
                    VipsRuntime.warnings.add(1, ordering: .relaxed)
                    if let message { VipsRuntime.noteWarning(String(cString: message)) }
                }
            }, nil)
        started.store(true, ordering: .releasing)
        return Startup(failure: nil)
    }()
}
