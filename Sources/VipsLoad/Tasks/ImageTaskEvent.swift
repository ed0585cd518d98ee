extension ImageTask {
    /// What an `ImageTask` reports through `events`.
    public enum Event: Sendable {
        /// Body bytes of the task's download received so far, and the body's
        /// length when the response declares it (nil for a chunked body).
        case progress(completed: Int, total: Int?)
        /// A preview of the image while its download streams, decoded from
        /// the scans received so far of a progressive JPEG, at the request's
        /// size and through its processors like the final image; only for a
        /// request with `ImageRequest.Options.progressivePreviews`. Never
        /// after `finished`, never smaller than an earlier preview, never cached.
        case preview(Bitmap)
        /// The result was served from a cache instead of being loaded.
        case cacheHit(CacheHit)
        /// The task completed with this outcome; the last event.
        case finished(Result<Bitmap, VipsError>)
    }

    /// Which cache served a task.
    public enum CacheHit: Sendable, Hashable {
        /// The memory cache: the bitmap itself.
        case memory
        /// The data cache: stored bytes, decoded without loading them.
        case disk
    }

    /// A snapshot of a download's progress.
    public struct Progress: Sendable, Hashable {
        /// Body bytes received.
        public let completed: Int
        /// The body's declared length; nil when unknown.
        public let total: Int?

        /// A snapshot of `completed` bytes out of `total`.
        public init(completed: Int, total: Int?) {
            self.completed = completed
            self.total = total
        }

        /// `completed` / `total`, when the total is known and not zero.
        public var fraction: Double? {
            guard let total, total > 0 else { return nil }
            return min(1, Double(completed) / Double(total))
        }
    }
}
