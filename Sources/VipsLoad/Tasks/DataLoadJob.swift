/// One call to the data loader, shared by every decode job of the same
/// source (whatever their sizes) while it loads, and while any of them still
/// decodes its result.
///
/// Owned by `JobGraph` and changed only under its lock.
struct DataLoadJob {
    enum Stage {
        /// In the data-loading queue as `item`.
        case queued(item: WorkQueue.ItemID)
        /// The loader is running.
        case loading
        /// Loaded; kept while `users` > 0 so further sizes skip the load.
        case loaded(ImageData)
    }

    /// Distinguishes this load from a later one for the same source.
    let id: Int
    let source: ImageSource
    /// Cancels the loader's Swift task.
    let handle: LoadHandle
    /// Decode jobs waiting for the data, in arrival order.
    var waiting: [ImageCacheKey]
    /// Decode jobs holding the loaded data until they finish.
    var users = 0
    /// The highest priority among the waiting jobs.
    var priority: ImageRequest.Priority
    var stage: Stage
}
