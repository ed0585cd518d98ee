/// One decode, or one in-memory downscale, shared by every task that asks
/// for the same cache key while it is in flight.
///
/// Owned by `JobGraph` and changed only under its lock.
struct DecodeJob {
    /// What the job turns into pixels.
    enum Input {
        /// Encoded bytes from the data load `loadID` (which counts this job as a user).
        case data(ImageData, loadID: Int)
        /// A larger cached bitmap of the same source, to be downscaled.
        case bitmap(Bitmap)
    }

    enum Stage {
        /// Subscribed to the data load `loadID`.
        case waitingForData(loadID: Int)
        /// In the decode queue as `item`.
        case queued(item: WorkQueue.ItemID, input: Input)
        /// On a decode thread. The decode cannot be interrupted: when every
        /// task leaves, the job stays (with no tasks) until it finishes, stores
        /// its bitmap in the memory cache for later requests and delivers to no
        /// one; a new request for the key meanwhile joins it.
        case running(input: Input)
    }

    /// Distinguishes this job from a later one for the same key.
    let id: Int
    let key: ImageCacheKey
    /// The first task's request: what to decode (every task shares the pixel box).
    let request: ImageRequest
    /// The tasks waiting for the result, in arrival order.
    var tasks: [ImageTask]
    /// The highest priority among `tasks`.
    var priority: ImageRequest.Priority
    /// Whether the result goes to the memory cache: some task that joined
    /// allows cache writes.
    var writesCache: Bool
    var stage: Stage

    /// Recomputes `priority` from the tasks; true when it changed.
    mutating func updatePriority() -> Bool {
        let highest = tasks.lazy.map(\.priority).max() ?? .veryLow
        guard highest != priority else { return false }
        priority = highest
        return true
    }
}
