import CCurl
import Dispatch
import Foundation

/// The HTTP client under an `HTTPDataLoader`: one libcurl multi handle and
/// the one thread that drives it, for every transfer of the loader.
///
/// - The thread waits in `curl_multi_poll` and runs libcurl's callbacks
///   itself: each response head goes to its `HTTPTransfer` for a decision,
///   and body bytes go straight into the transfer's file, with no hop to
///   another thread (a large receive buffer, `receiveBufferSize`, so a fast
///   body arrives in few large reads and writes).
/// - Other threads reach it through a locked command queue (start, cancel)
///   and `curl_multi_wakeup`.
/// - Timeouts are checked here, to the millisecond: an idle gap (no byte for
///   `requestTimeout`, connecting included) and the whole transfer
///   (`resourceTimeout`, across redirects).
/// - libcurl follows no redirect: the transfer decides each hop, and the
///   thread starts the next one on the same multi handle (so it may reuse
///   the connection).
/// - Under an address policy (`SourceAddressPolicy`, other than
///   `.unrestricted`), libcurl's socket-opening callback asks the policy
///   about each address libcurl is about to connect to, after it resolved the
///   host; a refused address is never connected to (no proxy is used then).
/// - Mechanism only: what a status, a header or an error means is the
///   transfer's business; this type reports what libcurl said.
///
/// The thread ends when the transport is released (its loader deinitialised):
/// transfers still running then end as cancelled.
final class HTTPTransport: Sendable {
    /// The receive buffer of each transfer: libcurl reads the socket and
    /// calls the write callback with up to this many bytes at once (its own
    /// default, and URLSession's fixed size, is 16 KiB).
    static let defaultReceiveBufferSize = 512 * 1024

    /// Easy handles kept for later transfers at most: enough for the
    /// loader's usual concurrency (more are freed as their transfers end).
    static let spareHandleLimit = 16

    /// How a hop ended, as libcurl reported it (nil: completely).
    struct Fault: Sendable {
        enum Kind: Sendable {
            /// The connection broke while sending or receiving.
            case connectionLost
            /// The body ended before its declared length.
            case partialBody
            /// The server's bytes are not an HTTP response.
            case notHTTP
            /// A response header is larger than libcurl accepts.
            case headerTooLarge
            /// The body's content coding could not be decoded.
            case badContentCoding
            /// libcurl's own timeout.
            case timedOut
            /// The URL or the request cannot be sent.
            case invalidRequest
            /// A callback refused to go on: the transfer had ended already.
            case stoppedByCallback
            /// The address policy refused every address libcurl would have
            /// connected to (`refusedAddress` names one): nothing was sent.
            case addressNotAllowed
            /// Anything else: resolving, connecting, TLS.
            case other
        }

        let kind: Kind
        /// libcurl's description (its error buffer, else its error string).
        let message: String
        /// For `.addressNotAllowed`: the last address refused.
        var refusedAddress: IPAddress? = nil
    }

    private let loop: Loop

    /// A transport whose transfers read with `receiveBufferSize`-byte buffers.
    /// Its thread starts with the first transfer.
    init(receiveBufferSize: Int = HTTPTransport.defaultReceiveBufferSize) {
        loop = Loop(receiveBufferSize: receiveBufferSize)
    }

    deinit {
        loop.stop()
    }

    /// Hands `transfer` to the thread, which starts it; false when the
    /// transport cannot run transfers (libcurl failed to initialise, or it
    /// has stopped).
    func start(_ transfer: HTTPTransfer) -> Bool {
        loop.send(.start(transfer))
    }

    /// Stops `transfer`'s network activity at once and closes its connection
    /// (the transfer itself has ended already, or ends now as cancelled).
    func cancel(_ transfer: HTTPTransfer) {
        _ = loop.send(.cancel(transfer))
    }
}

extension HTTPTransport {
    private enum Command {
        case start(HTTPTransfer)
        case cancel(HTTPTransfer)
    }

