/// Runs `onEnd` when released: tells a result sequence that nobody can
/// iterate it any more.
///
/// An `AsyncStream` reports its end only once both the stream and its
/// continuation are gone, and the continuation lives on in the completion
/// handlers of the tasks it waits for; so breaking out of a `for await` loop
/// alone would leave those tasks running. The sequence and its iterator hold
/// this object instead, and it cancels them.
final class Lifetime: Sendable {
    private let onEnd: @Sendable () -> Void

    init(onEnd: @escaping @Sendable () -> Void) {
        self.onEnd = onEnd
    }

    deinit {
        onEnd()
    }
}
