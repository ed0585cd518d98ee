/// The steps of `ImagePipeline.progressiveImages(for:)`, smallest first.
///
/// Iterate it once. It ends after the final step or throws its error.
/// Ending the iteration early (a `break`, or cancelling the iterating task)
/// or releasing the sequence unread cancels every step in flight.
public struct ProgressiveImages: AsyncSequence, Sendable {
    public typealias Element = ProgressiveImage
    public typealias Failure = any Error

    private let stream: AsyncThrowingStream<Element, any Error>
    private let lifetime: Lifetime

    init(stream: AsyncThrowingStream<Element, any Error>, lifetime: Lifetime) {
        self.stream = stream
        self.lifetime = lifetime
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(base: stream.makeAsyncIterator(), lifetime: lifetime)
    }

    /// Iterates the steps; holding it keeps the pending steps alive.
    public struct Iterator: AsyncIteratorProtocol {
        private var base: AsyncThrowingStream<Element, any Error>.Iterator
        private let lifetime: Lifetime

        init(base: AsyncThrowingStream<Element, any Error>.Iterator, lifetime: Lifetime) {
            self.base = base
            self.lifetime = lifetime
        }

        public mutating func next() async throws -> Element? {
            try await base.next()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(any Error) -> Element? {
            try await base.next(isolation: actor)
        }
    }
}
