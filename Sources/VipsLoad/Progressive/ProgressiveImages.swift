/// The steps of `ImagePipeline.progressiveImages(for:)`, smallest first.
///
/// Iterate it once. It ends after the final step or throws its `VipsError`.
/// Ending the iteration early (a `break`, or cancelling the iterating task)
/// or releasing the sequence unread cancels every step in flight.
public struct ProgressiveImages: AsyncSequence, Sendable {
    public typealias Element = ProgressiveImage
    public typealias Failure = VipsError

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

        /// The next step, nil after the last; throws the last step's failure.
        public mutating func next() async throws(VipsError) -> Element? {
            do { return try await base.next() } catch { throw VipsError.from(error) }
        }

        /// The next step, on the caller's actor.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(VipsError) -> Element? {
            do { return try await base.next(isolation: actor) } catch { throw VipsError.from(error) }
        }
    }
}
