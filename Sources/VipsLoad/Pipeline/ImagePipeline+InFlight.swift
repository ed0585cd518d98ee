extension ImagePipeline {
    /// What a pipeline holds in flight right now: its tables and queues.
    ///
    /// All zero once every task has completed or been cancelled and the last
    /// decode thread has returned. A decode whose tasks were all cancelled
    /// while it ran stays in `decodeJobs` (and `runningDecodes`) until its
    /// uninterruptible libvips call returns; its bitmap then goes to the memory
    /// cache, not to the cancelled callers.
    public struct InFlight: Sendable, Hashable, CustomStringConvertible {
        /// Tasks waiting for a result.
        public var tasks: Int
        /// Distinct decodes in flight (identical requests share one).
        public var decodeJobs: Int
        /// Distinct source loads in flight or held for decodes of several sizes.
        public var dataLoads: Int
        /// Decodes waiting for a decode slot.
        public var queuedDecodes: Int
        /// Decodes running on decode threads.
        public var runningDecodes: Int
        /// Data loads waiting for a loading slot.
        public var queuedLoads: Int
        /// Data loads running.
        public var runningLoads: Int

        /// True when the tables hold nothing (a data load cancelled while
        /// running may still be returning).
        public var tablesAreEmpty: Bool { tasks == 0 && decodeJobs == 0 && dataLoads == 0 }
        /// True when nothing at all is in flight.
        public var isIdle: Bool {
            tablesAreEmpty && queuedDecodes == 0 && runningDecodes == 0 && queuedLoads == 0 && runningLoads == 0
        }

        public var description: String {
            "tasks \(tasks), decode jobs \(decodeJobs), data loads \(dataLoads), decodes \(queuedDecodes) queued/"
                + "\(runningDecodes) running, loads \(queuedLoads) queued/\(runningLoads) running"
        }
    }
}
