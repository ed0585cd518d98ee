import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One HTTP attempt: the decisions about a request that `HTTPTransport`
/// carries out. Its body is written to a file as it arrives, checked against
/// the limits while it streams, and turned into exactly one outcome or error
/// for the awaiting caller.
///
/// The transport's thread calls `receive(head:)`, `receive(body:)` and
/// `complete(_:)` in order for each hop (a redirect is a hop of its own,
/// started only when this type asks for it); any thread may cancel. The
/// first outcome wins; a failure deletes the partial file.
final class HTTPTransfer: Sendable {
    /// A completed attempt.
    enum Outcome: Sendable {
        /// A 2xx body, complete, in `file` (closed by the caller).
        case body(response: HTTPResponseHead, file: StreamingFileWriter, sink: Sink)
        /// `304 Not Modified` to a conditional request.
        case notModified(response: HTTPResponseHead, receivedAt: Date)
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
        /// Whether the attempt ended before any request was sent (the address
        /// policy refused the first connection).
        var sentNothing = false
        /// Whether the server refused the range asked for (`416`): the kept
        /// partial is gone, and the load starts over at once, with no retry counted.
        var startsOver = false
    }

    /// How an attempt takes part in resuming: where a body cut short is kept,
    /// under which key, and the kept partial this attempt continues, if any
    /// (its request then carries `Range: bytes=N-` and `If-Range`).
    struct Resumption: Sendable {
        let store: PartialDownloads
        let key: String
        let partial: PartialDownloads.Partial?
    }

    struct Limits: Sendable {
        let maxBodyBytes: Int
        let maxRedirects: Int
        let requestTimeout: TimeInterval
        let resourceTimeout: TimeInterval
        /// Judges every address the transport connects to, for every hop.
        var addressPolicy: SourceAddressPolicy = .unrestricted
        /// Asked about each redirect's resolved target before it is followed
        /// (the configuration's and the request's); every one must allow it.
        var redirectChecks: [@Sendable (URL) -> Bool] = []
    }

    /// One request as the transport sends it: the URL and the header lines.
    struct Hop: Sendable {
        let url: String
        /// `Name: value` lines.
        let headerLines: [String]
    }

    typealias SinkFactory = @Sendable (HTTPResponseHead, Date) throws(VipsError) -> Sink
    /// Told the body bytes received so far, the body's length when the
    /// response declares it (nil for a chunked or close-delimited body, or a
    /// content coding), and the file the body is written to, whose first
    /// `completed` bytes are the body so far (readable while the transfer
    /// runs; gone once it ends); called on the transport's thread, under no lock.
    typealias Progress = @Sendable (_ completed: Int, _ total: Int?, _ file: String) -> Void

    /// The redirect statuses followed (RFC 9110 §15.4); other 3xx are answers.
    static let redirectStatuses: Set<Int> = [301, 302, 303, 307, 308]
    /// The most body bytes of a redirect response read (and dropped) before
    /// its connection is closed instead of kept for the next hop.
    static let redirectBodyLimit = 64 * 1024

    private struct State {
        var continuation: CheckedContinuation<Void, Never>?
        /// The attempt's result, handed to the awaiting caller through this
        /// locked state (the caller is woken without a value and collects it).
        var result: Result<Outcome, any Error>?
        var finished = false
        /// The request of the hop under way: the first, or a redirect's target.
        var request: URLRequest
        var response: HTTPResponseHead?
        var sink: Sink?
        var received = 0
        var redirects = 0
        /// Set by a redirect's head: the request of the next hop, started when this one ends.
        var redirect: URLRequest?
        /// Bytes of a redirect response's body dropped so far.
        var dropped = 0
        /// The last interim (1xx) status of the hop, for messages.
        var interim: Int?
        /// The whole body's length when known: the declared length, or a 206's total.
        var expected: Int?
        /// The `If-Range` value and total when the response allows resuming
        /// its body (`PartialDownloads.resumability`).
        var resumable: (ifRange: String, total: Int)?
    }

    private let conditional: Bool
    /// The timeouts and limits; the transport reads the timeouts.
    let limits: Limits
    private let makeSink: SinkFactory
    private let progress: Progress?
    private let resumption: Resumption?
    private let state: LockedState<State>
    /// The URL in messages, without its credentials.
    private let label: String