    /// What finished transfers leave for the next ones: easy handles (with
    /// their receive buffers) and gather buffers, so a transfer's megabyte of
    /// buffers is not allocated and faulted in again each time. The
    /// transport thread's only; it frees what it keeps when the thread ends.
    private final class Spares {
        /// Kept at most, of handles and of buffers.
        static let limit = HTTPTransport.spareHandleLimit
        let bufferSize: Int
        private var handles: [UnsafeMutableRawPointer] = []
        private var buffers: [UnsafeMutableRawBufferPointer] = []

        init(bufferSize: Int) {
            self.bufferSize = bufferSize
        }

        /// A reset easy handle kept from an earlier transfer (`recycled`), or
        /// a new one (nil when libcurl cannot make one).
        func handle() -> (easy: UnsafeMutableRawPointer, recycled: Bool)? {
            if let easy = handles.popLast() { return (easy, true) }
            return curl_easy_init().map { ($0, false) }
        }

        /// Takes back a handle no longer in a multi handle: kept for a later
        /// transfer only when its hop `completed` normally (libcurl said
        /// `CURLE_OK` and every callback went on), freed otherwise.
        ///
        /// A handle whose hop failed in any way (an error of libcurl's, a
        /// timeout, a cancel, a callback that stopped it, an option refused)
        /// never serves another transfer: after a failed DNS lookup, for one,
        /// libcurl 7.88 refuses `CURLOPT_BUFFERSIZE` on that handle even after
        /// `curl_easy_reset`, and every later transfer on it would fail.
        func recycle(_ easy: UnsafeMutableRawPointer, completed: Bool) {
            if completed, handles.count < Spares.limit {
                // Back to libcurl's defaults, keeping the handle's buffers.
                curl_easy_reset(easy)
                handles.append(easy)
            } else {
                curl_easy_cleanup(easy)
            }
        }

        func buffer() -> UnsafeMutableRawBufferPointer {
            buffers.popLast() ?? .allocate(byteCount: bufferSize, alignment: 16)
        }

        func recycle(_ buffer: UnsafeMutableRawBufferPointer) {
            if buffers.count < Spares.limit { buffers.append(buffer) } else { buffer.deallocate() }
        }

        func freeAll() {
            for easy in handles { curl_easy_cleanup(easy) }
            for buffer in buffers { buffer.deallocate() }
            handles = []
            buffers = []
        }
    }

    /// One transfer on the thread: its current hop's easy handle and the
    /// hop's deadlines. Touched by the transport thread only (its libcurl
    /// callbacks included), so it has no lock.
    private final class Exchange {
        let transfer: HTTPTransfer
        var easy: UnsafeMutableRawPointer?
        var headerList: UnsafeMutablePointer<curl_slist>?
        let errorBuffer: UnsafeMutablePointer<CChar>
        let idleTimeout: UInt64
        /// When the transfer times out if no byte arrives (moved on by every byte).
        var idleDeadline: UInt64 = 0
        /// When the whole transfer times out, redirects included.
        let totalDeadline: UInt64
        /// Whether the current hop's final response head has arrived.
        var headSeen = false
        /// The policy judging each address connected to; nil when every address is allowed.
        let addressPolicy: SourceAddressPolicy?
        /// The last address of the current hop the policy refused.
        var refusedAddress: IPAddress?
        /// Body bytes gathered for the transfer: libcurl reads the socket in
        /// `receiveBufferSize` pieces but hands them to its write callback in
        /// 16 KiB ones (CURL_MAX_WRITE_SIZE); gathered here, they reach the
        /// file in one write per buffer, not one per 16 KiB.
        private var pending: UnsafeMutableRawBufferPointer?
        private var pendingCount = 0
        private let spares: Spares

        init(transfer: HTTPTransfer, now: UInt64, spares: Spares) {
            self.transfer = transfer
            self.spares = spares
            idleTimeout = Loop.nanoseconds(transfer.limits.requestTimeout)
            totalDeadline = now &+ Loop.nanoseconds(transfer.limits.resourceTimeout)
            let policy = transfer.limits.addressPolicy
            addressPolicy = policy.isUnrestricted ? nil : policy
            errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
            errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        }

        deinit {
            errorBuffer.deallocate()
            if let pending { spares.recycle(pending) }
        }

