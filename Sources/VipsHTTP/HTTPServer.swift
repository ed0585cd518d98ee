import CMicroHTTPD
import Dispatch
import Foundation
import VipsSync

#if canImport(Glibc)
    import Glibc
#endif

/// The HTTP layer: a libmicrohttpd daemon with internal epoll threads,
/// HTTP/1.1 keep-alive, and connections suspended while their answer is made.
///
/// libmicrohttpd's threads only parse requests and send responses. A
/// handler answers at once what it can (a cached response, an error), and
/// defers the rest to an async function, run in a task the server owns: the
/// connection is suspended (libmicrohttpd stops polling it, so its thread
/// serves other connections), watched for the client hanging up
/// (`HangupWatcher`, whose report cancels the task), and resumed from the
/// task once it has the answer (`MHD_resume_connection` is safe from any thread with
/// `MHD_ALLOW_SUSPEND_RESUME`); libmicrohttpd then calls the handler again
/// on its own thread, where the answer is queued. No libmicrohttpd thread
/// ever waits for a decode.
///
/// Slow clients: libmicrohttpd's connection timeout is an idle timer, which
/// each byte restarts; `ConnectionDeadlines` adds a deadline for each
/// request's header section and evicts connections waiting for a header
/// when the table is nearly full, from the connection notifications and the
/// request callbacks.
///
/// Lifecycle: `init` starts listening; `quiesce()` stops accepting
/// connections (open ones keep being served); `waitUntilIdle()` returns
/// once no request is in flight; `answerSuspended(with:)` cancels the work
/// of whatever is still suspended and answers it; `stop()` closes every connection and ends the
/// threads (it must be called, and only once nothing is suspended).
package final class HTTPServer: Sendable {
    private struct Table {
        var nextID: UInt64 = 0
        /// Requests whose request line arrived and whose completion has not.
        var active = 0
        /// Suspended requests, by id, for the hang-up watcher and for `answerSuspended`.
        var suspended: [UInt64: HTTPExchange] = [:]
        /// Resumed with true when `active` reaches 0 (or false at their deadline).
        var idleWaiters: [UInt64: CheckedContinuation<Bool, Never>] = [:]
        /// The listening socket `MHD_quiesce_daemon` handed back, closed by `stop()`.
        var quiescedSocket: Int32?
        var stopped = false
    }

    package let configuration: Configuration
    /// The port the server listens on (the one the kernel chose for port 0).
    package var port: UInt16 { boundPort }
    private let handler: any HTTPHandler
    private let table = LockedState(Table())
    private let watcher: HangupWatcher
    /// Header deadlines and eviction (slowloris), told by libmicrohttpd's callbacks.
    package let deadlines: ConnectionDeadlines
    // Written once in init, before any other thread can see the server.
    nonisolated(unsafe) private var daemon: OpaquePointer?
    nonisolated(unsafe) private var boundPort: UInt16 = 0
    /// libmicrohttpd's error logger's target (`CMicroHTTPD`), freed with the server.
    // Written once in init (before libmicrohttpd runs), read only by libmicrohttpd.
    nonisolated(unsafe) private let logger = UnsafeMutablePointer<vl_mhd_logger>.allocate(capacity: 1)
    // The reference libmicrohttpd's callbacks hold, released by `stop()`.
    nonisolated(unsafe) private var retained: Unmanaged<HTTPServer>?

    /// Starts listening on `configuration.address` and `port`.
    ///
    /// - Throws: `.invalidArgument` for an address that is not an IP literal;
    ///   `.io` when the daemon cannot start (the port is taken, say).
    package init(configuration: Configuration, handler: any HTTPHandler) throws(HTTPServerError) {
        self.configuration = configuration
        self.handler = handler
        let table = self.table
        deadlines = ConnectionDeadlines(
            headerTimeout: configuration.headerTimeout,
            connectionTimeoutSeconds: configuration.connectionTimeoutSeconds,
            maxConnections: configuration.maxConnections, threads: configuration.threads)
        watcher = try HangupWatcher { id in
            // On the watcher's thread: the request's work is told, outside the lock.
            let exchange = table.withLock { $0.suspended[id] }
            exchange?.clientHungUp()
        }
        var address = try SocketAddress(configuration.address, port: configuration.port)
        var flags =
            MHD_USE_EPOLL_INTERNAL_THREAD.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue | MHD_USE_ERROR_LOG.rawValue
            | MHD_USE_TURBO.rawValue
        if address.isIPv6 { flags |= MHD_USE_IPv6.rawValue }
        let retained = Unmanaged.passRetained(self)
        logger.initialize(to: vl_mhd_logger(handler: Self.logMessage, cls: retained.toOpaque()))
        let started = address.withSockaddr { sockaddr -> OpaquePointer? in
            var options: [MHD_OptionItem] = [
                MHD_OptionItem(
                    option: .CONNECTION_LIMIT, value: max(1, configuration.maxConnections), ptr_value: nil),
                MHD_OptionItem(
                    option: .PER_IP_CONNECTION_LIMIT, value: max(0, configuration.maxConnectionsPerIP),
                    ptr_value: nil),
                MHD_OptionItem(
                    option: .CONNECTION_TIMEOUT, value: max(0, configuration.connectionTimeoutSeconds),
                    ptr_value: nil),
                MHD_OptionItem(
                    option: .CONNECTION_MEMORY_LIMIT, value: max(4096, configuration.connectionMemoryBytes),
                    ptr_value: nil),
                MHD_OptionItem(
                    option: .LISTEN_BACKLOG_SIZE, value: max(1, configuration.listenBacklog), ptr_value: nil),
                MHD_OptionItem(option: .SOCK_ADDR, value: 0, ptr_value: UnsafeMutableRawPointer(sockaddr))
            ]
            if configuration.threads > 1 {
                options.append(
                    MHD_OptionItem(option: .THREAD_POOL_SIZE, value: configuration.threads, ptr_value: nil))
            }
            options.append(MHD_OptionItem(option: .END, value: 0, ptr_value: nil))
            return vl_mhd_start_daemon(
                flags, configuration.port, retained.toOpaque(), logger, Self.accessHandler,
                Self.requestCompleted, Self.requestStarted, Self.connectionNotified, &options)
        }
        guard let started else {
            logger.deinitialize(count: 1)
            retained.release()
            watcher.stop()
            throw HTTPServerError(
                .cannotListen,
                "cannot listen on \(address.description) (the port may be in use, or the address not this host's)")
        }
        daemon = started
        self.retained = retained
        boundPort = vl_mhd_bound_port(started)
    }

    deinit {
        logger.deallocate()
    }

    /// Requests in flight: their request line arrived, their response is not sent yet.
    package var activeRequests: Int { table.withLock { $0.active } }

    /// Connections open now.
    package var openConnections: Int {
        guard let daemon, !table.withLock({ $0.stopped }) else { return 0 }
        return Int(vl_mhd_current_connections(daemon))
    }

    // MARK: - Draining and stopping

    /// Stops accepting connections; open connections are still served.
    /// Connections that arrive later are refused.
    package func quiesce() {
        guard let daemon else { return }
        let alreadyQuiesced = table.withLock { $0.quiescedSocket != nil || $0.stopped }
        guard !alreadyQuiesced else { return }
        let socket = MHD_quiesce_daemon(daemon)
        guard socket >= 0 else { return }
        // The daemon no longer polls it; shutting it down makes the kernel refuse
        // new connections now instead of queueing them until `stop()` closes it.
        Glibc.shutdown(socket, Int32(SHUT_RDWR))
        table.withLock { $0.quiescedSocket = socket }
    }

    /// Returns true once no request is in flight, or false when `timeout` passes first.
    package func waitUntilIdle(timeout: Duration) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let id = table.withLock { table -> UInt64? in
                guard table.active > 0, !table.stopped else { return nil }
                table.nextID += 1
                table.idleWaiters[table.nextID] = continuation
                return table.nextID
            }
            guard let id else {
                continuation.resume(returning: true)
                return
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout.dispatchInterval) { [table] in
                let waiter = table.withLock { $0.idleWaiters.removeValue(forKey: id) }
                waiter?.resume(returning: false)
            }
        }
    }

    /// Cancels the work of every suspended request and answers it with the
    /// response `make()` gives (before `stop()`, which must not find any).
    package func answerSuspended(with make: () -> HTTPResponse?) {
        let suspended = table.withLock { Array($0.suspended.values) }
        for exchange in suspended {
            // Answered first: the cancelled work's own late answer then finds it answered.
            answer(exchange, with: make(), note: nil)
            exchange.cancelWork()
        }
    }

    /// Closes every connection (a request still suspended unanswered, its work
    /// cancelled) and ends the threads. Later calls do nothing.
    package func stop() {
        guard let daemon else { return }
        let first = table.withLock { table -> Bool in
            defer { table.stopped = true }
            return !table.stopped
        }
        guard first else { return }
        // A request suspended since the last `answerSuspended` (one that was being handled as
        // the drain began) is closed unanswered: libmicrohttpd aborts the process when it is
        // stopped with a suspended connection. Those suspended from now on close themselves.
        let suspended = table.withLock { Array($0.suspended.values) }
        for exchange in suspended {
            answer(exchange, with: nil, note: nil)
            exchange.cancelWork()
        }
        MHD_stop_daemon(daemon)
        deadlines.stop()
        watcher.stop()
        if let socket = table.withLock({ $0.quiescedSocket }) { close(socket) }
        let waiters = table.withLock { table -> [CheckedContinuation<Bool, Never>] in
            defer { table.idleWaiters = [:] }
            return Array(table.idleWaiters.values)
        }
        for waiter in waiters { waiter.resume(returning: true) }
        retained?.release()
    }

    // MARK: - Answers from any thread

    /// Stores `response` for a suspended request and resumes its connection
    /// (the first answer only; nil closes the connection unanswered).
    func answer(_ exchange: HTTPExchange, with response: HTTPResponse?, note: String?) {
        guard let socket = exchange.store(response, note: note) else { return }
        table.withLock { _ = $0.suspended.removeValue(forKey: exchange.id) }
        if socket >= 0 { watcher.unwatch(socket) }
        MHD_resume_connection(exchange.connection)
    }

    // MARK: - libmicrohttpd's callbacks (its threads)

    /// The request line arrived: a new exchange becomes the request's context.
    private func begin(_ target: String, connection: OpaquePointer) -> UnsafeMutableRawPointer {
        let id = table.withLock { table -> UInt64 in
            table.active += 1
            table.nextID += 1
            return table.nextID
        }
        let exchange = HTTPExchange(id: id, connection: connection, target: target)
        return Unmanaged.passRetained(exchange).toOpaque()
    }

    private func handle(_ exchange: HTTPExchange, method: String) -> MHD_Result {
        let connection = exchange.connection
        switch exchange.phase {
        case .headers where method == "GET" || method == "HEAD":
            // libmicrohttpd closes a connection whose response was queued in
            // this first call (before the request is known to be complete), so
            // GET and HEAD are answered in the next call, which follows at once
            // (once any body is read and dropped): keep-alive is kept. Other
            // methods are refused now, and their connection closed.
            exchange.markHeadersSeen()
            return .YES
        case .headers, .active:
            let client = SocketAddress.text(of: vl_mhd_client_address(connection))
            exchange.noteRequest(method: method, clientAddress: client)
            let request = HTTPRequest(
                method: method, target: exchange.target, clientAddress: client, connection: connection)
            switch handler.handle(request) {
            case .respond(let response, let note):
                guard let response else { return .NO }
                return queue(response, on: exchange, note: note)
            case .later(let work):
                MHD_suspend_connection(connection)
                let socket = vl_mhd_connection_fd(connection)
                exchange.markSuspended(socket: socket)
                let stopping = table.withLock { table -> Bool in
                    guard !table.stopped else { return true }
                    table.suspended[exchange.id] = exchange
                    return false
                }
                if stopping {
                    // `stop()` began meanwhile and may not find it: nothing may stay suspended
                    // (libmicrohttpd aborts the process), so the connection is closed unanswered now.
                    _ = exchange.store(nil, note: nil)
                    MHD_resume_connection(connection)
                    return .YES
                }
                if socket >= 0 { watcher.watch(socket, id: exchange.id) }
                // The server's task: a hang-up (the watcher) or a stop cancels it.
                exchange.attach(
                    Task { [self] in
                        let answer = await work()
                        exchange.detachWork()
                        self.answer(exchange, with: answer.response, note: answer.note)
                    })
                return .YES
            }
        case .ready:
            guard let (response, clientGone) = exchange.takeReady() else { return .YES }
            // A client that hung up gets nothing, and no response closes: the connection is closed.
            guard !clientGone, let response else { return .NO }
            return queue(response, on: exchange, note: nil)
        case .suspended, .answered:
            return .YES
        }
    }

    /// A message of libmicrohttpd's own, for the handler.
    fileprivate func message(_ text: String) {
        handler.serverMessage(text)
    }

    private func queue(_ response: HTTPResponse, on exchange: HTTPExchange, note: String?) -> MHD_Result {
        exchange.noteSent(response, note: note)
        return MHD_queue_response(exchange.connection, UInt32(response.status), response.pointer)
    }

    private func complete(_ exchange: HTTPExchange, _ termination: MHD_RequestTerminationCode) {
        let (method, client) = exchange.requestLine
        let outcome = exchange.outcome
        // A connection the server closed before its header was complete: 408, as nginx logs it.
        let closedByServer = deadlines.closing(UInt(bitPattern: exchange.connection)) != nil
        let status =
            outcome.status ?? (closedByServer ? 408 : Int(vl_mhd_connection_status(exchange.connection)))
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - exchange.started) / 1e9
        let failed = termination != .REQUEST_TERMINATED_COMPLETED_OK && !closedByServer
        handler.completed(
            HTTPCompletion(
                method: method, target: exchange.target, clientAddress: client, status: status,
                bytes: outcome.bytes, seconds: seconds, note: outcome.note,
                clientGone: outcome.clientGone || (failed && termination != .REQUEST_TERMINATED_DAEMON_SHUTDOWN)))
        let waiters = table.withLock { table -> [CheckedContinuation<Bool, Never>] in
            table.active -= 1
            table.suspended[exchange.id] = nil
            guard table.active == 0 else { return [] }
            defer { table.idleWaiters = [:] }
            return Array(table.idleWaiters.values)
        }
        for waiter in waiters { waiter.resume(returning: true) }
    }

    private static let requestStarted:
        @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?) -> UnsafeMutableRawPointer? = {
            context, uri, connection in
            guard let context, let connection else { return nil }
            let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
            return server.begin(uri.map { String(cString: $0) } ?? "", connection: connection)
        }

    private static let accessHandler: MHD_AccessHandlerCallback = {
        context, connection, _, method, _, _, uploadSize, requestContext in
        guard let context, connection != nil, let stored = requestContext?.pointee else { return .NO }
        // A request body is never read: the first call answers, and
        // libmicrohttpd closes the connection after a response sent before the body.
        if let uploadSize, uploadSize.pointee != 0 {
            uploadSize.pointee = 0
            return .YES
        }
        let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
        let exchange = Unmanaged<HTTPExchange>.fromOpaque(stored).takeUnretainedValue()
        // Called once the header section is complete (and again later): its deadline is over.
        server.deadlines.headersArrived(UInt(bitPattern: connection))
        return server.handle(exchange, method: method.map { String(cString: $0) } ?? "")
    }

    private static let logMessage: vl_mhd_message_handler = { context, text in
        guard let context, let text else { return }
        let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
        let message = String(cString: text).trimmingCharacters(in: .whitespacesAndNewlines)
        // What libmicrohttpd says when the handler drops the connection of a
        // client that hung up: the server's own doing, not news.
        guard !message.hasPrefix("Application reported internal error") else { return }
        server.message(message)
    }

    private static let requestCompleted: MHD_RequestCompletedCallback = {
        context, connection, requestContext, termination in
        guard let context, let stored = requestContext?.pointee else { return }
        requestContext?.pointee = nil
        let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
        let exchange = Unmanaged<HTTPExchange>.fromOpaque(stored).takeRetainedValue()
        server.complete(exchange, termination)
        // A kept-alive connection now waits for its next request's header.
        server.deadlines.requestEnded(UInt(bitPattern: connection))
    }

    /// A connection opened or closed: the header deadlines track it from
    /// the accept (and may evict another one) until libmicrohttpd closes it.
    private static let connectionNotified: MHD_NotifyConnectionCallback = { context, connection, _, code in
        guard let context, let connection else { return }
        let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
        let key = UInt(bitPattern: connection)
        switch code {
        case .CONNECTION_NOTIFY_STARTED:
            server.deadlines.opened(
                key, fd: vl_mhd_connection_fd(connection),
                worker: UInt(bitPattern: vl_mhd_connection_daemon(connection)))
        default:
            server.deadlines.closed(key)
        }
    }
}
