import Foundation

/// The previews of one task whose request asks for them
/// (`ImageRequest.Options.progressivePreviews`): told of each piece of its
/// download's body (the file the body streams into and its length so far),
/// it decides when a preview is due and decodes it on the decode lane.
///
/// - Due when no preview job of the task is queued or running, more bytes
///   have arrived than the last look saw, and `previewInterval` has passed
///   since the last preview (a look that found no new scan waits a fifth of it).
/// - The job, at `.veryLow` priority so it waits behind final decodes, reads
///   the body so far and keeps its complete progressive-JPEG scans
///   (`ProgressiveJPEGScans`); with more scans than the last preview, it
///   decodes them leniently (whatever the pipeline's strictness: a preview
///   is a partial image by nature) at the request's size, mode and scale,
///   runs the request's processors, and hands the bitmap to the task, which
///   shows it only while it has no outcome and when it is not smaller than
///   an earlier preview.
/// - Nothing is cached: the bitmap goes to the task only.
///
/// Decisions are made under the feed's lock; reading, decoding and
/// delivering happen after it.
final class PreviewFeed: Sendable {
    private struct State {
        var jobPending = false
        var lastPreview: ContinuousClock.Instant?
        var lastLook: ContinuousClock.Instant?
        /// Body bytes the last look read.
        var looked = 0
        /// Scans in the last preview shown.
        var scansShown = 0
    }

    /// Weak: a job queued on the engine's own decode lane must not keep the engine alive.
    private weak let engine: PipelineEngine?
    private let request: ImageRequest
    private let state = LockedState(State(), rank: .task)

    init(engine: PipelineEngine, request: ImageRequest) {
        self.engine = engine
        self.request = request
    }

    /// The body of `task`'s download has `completed` bytes in `file` now.
    func offer(_ file: String, completed: Int, for task: ImageTask) {
        guard let engine else { return }
        let now = ContinuousClock.now
        let interval = engine.previewInterval
        let due = state.withLock { state -> Bool in
            guard !state.jobPending, completed > state.looked else { return false }
            if let last = state.lastPreview, now - last < interval { return false }
            if let look = state.lastLook, now - look < interval / 5 { return false }
            state.jobPending = true
            state.lastLook = now
            return true
        }
        guard due else { return }
        let pool = engine.decodePool
        pool.enqueue(pool.reserveID(), priority: .veryLow) { [weak task, self] in
            defer { state.withLock { $0.jobPending = false } }
            guard let task, task.isRunning else { return }
            if let preview = makePreview(file, completed: completed) { task.deliverPreview(preview) }
        }
    }

    /// The preview of the body's first `completed` bytes, or nil when they
    /// hold no scan beyond the last preview's (or cannot be read or decoded).
    private func makePreview(_ file: String, completed: Int) -> Bitmap? {
        guard let engine, let received = Self.read(file, count: completed) else { return nil }
        guard let scans = ProgressiveJPEGScans.preview(of: received) else {
            state.withLock { $0.looked = completed }
            return nil
        }
        let fresh = state.withLock { state -> Bool in
            state.looked = completed
            return scans.scans > state.scansShown
        }
        guard fresh else { return nil }
        var decoder = engine.decoder
        decoder.options.strict = false
        decoder.inputName = request.source.description
        let decoded = try? request.decode(
            .data(scans.data), with: decoder, allowUpscale: request.options.contains(.allowUpscale))
        guard var bitmap = decoded else { return nil }
        if !request.processors.isEmpty {
            guard let processed = try? ImageProcessors.Composition(request.processors).process(bitmap) else {
                return nil
            }
            bitmap = processed
        }
        state.withLock { state in
            state.scansShown = scans.scans
            state.lastPreview = ContinuousClock.now
        }
        return bitmap.tagged(request.scale)
    }

    /// The first `count` bytes of `path`; nil when it is gone (the download
    /// ended and moved or removed it) or shorter.
    private static func read(_ path: String, count: Int) -> Data? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var data = Data(count: count)
        var offset = 0
        let complete = data.withUnsafeMutableBytes { buffer -> Bool in
            guard let base = buffer.baseAddress else { return false }
            while offset < count {
                let n = pread(fd, base + offset, count - offset, off_t(offset))
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { return false }
                offset += n
            }
            return true
        }
        return complete ? data : nil
    }
}
