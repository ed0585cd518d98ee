import CMicroHTTPD
import Dispatch
import Foundation
import VipsSync

/// One request on one connection, from its request line to its completion:
/// the context libmicrohttpd keeps for the request (made by the URI logger,
/// released by the completion callback).
///
/// A request answered later goes through these phases: the handler defers
/// it (`suspended`: the connection is suspended and watched for the client
/// hanging up, and the deferred work runs in the exchange's task), the
/// answer arrives from that task (`ready`: the connection is resumed),
/// libmicrohttpd calls the handler again on its thread and the answer is
/// queued there (`answered`). A hang-up cancels the task. Queueing only ever happens on
/// libmicrohttpd's thread, and resuming happens once, after the answer is
/// stored: no other thread touches the connection while libmicrohttpd works
/// on it.
final class HTTPExchange: @unchecked Sendable {
    // @unchecked: `connection` is an opaque handle that is only passed back to
    // libmicrohttpd (queued on on its thread, resumed from any thread as its
    // documentation allows); everything mutable is behind `shared`'s lock.
    enum Phase {
        /// The header fields arrived (libmicrohttpd's first call of the handler).
        case headers
        /// Waiting for the handler (libmicrohttpd's thread).
        case active
        /// Deferred: the connection is suspended until the answer comes.
        case suspended
        /// The answer came (nil: close unanswered); the connection is being resumed.
        case ready(HTTPResponse?)
        /// Queued on the connection (or the connection was dropped).
        case answered
    }

    private struct Shared {
        var phase = Phase.headers
        /// The client hung up while the request was suspended.
        var clientGone = false
        /// The deferred work's task, cancelled when the client hangs up.
        var work: Task<Void, Never>?
        /// What was queued: status and body bytes, for the completion record.
        var sentStatus: Int?
        var sentBytes = 0
        /// A note the answer carried for the access log (cache tier).
        var note: String?
        /// The method and client, once the handler has seen the request.
        var method = "-"
        var clientAddress = "-"
        /// The socket, while the request is suspended and watched.
        var socket: Int32 = -1
    }

    /// Unique for the life of the server (never reused), so a late hang-up
    /// report for a finished request finds nothing.
    let id: UInt64
    let connection: OpaquePointer
    /// The request target as sent.
    let target: String
    /// When the request line arrived (`DispatchTime` nanoseconds).
    let started: UInt64
    private let shared = LockedState(Shared())

    init(id: UInt64, connection: OpaquePointer, target: String) {
        self.id = id
        self.connection = connection
        self.target = target
        started = DispatchTime.now().uptimeNanoseconds
    }

    var phase: Phase { shared.withLock { $0.phase } }

    /// The first call of the handler is over: the next one answers.
    func markHeadersSeen() {
        shared.withLock { $0.phase = .active }
    }

    /// Records the method and client (libmicrohttpd's thread, first handler call).
    func noteRequest(method: String, clientAddress: String) {
        shared.withLock { shared in
            shared.method = method
            shared.clientAddress = clientAddress
        }
    }

    /// The method and client as recorded.
    var requestLine: (method: String, clientAddress: String) {
        shared.withLock { ($0.method, $0.clientAddress) }
    }

    /// Marks the request suspended, watched on `socket` (libmicrohttpd's
    /// thread, right after `MHD_suspend_connection`).
    func markSuspended(socket: Int32) {
        shared.withLock { shared in
            shared.phase = .suspended
            shared.socket = socket
        }
    }

    /// Stores the answer of a suspended request and returns its socket, to
    /// stop watching before the connection is resumed; nil for an answer that
    /// came too late or twice (only the first answer of a suspended request
    /// resumes it).
    func store(_ response: HTTPResponse?, note: String?) -> Int32? {
        shared.withLock { shared in
            guard case .suspended = shared.phase else { return nil }
            shared.phase = .ready(response)
            shared.note = note
            defer { shared.socket = -1 }
            return shared.socket
        }
    }

    /// The stored answer, taken on libmicrohttpd's thread after the resume
    /// (and the exchange marked answered), with whether the client is gone.
    func takeReady() -> (response: HTTPResponse?, clientGone: Bool)? {
        shared.withLock { shared in
            guard case .ready(let response) = shared.phase else { return nil }
            shared.phase = .answered
            return (response, shared.clientGone)
        }
    }

    /// Records what was queued (libmicrohttpd's thread).
    func noteSent(_ response: HTTPResponse, note: String?) {
        shared.withLock { shared in
            shared.phase = .answered
            shared.sentStatus = response.status
            shared.sentBytes = response.bodyCount
            if let note { shared.note = note }
        }
    }

    /// Status, bytes and note of what was queued, and whether the client hung up first.
    var outcome: (status: Int?, bytes: Int, note: String?, clientGone: Bool) {
        shared.withLock { ($0.sentStatus, $0.sentBytes, $0.note, $0.clientGone) }
    }

    /// The client hung up while the request was suspended: cancels the
    /// deferred work's task (once, after the lock is released).
    func clientHungUp() {
        let work = shared.withLock { shared -> Task<Void, Never>? in
            guard !shared.clientGone else { return nil }
            shared.clientGone = true
            defer { shared.work = nil }
            return shared.work
        }
        work?.cancel()
    }

    /// Records the deferred work's task; cancels it at once (after the lock)
    /// when the client is gone already.
    func attach(_ work: Task<Void, Never>) {
        let cancelNow = shared.withLock { shared -> Bool in
            guard !shared.clientGone else { return true }
            shared.work = work
            return false
        }
        if cancelNow { work.cancel() }
    }

    /// Cancels the deferred work's task, if it still runs (a stop that cannot wait).
    func cancelWork() {
        let work = shared.withLock { shared -> Task<Void, Never>? in
            defer { shared.work = nil }
            return shared.work
        }
        work?.cancel()
    }

    /// The deferred work has answered: its task is no longer the exchange's to cancel.
    func detachWork() {
        shared.withLock { $0.work = nil }
    }
}