    init(
        request: URLRequest, conditional: Bool, limits: Limits, progress: Progress? = nil,
        resumption: Resumption? = nil, makeSink: @escaping SinkFactory
    ) {
        self.progress = progress
        self.resumption = resumption
        state = LockedState(State(request: request))
        label = request.url.map(URLRedaction.redacted) ?? "request"
        self.conditional = conditional
        self.limits = limits
        self.makeSink = makeSink
    }

    /// Runs the attempt on `transport`; throws `Failure`, or
    /// `CancellationError` when the calling task is cancelled (which stops
    /// the network transfer and deletes its file at once).
    func run(in transport: HTTPTransport) async throws -> Outcome {
        try await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let started = state.withLock { state -> Bool in
                    guard !state.finished else { return false }
                    state.continuation = continuation
                    return true
                }
                guard started else {
                    continuation.resume()
                    return
                }
                if !transport.start(self) {
                    fail(VipsError(.cancelled, "the HTTP loader has stopped", source: label))
                }
            }
            // Taken under the lock that `finish` stored it under.
            return try state.withLock { state -> Result<Outcome, any Error> in
                defer { state.result = nil }
                return state.result ?? .failure(CancellationError())
            }.get()
        } onCancel: {
            if finish(.failure(CancellationError())) { transport.cancel(self) }
        }
    }

    // MARK: - The transport's calls (on its thread, in order for each hop)

    /// Whether the attempt has its outcome already.
    var isFinished: Bool { state.withLock { $0.finished } }

    /// The first request as the transport sends it, or nil when it cannot be
    /// sent (the attempt has then failed).
    func firstHop() -> Hop? {
        hop(for: state.withLock { $0.request })
    }

    /// A response head has arrived: returns whether the hop goes on (its
    /// body is wanted, or drained from a redirect), false to stop it.
    func receive(head: HTTPResponseHead) -> Bool {
        let status = head.statusCode
        // Interim (1xx) responses, such as `103 Early Hints` or an unrequested
        // `100 Continue`, come before the final one; clients skip them (RFC 9110
        // §15.2). `101 Switching Protocols` is not interim: no upgrade was asked for.
        if (100..<200).contains(status), status != 101 {
            return state.withLock { state -> Bool in
                state.interim = status
                return !state.finished
            }
        }
        if status == 304, conditional {
            return finish(.success(.notModified(response: head, receivedAt: Date())))
        }
        if Self.redirectStatuses.contains(status), let location = head.values(of: "Location").first {
            return redirect(to: location)
        }
        var failure: Failure?
        var sink: Sink?
        var resumed: (partial: PartialDownloads.Partial, total: Int)?
        let partial = resumption?.partial
        if partial != nil, let resumption, status != 206 {
            // 200: the validator changed (or Range was ignored): the body starts over.
            // 416 and anything else: the kept bytes are of no use.
            resumption.store.remove(resumption.key)
            if status == 416 {
                finish(
                    .failure(
                        Failure(
                            error: VipsError(
                                .httpStatus, "HTTP 416 for \(label): the range of the kept partial body was refused",
                                httpStatus: 416),
                            isTransient: false, startsOver: true)))
                return false
            }
        }
        if status == 206 {
            switch check206(head, resuming: partial) {
            case .success(let total):
                if let partial { resumed = (partial, total) }
            case .failure(let error):
                if let resumption { resumption.store.remove(resumption.key) }
                failure = Failure(error: error, isTransient: false)
            }
        }
        if failure != nil {
            // Decided by the range check.
        } else if !(200..<300).contains(status) {
            let retryAfter = head.value(forHTTPHeaderField: "Retry-After").flatMap(Self.parseRetryAfter)
            let detail =
                (300..<400).contains(status) && head.values(of: "Location").isEmpty ? " without a Location" : ""
            failure = Failure(
                error: VipsError(.httpStatus, "HTTP \(status)\(detail) for \(label)", httpStatus: status),
                isTransient: HTTPRetryPolicy.isTransient(status: status), retryAfter: retryAfter)
        } else if let problem = Self.contentLengthProblem(head) {
            failure = Failure(error: VipsError(.protocolError, problem, source: label), isTransient: false)
        } else if max(head.expectedContentLength, Int64(resumed?.total ?? 0)) > Int64(limits.maxBodyBytes) {
            let length = max(head.expectedContentLength, Int64(resumed?.total ?? 0))
            failure = Failure(
                error: VipsError(
                    .tooLarge,
                    "Content-Length \(length) exceeds the limit of \(limits.maxBodyBytes) bytes",
                    source: label
                ),
                isTransient: false)
        } else {
            do throws(VipsError) {
                let made = try makeSink(head, Date())
                sink = made
                if let resumed {
                    // The kept bytes start the new body; the rest follows as it arrives.
                    do throws(VipsError) {
                        try resumed.partial.copy(to: made.file)
                    } catch {
                        made.file.discard()
                        throw error
                    }
                    resumption?.store.remove(resumed.partial.record.key)
                }
            } catch {
                if resumed != nil, let resumption { resumption.store.remove(resumption.key) }
                failure = Failure(error: about(error), isTransient: resumed != nil)
            }
        }
        if let failure {
            finish(.failure(failure))
            return false
        }
        let expected: Int?
        if let resumed {
            expected = head.progressTotal == nil ? nil : resumed.total
        } else {
            expected = head.progressTotal
        }
        let resumable = PartialDownloads.resumability(of: head, total206: resumed?.total)
        let accepted = state.withLock { state -> Bool in
            guard !state.finished else { return false }
            state.response = head
            state.sink = sink
            state.received = resumed?.partial.record.byteCount ?? 0
            state.expected = expected
            state.resumable = resumable
            return true
        }
        if !accepted { sink?.file.discard() }
        return accepted
    }

    /// Body bytes have arrived: written to the file, or dropped for a
    /// redirect. Returns whether the hop goes on.
    func receive(body bytes: UnsafeRawBufferPointer) -> Bool {
        enum Target {
            case stop
            case drop(keepGoing: Bool)
            case write(Sink, total: Int, expected: Int?)
        }
        let target = state.withLock { state -> Target in
            guard !state.finished else { return .stop }
            if state.redirect != nil {
                state.dropped += bytes.count
                return .drop(keepGoing: state.dropped <= Self.redirectBodyLimit)
            }
            guard let sink = state.sink else { return .stop }
            state.received += bytes.count
            return .write(sink, total: state.received, expected: state.expected)
        }
        let sink: Sink
        let total: Int
        let expected: Int?
        switch target {
        case .stop: return false
        case .drop(let keepGoing): return keepGoing
        case .write(let current, let received, let length): (sink, total, expected) = (current, received, length)
        }
        var written = sink.file.path
        if total > limits.maxBodyBytes {
            finish(
                .failure(
                    Failure(
                        error: VipsError(
                            .tooLarge, "body exceeds the limit of \(limits.maxBodyBytes) bytes", source: label),
                        isTransient: false)))
            return false
        }
        do throws(VipsError) {
            try sink.file.write(bytes)
        } catch {
            // The transport's calls are serial: no other chunk is written while the body moves.
            do throws(VipsError) {
                let moved = try sink.relocated(after: error)
                try moved.file.write(bytes)
                let current = state.withLock { state -> Bool in
                    guard !state.finished else { return false }
                    state.sink = moved
                    return true
                }
                if !current {
                    moved.file.discard()
                    return false
                }
                written = moved.file.path
            } catch {
                finish(.failure(Failure(error: about(error), isTransient: false)))
                return false
            }
        }
        progress?(total, expected, written)
        return true
    }

    /// A hop has ended, completely (`fault` nil) or not. Returns the next
    /// hop when the response was a redirect that is followed; otherwise the
    /// attempt has its outcome.
    func complete(_ fault: HTTPTransport.Fault?) -> Hop? {
        let (finished, redirect, response, sink, received, interim, url, redirects, expected) = state.withLock {
            state in
            let taken = (
                state.finished, state.redirect, state.response, state.sink, state.received, state.interim,
                state.request.url, state.redirects, state.expected
            )
            if let next = state.redirect, !state.finished {
                state.request = next
                state.redirect = nil
                state.response = nil
                state.sink = nil
                state.received = 0
                state.dropped = 0
                state.interim = nil
            }
            return taken
        }
        guard !finished else { return nil }
        // A redirect's body is not wanted: how its hop ended does not matter.
        if let redirect { return hop(for: redirect) }
        if let fault {
            finish(.failure(failure(for: fault, url: url, redirects: redirects)))
            return nil
        }
        guard let response, let sink else {
            let after = interim.map { " after an interim \($0) response" } ?? ""
            finish(
                .failure(
                    Failure(
                        error: VipsError(
                            .network,
                            "the connection closed without a\(after.isEmpty ? "" : " final") response\(after)",
                            source: label
                        ),
                        isTransient: true)))
            return nil
        }
        // With a content coding the declared length is the encoded one; libcurl checks it then.
        if let total = expected, total != received {
            finish(
                .failure(
                    Failure(
                        error: VipsError(.incompleteBody, "received \(received) of \(total) bytes", source: label),
                        isTransient: true)))
            return nil
        }
        guard received > 0 else {
            finish(
                .failure(
                    Failure(
                        error: VipsError(.emptyInput, "HTTP \(response.statusCode) for \(label) has an empty body"),
                        isTransient: false)))
            return nil
        }
        var delivered = sink
        if sink.fallback != nil, sink.file.isUnlinked {
            // The cache folder was deleted while the body streamed into it:
            // the bytes survive only in the open file, so they move out.
            do throws(VipsError) {
                delivered = try sink.relocated(
                    after: VipsError(.io, "the cache folder was deleted while the body was written", source: label))
            } catch {
                finish(.failure(Failure(error: about(error), isTransient: false)))
                return nil
            }
            let current = state.withLock { state -> Bool in
                guard !state.finished else { return false }
                state.sink = delivered
                return true
            }
            if !current {
                delivered.file.discard()
                return nil
            }
        }
        finish(.success(.body(response: response, file: delivered.file, sink: delivered)))
        return nil
    }

    /// No byte came for `requestTimeout`, or (`whole`) the attempt ran past `resourceTimeout`.
    func timeOut(whole: Bool) {
        let reason =
            whole
            ? "no complete response within \(limits.resourceTimeout) s"
            : "no data for \(limits.requestTimeout) s"
        finish(.failure(Failure(error: VipsError(.timedOut, reason, source: label), isTransient: true)))
    }

    /// The transport stopped the attempt (cancelled, or the transport itself stopped).
    func abandon() {
        fail(VipsError.cancelled(label))
    }

    /// The transport could not run the attempt: `error`, made about this download.
    func fail(_ error: VipsError) {
        finish(.failure(Failure(error: about(error), isTransient: false)))
    }

    // MARK: - Deciding

    /// A redirect to `location` (the raw field): followed when its scheme is
    /// http(s), the redirect count allows it and every redirect check
    /// (`Limits.redirectChecks`) allows its target. Returns whether the hop
    /// goes on.
    ///
    /// The scheme is read from the raw `Location`, before the reference is
    /// resolved: `file:///etc/passwd` must be refused as a file URL, never
    /// turned into a path on the current host.
    private func redirect(to location: String) -> Bool {
        let target = URLRedaction.redacted(location)
        let decision = state.withLock { state -> Result<URLRequest, VipsError>? in
            guard !state.finished else { return nil }
            state.redirects += 1
            let scheme = Self.scheme(ofReference: location) ?? state.request.url?.scheme?.lowercased()
            guard scheme == "http" || scheme == "https" else {
                return .failure(
                    VipsError(
                        .redirectRefused, "redirect to \(target) refused: only http and https are followed",
                        source: label))
            }
            guard state.redirects <= limits.maxRedirects else {
                return .failure(
                    VipsError(.redirectRefused, "more than \(limits.maxRedirects) redirects", source: label))
            }
            guard let current = state.request.url,
                let resolved = URL(string: location.trimmingCharacters(in: .whitespaces), relativeTo: current)?
                    .absoluteURL,
                let resolvedScheme = resolved.scheme?.lowercased(),
                resolvedScheme == "http" || resolvedScheme == "https",
                resolved.host?.isEmpty == false
            else {
                return .failure(
                    VipsError(.redirectRefused, "redirect to \(target) refused: not a valid http(s) URL", source: label)
                )
            }
            var next = state.request
            next.url = resolved
            // Credentials of one origin are never sent to another (as libcurl and browsers do).
            if Self.origin(of: resolved) != Self.origin(of: current) {
                next.setValue(nil, forHTTPHeaderField: "Authorization")
                next.setValue(nil, forHTTPHeaderField: "Cookie")
            }
            return .success(next)
        }
        let next: URLRequest
        switch decision {
        case nil: return false
        case .failure(let error)?:
            finish(.failure(Failure(error: error, isTransient: false)))
            return false
        case .success(let request)?: next = request
        }
        // The owner's checks run outside the lock, before anything is sent to the target.
        if let url = next.url, !limits.redirectChecks.allSatisfy({ $0(url) }) {
            let shown = URLRedaction.redacted(url)
            let refusal = VipsError(.sourceNotAllowed, "the redirect check does not allow it", source: shown)
            finish(
                .failure(
                    Failure(
                        error: VipsError(
                            .sourceNotAllowed, "redirect to \(shown) refused: the redirect check does not allow it",
                            source: label, underlying: refusal),
                        isTransient: false)))
            return false
        }
        return state.withLock { state -> Bool in
            guard !state.finished else { return false }
            state.redirect = next
            return true
        }
    }

    /// `request` as the transport sends it; nil (and the attempt failed)
    /// when a header field would break the request: a line break or NUL in
    /// it, or a name that is not a token.
    private func hop(for request: URLRequest) -> Hop? {
        guard let url = request.url?.absoluteString else {
            fail(VipsError(.invalidArgument, "the request has no URL", source: label))
            return nil
        }
        var lines: [String] = []
        for (name, value) in (request.allHTTPHeaderFields ?? [:]).sorted(by: { $0.key < $1.key }) {
            // Bytes, not Characters: "\r\n" is one Character, equal to neither "\r" nor "\n".
            let breaks: (UInt8) -> Bool = { $0 == 0x0D || $0 == 0x0A || $0 == 0 }
            guard !name.isEmpty, !name.utf8.contains(where: { breaks($0) || $0 == 0x3A || $0 <= 0x20 || $0 >= 0x7F }),
                !value.utf8.contains(where: breaks)
            else {
                fail(
                    VipsError(
                        .invalidArgument, "the header field \"\(URLRedaction.redacted(name))\" cannot be sent",
                        source: label
                    ))
                return nil
            }
            // "Name;" is libcurl's way to send a field with an empty value.
            lines.append(value.isEmpty ? name + ";" : name + ": " + value)
        }
        return Hop(url: url, headerLines: lines)
    }

    /// Scheme, host and port: the scope of credentials.
    private static func origin(of url: URL) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(url.host?.lowercased() ?? ""):\(port)"
    }

    /// The failure a transport fault means.
    private func failure(for fault: HTTPTransport.Fault, url: URL?, redirects: Int) -> Failure {
        let reason = fault.message
        switch fault.kind {
        case .addressNotAllowed:
            guard let address = fault.refusedAddress else { break }
            var host = url?.host ?? "the host"
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            let error = limits.addressPolicy.refusal(
                of: address, host: host, label: label,
                redirectTarget: redirects > 0 ? url.map(URLRedaction.redacted) : nil)
            return Failure(error: error, isTransient: false, sentNothing: redirects == 0)
        default:
            break
        }
        switch fault.kind {
        case .timedOut:
            return Failure(
                error: VipsError(.timedOut, "no data for \(limits.requestTimeout) s", source: label), isTransient: true)
        case .connectionLost:
            return Failure(error: VipsError(.network, "connection lost: \(reason)", source: label), isTransient: true)
        case .partialBody:
            // libcurl: "transfer closed with N bytes remaining to read".
            return Failure(error: VipsError(.incompleteBody, reason, source: label), isTransient: true)
        case .notHTTP:
            return Failure(
                error: VipsError(
                    .protocolError, "the server's answer is not an HTTP response (\(reason))", source: label),
                isTransient: false)
        case .headerTooLarge:
            return Failure(
                error: VipsError(
                    .tooLarge, "the response header is too large (libcurl accepts header lines up to 100 KiB)",
                    source: label
                ),
                isTransient: false)
        case .badContentCoding:
            return Failure(
                error: VipsError(.protocolError, "the body's content coding is broken: \(reason)", source: label),
                isTransient: false)
        case .invalidRequest:
            return Failure(error: VipsError(.invalidArgument, reason, source: label), isTransient: false)
        case .stoppedByCallback, .other, .addressNotAllowed:
            return Failure(error: VipsError(.network, reason, source: label), isTransient: true)
        }
    }

    // MARK: - Ending

    /// Delivers the first outcome; later ones are ignored. A failure deletes
    /// the partial file. Returns whether this was the first.
    @discardableResult
    private func finish(_ result: Result<Outcome, any Error>) -> Bool {
        let (first, continuation, sink, resumable) = state.withLock {
            state -> (Bool, CheckedContinuation<Void, Never>?, Sink?, (ifRange: String, total: Int)?) in
            guard !state.finished else { return (false, nil, nil, nil) }
            state.finished = true
            defer { state.continuation = nil }
            state.result = result
            return (true, state.continuation, state.sink, state.redirect == nil ? state.resumable : nil)
        }
        guard first else { return false }
        if case .failure(let error) = result {
            // A body cut by a transient failure is kept for the next attempt, before the caller hears of it.
            if let failure = error as? Failure, failure.isTransient, let resumable, let resumption, let sink {
                resumption.store.keep(
                    sink.file, byteCount: sink.file.byteCount, key: resumption.key, ifRange: resumable.ifRange,
                    total: resumable.total)
            }
            sink?.file.discard()
        }
        continuation?.resume()
        return true
    }

    /// `error` as an error about this download: it names the URL, never the
    /// download's temporary file (whose errors are about its path, so they
    /// are addressed to the URL instead; the file is gone once the error is seen).
    private func about(_ error: VipsError) -> VipsError {
        error.about(label)
    }

    /// Whether a 206 continues the kept partial `resuming`: its total, or the
    /// `protocolError` it is. A 206 is an answer only to a request that asked
    /// for a range, and must cover exactly the rest of the body: from the
    /// kept byte count to the last byte of the total recorded with it.
    private func check206(
        _ head: HTTPResponseHead, resuming partial: PartialDownloads.Partial?
    ) -> Result<Int, VipsError> {
        guard let partial else {
            return .failure(VipsError(.protocolError, "HTTP 206 for \(label), which asked for no range", source: label))
        }
        // Ranges count the bytes as sent: a coded 206 cannot be appended to the kept (decoded) ones.
        if let coding = head.value(forHTTPHeaderField: "Content-Encoding"), coding.lowercased() != "identity" {
            return .failure(
                VipsError(.protocolError, "HTTP 206 with Content-Encoding \(coding) for a range", source: label))
        }
        let field = head.value(forHTTPHeaderField: "Content-Range")
        let record = partial.record
        guard let range = PartialDownloads.contentRange(field) else {
            return .failure(
                VipsError(
                    .protocolError, "HTTP 206 with an unusable Content-Range \"\(field ?? "")\"", source: label))
        }
        guard range.first == record.byteCount, range.total == record.total, range.last == record.total - 1 else {
            return .failure(
                VipsError(
                    .protocolError,
                    "HTTP 206 with Content-Range \"\(field ?? "")\" for a request of bytes \(record.byteCount)- of \(record.total)",
                    source: label))
        }
        let length = head.expectedContentLength
        if length >= 0, length != Int64(record.total - record.byteCount) {
            return .failure(
                VipsError(
                    .protocolError, "HTTP 206 whose Content-Length \(length) disagrees with its Content-Range",
                    source: label))
        }
        return .success(record.total)
    }

    /// Why the `Content-Length` of `response` cannot be trusted, or nil when
    /// it can (or there is none). Two different values (in two fields, or a
    /// list in one) are an unrecoverable framing error (RFC 9112 §6.3); a
    /// list of one value repeated is accepted. With a `Transfer-Encoding` the
    /// length is ignored, so it is not checked.
    static func contentLengthProblem(_ response: HTTPResponseHead) -> String? {
        let values = response.values(of: "Content-Length").flatMap {
            $0.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        }
        let transferEncoded = !response.values(of: "Transfer-Encoding").isEmpty
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

    /// `Retry-After`: delay seconds or an HTTP date.
    static func parseRetryAfter(_ value: String) -> TimeInterval? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let seconds = TimeInterval(trimmed) { return max(0, seconds) }
        return HTTPDate.parse(trimmed).map { max(0, $0.timeIntervalSinceNow) }
    }
}
