import CMicroHTTPD
import CSystem
import Dispatch
import Foundation
import VipsSync

#if canImport(Glibc)
    import Glibc
#endif

/// Notices clients that hang up while their request is suspended.
///
/// libmicrohttpd does not watch a suspended connection's socket at all (it
/// takes it out of its own epoll set), so a client that closes its
/// connection while its image is being made would go unnoticed until the
/// answer is sent. This watcher keeps its own epoll set of the suspended
/// sockets, each registered for `EPOLLRDHUP` (the peer closed or shut down
/// its side; `EPOLLHUP` and `EPOLLERR`, a reset, come with it) and one shot,
/// so data a client pipelines does not wake it. One thread, named
/// `vipsload-hangup`, blocks in `epoll_wait` and reports each hang-up with
/// the id it was registered under; `stop()` ends it.
///
/// A socket is removed before its connection is resumed, so libmicrohttpd
/// never closes (and the kernel never reuses) a descriptor still in the set.
final class HangupWatcher: Sendable {
    private let epoll: Int32
    /// Written by `stop()` to wake the thread.
    private let wake: Int32
    private let ended = DispatchSemaphore(value: 0)
    private let stopped = LockedState(false)

    /// Starts the thread; `onHangup(id)` is called on it for each hang-up.
    init(onHangup: @escaping @Sendable (UInt64) -> Void) throws(HTTPServerError) {
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else {
            throw HTTPServerError(
                .system, "cannot create an epoll set to watch connections: \(String(cString: strerror(errno)))")
        }
        wake = vl_eventfd()
        guard wake >= 0 else {
            let code = errno
            close(epoll)
            throw HTTPServerError(
                .system, "cannot create an eventfd for the connection watcher: \(String(cString: strerror(code)))")
        }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = UInt64.max
        epoll_ctl(epoll, EPOLL_CTL_ADD, wake, &event)
        let thread = Thread { [epoll, ended] in
            ThreadNaming.setCurrentThreadName("vipsload-hangup")
            Self.run(epoll: epoll, onHangup: onHangup)
            ended.signal()
        }
        thread.start()
    }

    deinit {
        stop()
        close(epoll)
        close(wake)
    }

    /// Watches `fd` until `unwatch(fd)`; a hang-up is reported as `id`.
    func watch(_ fd: Int32, id: UInt64) {
        var event = epoll_event()
        event.events = EPOLLRDHUP.rawValue | EPOLLONESHOT.rawValue
        event.data.u64 = id
        epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event)
    }

    /// Stops watching `fd` (before its connection is resumed).
    func unwatch(_ fd: Int32) {
        epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nil)
    }

    /// Ends the thread and waits for it; later calls return at once.
    func stop() {
        let first = stopped.withLock { stopped -> Bool in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        var one: UInt64 = 1
        _ = write(wake, &one, MemoryLayout<UInt64>.size)
        ended.wait()
    }

    private static func run(epoll: Int32, onHangup: @Sendable (UInt64) -> Void) {
        var events = [epoll_event](repeating: epoll_event(), count: 64)
        while true {
            let count = events.withUnsafeMutableBufferPointer { epoll_wait(epoll, $0.baseAddress, 64, -1) }
            if count < 0 {
                if errno == EINTR { continue }
                return
            }
            for index in 0..<Int(count) {
                let id = events[index].data.u64
                if id == UInt64.max { return }
                onHangup(id)
            }
        }
    }
}
