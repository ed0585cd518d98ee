import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One HTTP attempt: a `URLSession` data task whose body is written to a file
/// as it arrives, checked against the limits while it streams, and turned
/// into exactly one outcome or error for the awaiting caller.
final class HTTPTransfer: Sendable {
    /// A completed attempt.
    enum Outcome: Sendable {
        /// A 2xx body, complete, in `file` (closed by the caller).
        case body(response: HTTPURLResponse, file: StreamingFileWriter, sink: Sink)
        /// `304 Not Modified` to a conditional request.
        case notModified(response: HTTPURLResponse, receivedAt: Date)
    }

    /// Where a body goes, chosen when the response head arrives.
    struct Sink: Sendable {
        let file: StreamingFileWriter
        /// The data-cache entry `file` belongs to and the metadata to commit
        /// it with, when the body is to be stored there.
        let cacheEntry: (writer: ImageDataCacheWriter, http: HTTPCacheMetadata)?
        /// For a disk-cache sink: makes the uncached file the body moves to
        /// when the cache's file system refuses a write (full, read-only,
        /// folder deleted), so a cache fault does not cost the download.
        var fallback: (@Sendable () throws(VipsError) -> StreamingFileWriter)? = nil

        /// The body moved to the fallback file: the bytes written so far are
        /// copied over and the cache file deleted. Throws `writeError` when
        /// there is no fallback, or the fallback's own error.
        func relocated(after writeError: VipsError) throws(VipsError) -> Sink {
            guard let fallback else { throw writeError }
            let replacement = try fallback()
            do throws(VipsError) {
                try file.copyWritten(to: replacement)
            } catch {
                replacement.discard()
                throw error
            }
            file.discard()
            return Sink(file: replacement, cacheEntry: nil)
        }
    }

    /// What ended an attempt, with what the retry policy needs to know.
    struct Failure: Error {
        let error: VipsError
        let isTransient: Bool
        var retryAfter: TimeInterval? = nil
    }

    struct Limits: Sendable {
        let maxBodyBytes: Int
        let maxRedirects: Int
        let requestTimeout: TimeInterval
        let resourceTimeout: TimeInterval
        /// Checked again for every redirect's target.
        var addressPolicy: SourceAddressPolicy = .unrestricted
    }

    typealias SinkFactory = @Sendable (HTTPURLResponse, Date) throws(VipsError) -> Sink
    /// Told the body bytes received so far and the body's length when the
    /// response declares it (nil for a chunked or close-delimited body, or a
    /// content coding); called on the delegate queue, under no lock.
    typealias Progress = @Sendable (_ completed: Int, _ total: Int?) -> Void

    private struct State {
        var continuation: CheckedContinuation<Void, Never>?
        /// The attempt's result, handed to the awaiting caller through this
        /// locked state (the caller is woken without a value and collects it).
        var result: Result<Outcome, any Error>?
        var finished = false
        var task: URLSessionDataTask?
        var response: HTTPURLResponse?
        var sink: Sink?
        var received = 0
        var redirects = 0
        var timer: Task<Void, Never>?
        /// Why a redirect was refused, noted before the refusal is answered: the 3xx
        /// response and the completion may then reach the delegate before `finish` is called with it.
        var redirectRefusal: VipsError?
    }

    private let request: URLRequest
    private let conditional: Bool
    private let limits: Limits
    private let makeSink: SinkFactory
    private let progress: Progress?
    private let state = LockedState(State())
    /// Whether the network task is being cancelled. Its lock serialises the
    /// redirect decision with cancelling (see `redirect(to:decide:)`).
    /// An exception to the rule that no outside code runs under a lock, kept
    /// for a FoundationNetworking bug: its redirect answer and the task's
    /// cancellation must not interleave, so both run under this lock (ranked
    /// below `state`, which it takes inside). Remove once cancelling during a
    /// redirect decision no longer crashes FoundationNetworking.
    private let cancelRequested = LockedState(false, rank: .queue)
    /// The URL in messages, without its credentials.
    private let label: String

    init(
        request: URLRequest, conditional: Bool, limits: Limits, progress: Progress? = nil,
        makeSink: @escaping SinkFactory
    ) {
        self.progress = progress
        self.request = request
        label = request.url.map(URLRedaction.redacted) ?? "request"
        self.conditional = conditional
        self.limits = limits
        self.makeSink = makeSink
    }