        /// Takes body bytes: gathered, and handed to the transfer when the
        /// buffer is full. Returns whether the hop goes on.
        func receive(body bytes: UnsafeRawBufferPointer) -> Bool {
            let capacity = spares.bufferSize
            if pendingCount > 0, pendingCount + bytes.count > capacity, !flush() { return false }
            if bytes.count >= capacity { return transfer.receive(body: bytes) }
            let buffer: UnsafeMutableRawBufferPointer
            if let pending {
                buffer = pending
            } else {
                buffer = spares.buffer()
                pending = buffer
            }
            UnsafeMutableRawBufferPointer(rebasing: buffer[pendingCount..<pendingCount + bytes.count])
                .copyMemory(from: bytes)
            pendingCount += bytes.count
            return pendingCount < capacity || flush()
        }

        /// Hands the gathered bytes to the transfer (at a full buffer, and
        /// when the hop ends). Returns whether the hop goes on.
        func flush() -> Bool {
            guard let pending, pendingCount > 0 else { return true }
            let count = pendingCount
            pendingCount = 0
            return transfer.receive(body: UnsafeRawBufferPointer(rebasing: pending[0..<count]))
        }

        /// libcurl's description of the hop's error `code`.
        func message(for code: CURLcode) -> String {
            let buffered = String(cString: errorBuffer)
            if !buffered.isEmpty { return buffered }
            return String(cString: curl_easy_strerror(code))
        }
    }

    /// The thread's side: the multi handle, the transfers, the loop.
    ///
    /// The multi handle and the thread are made with the first transfer, so
    /// a loader that never downloads (a pipeline of local files) costs no
    /// thread and no descriptors.
    ///
    /// `@unchecked Sendable`: `multi` (written once, before the thread
    /// starts), `exchanges` and `spares` are used on the transport thread
    /// only; what other threads touch is in `commands`, whose copy of the
    /// multi handle serves `curl_multi_wakeup` (which libcurl allows from any
    /// thread).
    private final class Loop: @unchecked Sendable {
        private struct Commands {
            var pending: [Command] = []
            /// The multi handle, once the thread runs: for waking it.
            var multi: UnsafeMutableRawPointer?
            /// Set by the first start, while the multi handle and thread are made.
            var launching = false
            var stopping = false
            /// Set once the thread has ended (or could not start): commands are refused.
            var closed = false
        }

        /// libcurl's CURL_MAX_READ_SIZE (10 MiB), a macro Swift does not import.
        static let largestReceiveBuffer = 10 * 1024 * 1024

        private var multi: UnsafeMutableRawPointer?
        private let receiveBufferSize: Int
        private let commands = LockedState(Commands())
        private var exchanges: [ObjectIdentifier: Exchange] = [:]
        private let spares: Spares

        init(receiveBufferSize: Int) {
            self.receiveBufferSize = max(16 * 1024, min(receiveBufferSize, Loop.largestReceiveBuffer))
            spares = Spares(bufferSize: self.receiveBufferSize)
        }

        /// `curl_global_init`, once per process (libcurl counts its callers;
        /// FoundationNetworking may have called it too).
        private static let libcurlReady: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

        static func nanoseconds(_ seconds: TimeInterval) -> UInt64 {
            guard seconds.isFinite, seconds > 0 else { return 0 }
            return seconds >= 1e9 ? UInt64.max / 2 : UInt64(seconds * 1e9)
        }

        static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

        /// Queues `command` and wakes the thread (starting it with the first
        /// command); false when the loop is closed.
        ///
        /// The wake-up is sent under the lock: the thread frees the multi
        /// handle only after marking the loop closed under the same lock, so
        /// it is never woken through a freed handle. (`curl_multi_wakeup`
        /// writes to a pipe, calls nothing back and takes no lock of ours.)
        func send(_ command: Command) -> Bool {
            let (accepted, mustLaunch) = commands.withLock { state -> (Bool, Bool) in
                guard !state.closed, !state.stopping else { return (false, false) }
                // Before the first start there is nothing to cancel (and no thread to start for it).
                if case .cancel = command, state.multi == nil, !state.launching { return (false, false) }
                state.pending.append(command)
                if let multi = state.multi {
                    curl_multi_wakeup(multi)
                    return (true, false)
                }
                // The thread is being started: it takes what is pending when it runs.
                if state.launching { return (true, false) }
                state.launching = true
                return (true, true)
            }
            if mustLaunch { launch() }
            return accepted
        }

