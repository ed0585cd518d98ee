/// The results of `ImagePipeline.images(for:)`, each with its request's
/// index, in the order they complete.
///
/// Iterate it once. Ending the iteration early (a `break`, or cancelling the
/// iterating task) or releasing the sequence unread cancels the requests
/// still in flight.
public struct ImageBatch: AsyncSequence, Sendable {
    public typealias Element = ImagePipeline.BatchResult
    public typealias Failure = Never

    private let stream: AsyncStream<Element>
    private let lifetime: Lifetime

    init(stream: AsyncStream<Element>, lifetime: Lifetime) {
        self.stream = stream
        self.lifetime = lifetime
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(base: stream.makeAsyncIterator(), lifetime: lifetime)
    }

    /// Iterates the results; holding it keeps the batch's requests alive.
    public struct Iterator: AsyncIteratorProtocol {
        private var base: AsyncStream<Element>.Iterator
        private let lifetime: Lifetime

        init(base: AsyncStream<Element>.Iterator, lifetime: Lifetime) {
            self.base = base
            self.lifetime = lifetime
        }

        public mutating func next() async -> Element? {
            await base.next()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> Element? {
            await base.next(isolation: actor)
        }
    }
}
