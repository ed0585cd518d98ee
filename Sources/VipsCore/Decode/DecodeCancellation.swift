import CVipsShim
import Dispatch

/// Stops decodes cooperatively: `cancel()` from any thread, or a time limit
/// given to `run(timeLimit:_:)`, makes the decodes running inside `run` give
/// up at the next point libvips allows, throwing `.cancelled` or `.timedOut`.
///
/// ```swift
/// let cancellation = DecodeCancellation()
/// let bitmap = try cancellation.run(timeLimit: .seconds(5)) {
///     try decoder.decode(input, size: .fit(width: 256, height: 256))
/// }
/// // elsewhere, on any thread: cancellation.cancel()
/// ```
///
/// How it stops a decode: every libvips image the decode makes is marked
/// killed (`vips_image_set_kill`), so the next region libvips computes for it
/// fails, and the decode checks between the strips it copies out (the direct
/// PNG path between the rows it reads). Both happen
/// many times per image, so a decode of a large image stops within a few
/// milliseconds of work.
///
/// What cannot be interrupted: a call into a codec that does all its work at
/// once. That is the direct libjpeg-turbo and libwebp paths (bounded by `DecodeLimits`;
/// tens of milliseconds at the default limit), header parsing, and loaders
/// that decode the whole image in one call (GIF, HEIF/AVIF through libheif,
/// interlaced PNG, SVG and PDF rendering, JPEG 2000 tiles). Such a call runs
/// to its end; its result is then thrown away and `run` throws. A loader that
/// never returns (a hang inside librsvg or OpenJPEG) keeps its thread: only a
/// separate process can be killed (the `vipsload` CLI's `--isolate`).
///
/// A cancellation may be used for several runs, one after another or at
/// once on several threads; once cancelled or timed out it stays so. A run
/// inside another cancellation's run stops when either does.
public final class DecodeCancellation: Sendable {
    /// A libvips image a running decode made, held weakly: killing it is
    /// only useful while the decode still holds it.
    private struct Watched {
        weak var image: VipsImageHandle?
    }

    /// A cancellation whose `run` started inside one of this one's, held weakly.
    private struct Child {
        weak var cancellation: DecodeCancellation?
    }

    private struct State {
        /// Why decodes stop: `.cancelled` or `.timedOut`; nil while they may run.
        var reason: VipsError.Kind?
        var message = ""
        var watched: [Watched] = []
        /// Stopped with this one (a `run` nested in this one's `run`).
        var children: [Child] = []
    }

    private let state = LockedState(State())

    /// The cancellation of the `run` this thread is inside, if any.
    @TaskLocal static var active: DecodeCancellation?

    /// A cancellation that has not been cancelled.
    public init() {}

    /// Stops every decode running inside `run` now, and every later one.
    public func cancel() {
        stop(.cancelled, "the decode was cancelled")
    }

    /// Whether `cancel()` was called or a time limit passed.
    public var isCancelled: Bool { state.withLock { $0.reason != nil } }

    /// Runs `body` (decodes on this thread) so that `cancel()` or, when given,
    /// `timeLimit` stops it at the next point it can.
    ///
    /// - Throws: `.cancelled` once cancelled, `.timedOut` once `timeLimit` has
    ///   passed (even when `body` had finished its last uninterruptible step
    ///   by then), `.invalidArgument` for a time limit that is not positive,
    ///   and otherwise whatever `body` throws.
    public func run<T>(timeLimit: Duration? = nil, _ body: () throws(VipsError) -> T) throws(VipsError) -> T {
        var timer: DispatchWorkItem?
        if let timeLimit {
            guard timeLimit > .zero else {
                throw VipsError(.invalidArgument, "a decode time limit must be positive, not \(timeLimit)")
            }
            let item = DispatchWorkItem { [weak self] in
                self?.stop(.timedOut, "the decode took longer than its time limit of \(timeLimit)")
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeLimit.dispatchInterval, execute: item)
            timer = item
        }
        defer { timer?.cancel() }
        // Nested in another cancellation's run: stopping that one stops this one too.
        if let outer = Self.active, outer !== self { outer.adopt(self) }
        try check()
        let result = Self.$active.withValue(self) { Result { () throws(VipsError) -> T in try body() } }
        if let stopped = stopped() {
            // A killed image leaves libvips' "killed for image" text behind.
            VipsRuntime.discardErrorMessages()
            // The decode's own stop says how far it had come.
            if case .failure(let error) = result, error.kind == stopped.kind { throw error }
            throw stopped
        }
        return try result.get()
    }

    // MARK: - Inside a decode

    /// Throws when decodes must stop; `progress` (such as "after 64 of 256
    /// rows") tells how far this one came.
    func check(progress: @autoclosure () -> String? = nil) throws(VipsError) {
        guard let stopped = stopped() else { return }
        guard let progress = progress() else { throw stopped }
        throw VipsError(stopped.kind, "\(stopped.message), \(progress)")
    }

    /// Marks `image` so that it is killed when decodes must stop (at once if they must already).
    func watch(_ image: VipsImageHandle) {
        let stopping = state.withLock { state -> Bool in
            guard state.reason == nil else { return true }
            state.watched.removeAll { $0.image == nil }
            state.watched.append(Watched(image: image))
            return false
        }
        if stopping { libvips.vips_image_set_kill(image.pointer, 1) }
    }

    /// Live libvips images of the decodes running inside `run` (for tests).
    var watchedImageCount: Int { state.withLock { $0.watched.filter { $0.image != nil }.count } }

    /// Stops `child` whenever this one stops (at once if it has).
    private func adopt(_ child: DecodeCancellation) {
        let stopped = state.withLock { state -> (VipsError.Kind, String)? in
            if let reason = state.reason { return (reason, state.message) }
            state.children.removeAll { $0.cancellation == nil }
            state.children.append(Child(cancellation: child))
            return nil
        }
        if let (reason, message) = stopped { child.stop(reason, message) }
    }

    private func stopped() -> VipsError? {
        state.withLock { state in state.reason.map { VipsError($0, state.message) } }
    }

    private func stop(_ reason: VipsError.Kind, _ message: String) {
        let (images, children) = state.withLock { state -> ([VipsImageHandle], [DecodeCancellation]) in
            guard state.reason == nil else { return ([], []) }
            state.reason = reason
            state.message = message
            defer {
                state.watched = []
                state.children = []
            }
            return (state.watched.compactMap(\.image), state.children.compactMap(\.cancellation))
        }
        // libvips reads the flag at every region it computes; setting it from
        // another thread is what it is for.
        for image in images { libvips.vips_image_set_kill(image.pointer, 1) }
        for child in children { child.stop(reason, message) }
    }
}