        /// Makes the multi handle and starts the thread (outside any lock); when
        /// libcurl cannot, the loop closes and what was queued fails.
        private func launch() {
            let made = Loop.libcurlReady ? curl_multi_init() : nil
            guard let made else {
                let queued = commands.withLock { state -> [Command] in
                    state.closed = true
                    defer { state.pending = [] }
                    return state.pending
                }
                for case .start(let transfer) in queued {
                    transfer.fail(VipsError(.internal, "libcurl could not be initialised"))
                }
                return
            }
            multi = made
            commands.withLock { $0.multi = made }
            let thread = Thread { [self] in
                ThreadNaming.setCurrentThreadName("vipsload-http")
                run()
            }
            thread.start()
        }

        /// Asks the thread to end (transfers still running end as cancelled).
        func stop() {
            commands.withLock { state in
                guard !state.closed, !state.stopping else { return }
                state.stopping = true
                if let multi = state.multi { curl_multi_wakeup(multi) }
                // Never started: nothing runs, nothing to end.
                if !state.launching { state.closed = true }
            }
        }

        // MARK: - The thread

        private func run() {
            guard let multi else { return }
            while true {
                let (batch, stopping) = commands.withLock { state -> ([Command], Bool) in
                    defer { state.pending = [] }
                    return (state.pending, state.stopping)
                }
                for command in batch { apply(command) }
                if stopping { break }
                var running: Int32 = 0
                curl_multi_perform(multi, &running)
                // What the reads of this round brought reaches the files now, not when a
                // buffer fills: a stalled body is on disk as far as it came.
                for exchange in exchanges.values where !exchange.flush() {
                    // The transfer refused the bytes: its hop ends here (libcurl would have been
                    // told so by the write callback).
                    endHop(exchange, Fault(kind: .stoppedByCallback, message: "stopped by the transfer"))
                }
                collectCompleted()
                expireDeadlines()
                curl_multi_poll(multi, nil, 0, waitMilliseconds(), nil)
            }
            // Released with transfers still running: they end as cancelled.
            let left = commands.withLock { state -> [Command] in
                state.closed = true
                state.multi = nil
                defer { state.pending = [] }
                return state.pending
            }
            for case .start(let transfer) in left { transfer.abandon() }
            for exchange in exchanges.values {
                exchange.transfer.abandon()
                detach(exchange, completed: false)
            }
            exchanges = [:]
            spares.freeAll()
            curl_multi_cleanup(multi)
        }

        private func apply(_ command: Command) {
            switch command {
            case .start(let transfer):
                guard !transfer.isFinished else { return }
                let exchange = Exchange(transfer: transfer, now: Loop.now(), spares: spares)
                guard let hop = transfer.firstHop() else { return }
                exchanges[ObjectIdentifier(transfer)] = exchange
                begin(exchange, hop)
            case .cancel(let transfer):
                guard let exchange = exchanges.removeValue(forKey: ObjectIdentifier(transfer)) else { return }
                exchange.transfer.abandon()
                detach(exchange, completed: false)
            }
        }

        /// Starts `hop` of `exchange`'s transfer on an easy handle: a spare
        /// one, or a new one. A handle that refuses an option is freed; when
        /// it was a new handle, the transfer fails with the refusal (a spare
        /// that refuses is replaced by a new handle, though spares come only
        /// from hops that completed, so it should not happen).
        private func begin(_ exchange: Exchange, _ hop: HTTPTransfer.Hop) {
            var candidate = spares.handle()
            while let multi, let handle = candidate {
                candidate = nil
                guard let refused = configure(exchange, hop, handle.easy) else {
                    let added = curl_multi_add_handle(multi, handle.easy)
                    guard added == CURLM_OK else {
                        detach(exchange, completed: false)
                        let reason = String(cString: curl_multi_strerror(added))
                        end(exchange, VipsError(.internal, "libcurl refused the transfer: \(reason)"))
                        return
                    }
                    exchange.idleDeadline = Loop.now() &+ exchange.idleTimeout
                    return
                }
                detach(exchange, completed: false)
                if handle.recycled {
                    candidate = curl_easy_init().map { ($0, false) }
                    continue
                }
                let reason = String(cString: curl_easy_strerror(refused.code))
                // The URL is the one option whose value comes from outside (libcurl refuses one
                // over 8 MB); any other refusal is libcurl's own trouble.
                end(
                    exchange,
                    refused.option == "CURLOPT_URL"
                        ? VipsError(.invalidArgument, "libcurl refused the URL: \(reason)")
                        : VipsError(.internal, "libcurl refused the option \(refused.option): \(reason)"))
                return
            }
            end(exchange, VipsError(.internal, "libcurl could not make a transfer handle"))
        }