    /// Runs the attempt; throws `Failure`, or `CancellationError` when the
    /// calling task is cancelled (which cancels the network task at once).
    func run(in session: URLSession, delegate: HTTPSessionDelegate) async throws -> Outcome {
        try await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let task = session.dataTask(with: request)
                // The whole-transfer deadline (URLSession's own timeout only bounds idle gaps).
                let timer = Task { [self] in
                    guard (try? await Task.sleep(nanoseconds: UInt64(limits.resourceTimeout * 1e9))) != nil else {
                        return
                    }
                    finish(
                        .failure(
                            Failure(
                                error: VipsError(
                                    .timedOut, "\(label): no complete response within \(limits.resourceTimeout) s"),
                                isTransient: true)), cancellingTask: true)
                }
                // Registered first: once stored below, a cancellation may complete the task at any moment.
                delegate.register(self, for: task)
                let started = state.withLock { state -> Bool in
                    guard !state.finished else { return false }
                    state.continuation = continuation
                    state.task = task
                    state.timer = timer
                    return true
                }
                guard started else {
                    delegate.unregister(task)
                    timer.cancel()
                    continuation.resume()
                    return
                }
                task.resume()
            }
            // Taken under the lock that `finish` stored it under.
            return try state.withLock { state -> Result<Outcome, any Error> in
                defer { state.result = nil }
                return state.result ?? .failure(CancellationError())
            }.get()
        } onCancel: {
            finish(.failure(CancellationError()), cancellingTask: true)
        }
    }

    // MARK: - Delegate events (serial, on the session's delegate queue)

    func receive(response: URLResponse, decide: @Sendable (URLSession.ResponseDisposition) -> Void) {
        var failure: Failure?
        var sink: Sink?
        if let http = response as? HTTPURLResponse {
            let status = http.statusCode
            // FoundationNetworking reports each interim (1xx) response, such as
            // `103 Early Hints` or an unrequested `100 Continue`, as a response
            // of its own before the final one; clients must skip them (RFC 9110
            // §15.2). `101 Switching Protocols` is not interim: no upgrade was asked for.
            if (100..<200).contains(status), status != 101 {
                decide(.allow)
                return
            }
            if status == 304, conditional {
                decide(.cancel)
                finish(.success(.notModified(response: http, receivedAt: Date())), cancellingTask: true)
                return
            }
            if !(200..<300).contains(status) || status == 206 {
                let retryAfter = http.value(forHTTPHeaderField: "Retry-After").flatMap(Self.parseRetryAfter)
                failure = Failure(
                    error: VipsError(.httpStatus, "HTTP \(status) for \(label)", httpStatus: status),
                    isTransient: HTTPRetryPolicy.isTransient(status: status), retryAfter: retryAfter)
            } else if let problem = Self.contentLengthProblem(http) {
                failure = Failure(error: VipsError(.protocolError, "\(label): \(problem)"), isTransient: false)
            } else if http.expectedContentLength > Int64(limits.maxBodyBytes) {
                failure = Failure(
                    error: VipsError(
                        .tooLarge,
                        "\(label): Content-Length \(http.expectedContentLength) exceeds the limit of \(limits.maxBodyBytes) bytes"
                    ),
                    isTransient: false)
            } else {
                do throws(VipsError) {
                    sink = try makeSink(http, Date())
                } catch {
                    failure = Failure(error: about(error), isTransient: false)
                }
            }
            if failure == nil {
                let accepted = state.withLock { state -> Bool in
                    guard !state.finished else { return false }
                    state.response = http
                    state.sink = sink
                    return true
                }
                if accepted {
                    decide(.allow)
                    return
                }
                sink?.file.discard()
                decide(.cancel)
                return
            }
        } else {
            failure = Failure(error: VipsError(.protocolError, "\(label): not an HTTP response"), isTransient: false)
        }
        // FoundationNetworking ignores a `.cancel` disposition, so the task is cancelled as well.
        decide(.cancel)
        if let failure { finish(.failure(failure), cancellingTask: true) }
    }

    func receive(data: Data) {
        let target = state.withLock { state -> (sink: Sink?, total: Int, response: HTTPURLResponse?) in
            guard !state.finished, let sink = state.sink else { return (nil, 0, nil) }
            state.received += data.count
            return (sink, state.received, state.response)
        }
        guard let sink = target.sink else { return }
        if target.total > limits.maxBodyBytes {
            finish(
                .failure(
                    Failure(
                        error: VipsError(.tooLarge, "\(label): body exceeds the limit of \(limits.maxBodyBytes) bytes"),
                        isTransient: false)), cancellingTask: true)
            return
        }
        do throws(VipsError) {
            try sink.file.write(data)
        } catch {
            // Events are serial: no other chunk is written while the body moves.
            do throws(VipsError) {
                let moved = try sink.relocated(after: error)
                try moved.file.write(data)
                let current = state.withLock { state -> Bool in
                    guard !state.finished else { return false }
                    state.sink = moved
                    return true
                }
                if !current { moved.file.discard() }
            } catch {
                finish(
                    .failure(Failure(error: about(error), isTransient: false)), cancellingTask: true)
                return
            }
        }
        if let progress, let response = target.response {
            let encoding = response.value(forHTTPHeaderField: "Content-Encoding")?.lowercased() ?? "identity"
            let expected = response.expectedContentLength
            progress(target.total, expected >= 0 && encoding == "identity" ? Int(expected) : nil)
        }
    }

    /// Follows a redirect or refuses it.
    ///
    /// FoundationNetworking crashes when a task is cancelled between asking
    /// about a redirect and hearing the answer, so the answer is given under
    /// the same lock `cancelTask` takes, and not at all once the task is being
    /// cancelled (the cancellation completes it).
    ///
    /// The target is checked in the raw `Location` of `response` too:
    /// FoundationNetworking resolves a `Location` without a host (`file:///x`,
    /// `data:…`) against the original scheme and host, so `newRequest` alone
    /// would turn `file:///etc/passwd` into `http://host/etc/passwd`.
    ///
    /// Under an address policy other than `.unrestricted` the target's host is
    /// resolved first, off the delegate queue (a DNS lookup must not stall every
    /// transfer's events), and the answer is given when it is known.
    func redirect(
        from response: HTTPURLResponse, to newRequest: URLRequest, decide: @escaping @Sendable (URLRequest?) -> Void
    ) {
        let location = response.value(forHTTPHeaderField: "Location")
        let scheme = location.flatMap(Self.scheme(ofReference:)) ?? newRequest.url?.scheme?.lowercased()
        let target = URLRedaction.redacted(location ?? newRequest.url?.absoluteString ?? "nothing")
        let policy = limits.addressPolicy
        guard !policy.isUnrestricted, scheme == "http" || scheme == "https", let url = newRequest.url else {
            answerRedirect(to: newRequest, scheme: scheme, target: target, addressRefusal: nil, decide: decide)
            return
        }
        Task { [self] in
            var refusal: VipsError?
            do throws(VipsError) {
                try await policy.check(url)
            } catch {
                refusal = VipsError(error.kind, "redirect refused: \(error.message)", source: label, underlying: error)
            }
            answerRedirect(to: newRequest, scheme: scheme, target: target, addressRefusal: refusal, decide: decide)
        }
    }

    private func answerRedirect(
        to newRequest: URLRequest, scheme: String?, target: String, addressRefusal: VipsError?,
        decide: @Sendable (URLRequest?) -> Void
    ) {
        let refusal = cancelRequested.withLock { cancelling -> VipsError?? in
            let (finished, redirects) = state.withLock { state -> (Bool, Int) in
                state.redirects += 1
                return (state.finished, state.redirects)
            }
            if cancelling || finished { return .some(nil) }
            var refusal = addressRefusal
            if scheme != "http" && scheme != "https" {
                refusal = VipsError(
                    .redirectRefused, "\(label): redirect to \(target) refused: only http and https are followed")
            } else if redirects > limits.maxRedirects {
                refusal = VipsError(.redirectRefused, "\(label): more than \(limits.maxRedirects) redirects")
            }
            guard let refusal else {
                decide(newRequest)
                return nil
            }
            state.withLock { $0.redirectRefusal = refusal }
            decide(nil)
            return refusal
        }
        // A refused redirect completes the task with the 3xx response: no cancel needed.
        if case .some(.some(let error)) = refusal {
            finish(.failure(Failure(error: error, isTransient: false)), cancellingTask: false)
        }
    }

    /// The task ended; `taskResponse` is the task's last response, which
    /// FoundationNetworking never hands to the delegate for a redirect status
    /// it could not follow (a `302` without `Location`).
    func complete(error: (any Error)?, taskResponse: URLResponse?) {
        if let error {
            let headerSeen = state.withLock { $0.response != nil }
            finish(
                .failure(Self.failure(for: error, label: label, limits: limits, headerSeen: headerSeen)),
                cancellingTask: false)
            return
        }
        let (response, sink, received) = state.withLock { ($0.response, $0.sink, $0.received) }
        guard let response, let sink else {
            if let http = taskResponse as? HTTPURLResponse, !(100..<300).contains(http.statusCode) {
                let status = http.statusCode
                let detail =
                    (300..<400).contains(status) && http.value(forHTTPHeaderField: "Location") == nil
                    ? " without a Location" : ""
                finish(
                    .failure(
                        Failure(
                            error: VipsError(.httpStatus, "HTTP \(status)\(detail) for \(label)", httpStatus: status),
                            isTransient: HTTPRetryPolicy.isTransient(status: status))),
                    cancellingTask: false)
                return
            }
            let interim = (taskResponse as? HTTPURLResponse).map { " after an interim \($0.statusCode) response" } ?? ""
            finish(
                .failure(
                    Failure(
                        error: VipsError(
                            .network,
                            "\(label): the connection closed without a\(interim.isEmpty ? "" : " final") response\(interim)"
                        ),
                        isTransient: true)),
                cancellingTask: false)
            return
        }
        let expected = response.expectedContentLength
        let encoding = response.value(forHTTPHeaderField: "Content-Encoding")?.lowercased() ?? "identity"
        // With a content coding the declared length is the encoded one; the transport checks it then.
        if expected >= 0, encoding == "identity", Int64(received) != expected {
            finish(
                .failure(
                    Failure(
                        error: VipsError(.incompleteBody, "\(label): received \(received) of \(expected) bytes"),
                        isTransient: true)),
                cancellingTask: false)
            return
        }
        guard received > 0 else {
            finish(
                .failure(
                    Failure(
                        error: VipsError(.emptyInput, "HTTP \(response.statusCode) for \(label) has an empty body"),
                        isTransient: false)),
                cancellingTask: false)
            return
        }
        var delivered = sink
        if sink.fallback != nil, sink.file.isUnlinked {
            // The cache folder was deleted while the body streamed into it:
            // the bytes survive only in the open file, so they move out.
            do throws(VipsError) {
                delivered = try sink.relocated(
                    after: VipsError(.io, "the cache folder was deleted while the body was written", source: label))
            } catch {
                finish(
                    .failure(Failure(error: about(error), isTransient: false)), cancellingTask: false)
                return
            }
            let current = state.withLock { state -> Bool in
                guard !state.finished else { return false }
                state.sink = delivered
                return true
            }
            if !current { delivered.file.discard() }
        }
        finish(.success(.body(response: response, file: delivered.file, sink: delivered)), cancellingTask: false)
    }

    // MARK: - Ending

    /// Delivers the first outcome; later ones are ignored. A failure deletes
    /// the partial file; with `cancellingTask`, the network task is cancelled.
    private func finish(_ outcome: Result<Outcome, any Error>, cancellingTask: Bool) {
        var result = outcome
        let (first, continuation, sink, timer) = state.withLock {
            state -> (Bool, CheckedContinuation<Void, Never>?, Sink?, Task<Void, Never>?) in
            guard !state.finished else { return (false, nil, nil, nil) }
            state.finished = true
            defer { state.continuation = nil; state.timer = nil }
            // After a refused redirect, whatever ends the task (the 3xx handed on as the response,
            // the completion) ends it with the refusal.
            if let refusal = state.redirectRefusal { result = .failure(Failure(error: refusal, isTransient: false)) }
            state.result = result
            return (true, state.continuation, state.sink, state.timer)
        }
        guard first else { return }
        timer?.cancel()
        if case .failure = result { sink?.file.discard() }
        if cancellingTask {
            // Never from the caller's thread: a cancellation handler runs under
            // the Swift task's status lock, and URLSessionTask.cancel() waits for
            // the session's work queue (the deadlock of swift-corelibs-foundation #5412).
            DispatchQueue.global().async { [self] in cancelTask() }
        }
        continuation?.resume()
    }

    /// Cancels the network task, serialised with the redirect decision.
    private func cancelTask() {
        let task = state.withLock { $0.task }
        cancelRequested.withLock { cancelling in
            guard !cancelling else { return }
            cancelling = true
            task?.cancel()
        }
    }

    /// `error` as an error about this download: it names the URL, never the
    /// download's temporary file (whose errors are about its path, so they
    /// are addressed to the URL instead; the file is gone once the error is seen).
    private func about(_ error: VipsError) -> VipsError {
        error.about(label)
    }

    /// Why the `Content-Length` of `response` cannot be trusted, or nil when
    /// it can (or there is none). Two different values (in two fields, or a
    /// list in one) are an unrecoverable framing error (RFC 9112 §6.3); a
    /// list of one value repeated is accepted. With a `Transfer-Encoding` the
    /// length is ignored, so it is not checked.
    static func contentLengthProblem(_ response: HTTPURLResponse) -> String? {
        var values: [String] = []
        var transferEncoded = false
        for (name, value) in response.allHeaderFields {
            guard let name = name as? String, let value = value as? String else { continue }
            switch name.lowercased() {
            case "content-length":
                values += value.split(separator: ",", omittingEmptySubsequences: false)
                    .map { $0.trimmingCharacters(in: .whitespaces) }
            case "transfer-encoding":
                transferEncoded = true
            default:
                break
            }
        }
        guard !values.isEmpty, !transferEncoded else { return nil }
        if let bad = values.first(where: { $0.isEmpty || !$0.allSatisfy({ $0.isASCII && $0.isNumber }) }) {
            return "invalid Content-Length \"\(bad)\""
        }
        let distinct = Set(values.map { $0.drop { $0 == "0" } })
        guard distinct.count == 1 else {
            return "conflicting Content-Length values (\(values.joined(separator: ", "))); the body's end is unknown"
        }
        return nil
    }

    /// The scheme of a URI reference (RFC 3986 §3.1), lowercased; nil for a
    /// relative reference (`/a`, `b.jpg`, `//host/c`).
    static func scheme(ofReference reference: String) -> String? {
        let trimmed = reference.trimmingCharacters(in: .whitespaces)
        guard let colon = trimmed.firstIndex(of: ":") else { return nil }
        let candidate = trimmed[..<colon]
        guard let first = candidate.first, first.isASCII, first.isLetter,
            candidate.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == ".") })
        else {
            return nil
        }
        return candidate.lowercased()
    }

    /// Maps a transport error to a typed failure; `headerSeen` tells whether
    /// the response's head had arrived.
    static func failure(for error: any Error, label: String, limits: Limits, headerSeen: Bool) -> Failure {
        let nsError = error as NSError
        let reason = (nsError.userInfo[NSLocalizedDescriptionKey] as? String) ?? "error \(nsError.code)"
        guard nsError.domain == NSURLErrorDomain else {
            return Failure(error: VipsError(.network, "\(label): \(reason)"), isTransient: true)
        }
        switch nsError.code {
        case NSURLErrorTimedOut:
            return Failure(
                error: VipsError(.timedOut, "\(label): no data for \(limits.requestTimeout) s"), isTransient: true)
        case NSURLErrorNetworkConnectionLost:
            return Failure(error: VipsError(.network, "\(label): connection lost: \(reason)"), isTransient: true)
        case NSURLErrorBadURL, NSURLErrorUnsupportedURL:
            // libcurl's "Received HTTP/0.9 when not allowed": bytes that are not an HTTP response.
            if reason.contains("HTTP/0.9") {
                return Failure(
                    error: VipsError(
                        .protocolError, "\(label): the server's answer is not an HTTP response (\(reason))"),
                    isTransient: false)
            }
            return Failure(error: VipsError(.invalidArgument, "\(label): \(reason)"), isTransient: false)
        case NSURLErrorHTTPTooManyRedirects:
            return Failure(error: VipsError(.redirectRefused, "\(label): \(reason)"), isTransient: false)
        default:
            // libcurl refuses a header line over 100 KiB (CURL_MAX_HTTP_HEADER) with
            // its out-of-memory error; before the head is complete, that is what it means.
            if !headerSeen, reason == "Out of memory" {
                return Failure(
                    error: VipsError(
                        .tooLarge,
                        "\(label): the response header is too large (libcurl accepts header lines up to 100 KiB)"),
                    isTransient: false)
            }
            // libcurl reports a body shorter than its Content-Length as
            // "transfer closed with N bytes remaining to read".
            if reason.contains("remaining to read") || reason.lowercased().contains("partial") {
                return Failure(error: VipsError(.incompleteBody, "\(label): \(reason)"), isTransient: true)
            }
            return Failure(error: VipsError(.network, "\(label): \(reason)"), isTransient: true)
        }
    }

    /// `Retry-After`: delay seconds or an HTTP date.
    static func parseRetryAfter(_ value: String) -> TimeInterval? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let seconds = TimeInterval(trimmed) { return max(0, seconds) }
        return HTTPDate.parse(trimmed).map { max(0, $0.timeIntervalSinceNow) }
    }
}