        /// Ends `exchange`'s transfer with `error`, before its hop started.
        private func end(_ exchange: Exchange, _ error: VipsError) {
            exchanges[ObjectIdentifier(exchange.transfer)] = nil
            exchange.transfer.fail(error)
        }

        /// Sets up `easy` for `hop` of `exchange`'s transfer; returns the first
        /// option libcurl refused, or nil when it took them all.
        private func configure(
            _ exchange: Exchange, _ hop: HTTPTransfer.Hop, _ easy: UnsafeMutableRawPointer
        ) -> (option: String, code: CURLcode)? {
            exchange.easy = easy
            exchange.headSeen = false
            exchange.refusedAddress = nil
            exchange.errorBuffer[0] = 0
            var list: UnsafeMutablePointer<curl_slist>?
            for line in hop.headerLines {
                guard let longer = curl_slist_append(list, line) else { break }
                list = longer
            }
            exchange.headerList = list
            let context = Unmanaged.passUnretained(exchange).toOpaque()
            var refused: (option: String, code: CURLcode)?
            func set(_ option: String, _ result: CURLcode) {
                if refused == nil, result != CURLE_OK { refused = (option, result) }
            }
            set("CURLOPT_URL", vl_curl_easy_setopt_string(easy, CURLOPT_URL, hop.url))
            set("CURLOPT_PROTOCOLS_STR", vl_curl_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https"))
            // Never a signal from libcurl: the process has many threads.
            set("CURLOPT_NOSIGNAL", vl_curl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
            set("CURLOPT_FOLLOWLOCATION", vl_curl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0))
            set("CURLOPT_BUFFERSIZE", vl_curl_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, receiveBufferSize))
            set("CURLOPT_TCP_KEEPALIVE", vl_curl_easy_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1))
            // Every content coding libcurl decodes, as URLSession asked for.
            set("CURLOPT_ACCEPT_ENCODING", vl_curl_easy_setopt_string(easy, CURLOPT_ACCEPT_ENCODING, ""))
            set("CURLOPT_HTTPHEADER", vl_curl_easy_setopt_pointer(easy, CURLOPT_HTTPHEADER, list))
            set("CURLOPT_ERRORBUFFER", vl_curl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, exchange.errorBuffer))
            set("CURLOPT_PRIVATE", vl_curl_easy_setopt_pointer(easy, CURLOPT_PRIVATE, context))
            set(
                "CURLOPT_WRITEFUNCTION",
                vl_curl_easy_setopt_write_function(easy, CURLOPT_WRITEFUNCTION, Loop.receiveBody))
            set("CURLOPT_WRITEDATA", vl_curl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, context))
            set(
                "CURLOPT_HEADERFUNCTION",
                vl_curl_easy_setopt_write_function(easy, CURLOPT_HEADERFUNCTION, Loop.receiveHeaderLine))
            set("CURLOPT_HEADERDATA", vl_curl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, context))
            if exchange.addressPolicy != nil {
                set("CURLOPT_OPENSOCKETFUNCTION", vl_curl_easy_setopt_opensocket_function(easy, Loop.openSocket))
                set("CURLOPT_OPENSOCKETDATA", vl_curl_easy_setopt_pointer(easy, CURLOPT_OPENSOCKETDATA, context))
                // A proxy would resolve and connect to the origin itself, where the policy cannot see.
                set("CURLOPT_PROXY", vl_curl_easy_setopt_string(easy, CURLOPT_PROXY, ""))
            }
            return refused
        }

        /// Removes the exchange's easy handle from the multi handle (closing
        /// its connection when the hop had not ended) and gives it back: kept
        /// for a later transfer when its hop `completed` normally, freed
        /// otherwise (`Spares.recycle`).
        private func detach(_ exchange: Exchange, completed: Bool) {
            if let easy = exchange.easy {
                if let multi { curl_multi_remove_handle(multi, easy) }
                spares.recycle(easy, completed: completed)
                exchange.easy = nil
            }
            if let list = exchange.headerList {
                curl_slist_free_all(list)
                exchange.headerList = nil
            }
        }

        /// Ends the hops libcurl reports done; a transfer that redirects goes on with its next hop.
        private func collectCompleted() {
            guard let multi else { return }
            var queued: Int32 = 0
            while let message = curl_multi_info_read(multi, &queued) {
                guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
                let code = message.pointee.data.result
                var pointer: UnsafeMutablePointer<CChar>?
                vl_curl_easy_getinfo_string(easy, CURLINFO_PRIVATE, &pointer)
                guard let pointer else { continue }
                let exchange = Unmanaged<Exchange>.fromOpaque(UnsafeRawPointer(pointer)).takeUnretainedValue()
                endHop(exchange, code == CURLE_OK ? nil : Loop.fault(code, exchange))
            }
        }

        /// Ends the exchange's hop (`fault` nil: completely): its transfer
        /// judges it, and either has its outcome or names the next hop.
        private func endHop(_ exchange: Exchange, _ fault: Fault?) {
            // The last gathered bytes reach the file before the hop is judged.
            let flushed = exchange.flush()
            let next = exchange.transfer.complete(
                flushed ? fault : Fault(kind: .stoppedByCallback, message: "stopped by the transfer"))
            detach(exchange, completed: flushed && fault == nil)
            if let next {
                begin(exchange, next)
            } else {
                exchanges[ObjectIdentifier(exchange.transfer)] = nil
            }
        }

        /// Ends the transfers whose idle or total deadline has passed.
        private func expireDeadlines() {
            let now = Loop.now()
            for (key, exchange) in exchanges where now >= min(exchange.idleDeadline, exchange.totalDeadline) {
                exchange.transfer.timeOut(whole: now >= exchange.totalDeadline)
                detach(exchange, completed: false)
                exchanges[key] = nil
            }
        }

        /// Until the nearest deadline (libcurl's own timers end the wait sooner when due).
        private func waitMilliseconds() -> Int32 {
            let nearest = exchanges.values.map { min($0.idleDeadline, $0.totalDeadline) }.min()
            guard let nearest else { return 10_000 }
            let now = Loop.now()
            guard nearest > now else { return 0 }
            return Int32(min(10_000, (nearest - now + 999_999) / 1_000_000))
        }

        private static func fault(_ code: CURLcode, _ exchange: Exchange) -> Fault {
            let message = exchange.message(for: code)
            // Every address libcurl tried was refused (or the one allowed did not answer).
            if code == CURLE_COULDNT_CONNECT, let refused = exchange.refusedAddress {
                return Fault(kind: .addressNotAllowed, message: message, refusedAddress: refused)
            }
            let kind: Fault.Kind
            switch code {
            case CURLE_RECV_ERROR, CURLE_SEND_ERROR: kind = .connectionLost
            case CURLE_PARTIAL_FILE: kind = .partialBody
            case CURLE_WEIRD_SERVER_REPLY: kind = .notHTTP
            // "Received HTTP/0.9 when not allowed": bytes that are not an HTTP response.
            case CURLE_UNSUPPORTED_PROTOCOL where message.contains("HTTP/0.9"): kind = .notHTTP
            case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT: kind = .invalidRequest
            // libcurl refuses a header line over 100 KiB (CURL_MAX_HTTP_HEADER) with its
            // out-of-memory error; before the head is complete, that is what it means.
            case CURLE_OUT_OF_MEMORY where !exchange.headSeen: kind = .headerTooLarge
            case CURLE_BAD_CONTENT_ENCODING: kind = .badContentCoding
            case CURLE_OPERATION_TIMEDOUT: kind = .timedOut
            case CURLE_WRITE_ERROR, CURLE_ABORTED_BY_CALLBACK: kind = .stoppedByCallback
            default: kind = .other
            }
            return Fault(kind: kind, message: message)
        }

        // MARK: - libcurl callbacks (on the thread, inside curl_multi_perform)

        /// The write callback: body bytes, gathered and written to the transfer's file on this thread.
        private static let receiveBody: curl_write_callback = { buffer, size, count, context in
            guard let context else { return 0 }
            let exchange = Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue()
            let length = size * count
            exchange.idleDeadline = Loop.now() &+ exchange.idleTimeout
            guard length > 0, let buffer else { return length }
            return exchange.receive(body: UnsafeRawBufferPointer(start: buffer, count: length)) ? length : 0
        }

        /// The socket-opening callback (installed under an address policy):
        /// called instead of `socket(2)` with each address libcurl is about to
        /// connect to. A refused address gets no socket, which libcurl treats
        /// as a failed connection attempt (it tries the host's next address,
        /// and reports `CURLE_COULDNT_CONNECT` when none is left).
        private static let openSocket: curl_opensocket_callback = { context, purpose, address in
            guard let context, let address, purpose == CURLSOCKTYPE_IPCXN else { return CURL_SOCKET_BAD }
            let exchange = Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue()
            let family = address.pointee.family
            let socketType = address.pointee.socktype
            let socketProtocol = address.pointee.protocol
            let length = Int(address.pointee.addrlen)
            // The socket address starts at `addr` and runs for `addrlen` bytes (past `addr`'s own size for IPv6).
            guard let offset = MemoryLayout<curl_sockaddr>.offset(of: \.addr) else { return CURL_SOCKET_BAD }
            let socketAddress = (UnsafeRawPointer(address) + offset).assumingMemoryBound(to: sockaddr.self)
            let target = SourceAddressPolicy.address(of: socketAddress, length: length)
            // Not IPv4 or IPv6 (no such connection is made for http(s)): nothing to judge it by.
            guard let target else { return CURL_SOCKET_BAD }
            if let policy = exchange.addressPolicy, !policy.allows(target) {
                exchange.refusedAddress = target
                return CURL_SOCKET_BAD
            }
            // What libcurl would have done, and not inherited by child processes.
            return socket(family, socketType | Int32(SOCK_CLOEXEC.rawValue), socketProtocol)
        }

        /// The header callback: one line of a response head; the empty line
        /// that ends a head hands the whole head (libcurl's header API) to the transfer.
        private static let receiveHeaderLine: curl_write_callback = { buffer, size, count, context in
            guard let context else { return 0 }
            let exchange = Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue()
            let length = size * count
            exchange.idleDeadline = Loop.now() &+ exchange.idleTimeout
            guard let buffer, let easy = exchange.easy else { return length }
            let isEnd = (length == 2 && buffer[0] == 0x0D && buffer[1] == 0x0A) || (length == 1 && buffer[0] == 0x0A)
            guard isEnd else { return length }
            var status = 0
            vl_curl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
            let head = HTTPResponseHead(statusCode: status, fields: fields(of: easy, interim: status / 100 == 1))
            if status / 100 != 1 { exchange.headSeen = true }
            return exchange.transfer.receive(head: head) ? length : 0
        }

        /// The header fields of the response under way, through libcurl's header API.
        private static func fields(of easy: UnsafeMutableRawPointer, interim: Bool) -> [HTTPResponseHead.Field] {
            var fields: [HTTPResponseHead.Field] = []
            let origin = UInt32(interim ? CURLH_1XX : CURLH_HEADER)
            var previous: UnsafeMutablePointer<curl_header>?
            while let header = curl_easy_nextheader(easy, origin, -1, previous) {
                if let name = header.pointee.name, let value = header.pointee.value {
                    fields.append(HTTPResponseHead.Field(name: String(cString: name), value: String(cString: value)))
                }
                previous = header
            }
            return fields
        }
    }
}
