import Dispatch
import Foundation
import VipsCore

/// A pool of decode workers: `vipsload __decode-worker` processes (see
/// `DecodeWorker`) that decode the inputs a crash or a hang must not take the
/// whole run down with.
///
/// Each request takes an idle worker (or starts one, up to `capacity`),
/// writes the request to its standard input and waits for the reply no longer
/// than the timeout. A worker that dies (a signal, an exit) fails only its
/// input, with `.crashed` naming the signal; one that runs past the timeout is
/// killed and its input fails with `.timedOut`. Either way the worker is
/// dropped and the next request starts a fresh one. Calls block their thread
/// (use `decode`/`info` from a thread of your own, or the async versions).
///
/// Every worker is owned: `shutdown()` ends them, and `endAll()` (SIGINT and
/// SIGTERM) kills every worker of every pool. A worker also ends itself when
/// its parent is gone.
final class WorkerPool: Sendable {
    /// One running worker.
    private struct Worker {
        let pid: pid_t
        /// The worker's standard input (requests).
        let requests: Int32
        /// The worker's original standard output (replies).
        let replies: Int32
    }

    private struct State {
        var idle: [Worker] = []
        var running = 0
        var closed = false
    }

    let capacity: Int
    let timeoutSeconds: Int
    /// The worker's arguments after the subcommand (decoder, processing and memory options).
    private let workerArguments: [String]
    private let state = LockedState(State())
    private let slots: DispatchSemaphore
    /// Where the blocking waits run for the async calls.
    private let queue = DispatchQueue(label: "vipsload-workers", attributes: .concurrent)

    /// Every live worker's process id, for `endAll()`.
    private static let live = LockedState(Set<pid_t>())

    /// The workers' memory cap in MB (0: none), named when a worker dies.
    let workerMemory: Int

    init(capacity: Int, timeoutSeconds: Int, workerMemory: Int, workerArguments: [String]) {
        self.capacity = max(1, capacity)
        self.workerMemory = workerMemory
        self.timeoutSeconds = timeoutSeconds
        self.workerArguments = workerArguments
        slots = DispatchSemaphore(value: self.capacity)
        // A write to a worker that just died must fail with EPIPE, not kill us.
        signal(SIGPIPE, SIG_IGN)
    }

    /// Decodes the file at `path` (or `data`) as the workers' options say
    /// (size, mode), keeping every frame with `animated` and the metadata
    /// with `keepMetadata` (nil: as the workers' options say), or as
    /// `geometry` says when given, as the pipeline would; messages call the
    /// input `name` when given (a download's URL).
    func decode(
        path: String?, data: Data = Data(), name: String? = nil, geometry: WorkerProtocol.Geometry? = nil,
        animated: Bool? = nil, keepMetadata: Bool? = nil
    ) async -> Result<ThumbEngine.Output, VipsError> {
        await onQueue { [self] in
            request(
                WorkerProtocol.Request(
                    operation: "thumb", path: path, name: name, geometry: geometry, animated: animated,
                    keepMetadata: keepMetadata),
                body: data
            ).flatMap {
                reply, pixels in
                Result { () throws(VipsError) -> ThumbEngine.Output in try Self.output(reply, pixels) }
            }
        }
    }

    /// The bitmap or animation a worker's reply carries, checked against its pixels.
    private static func output(_ reply: WorkerProtocol.Reply, _ pixels: Data) throws(VipsError) -> ThumbEngine.Output {
        let metadata = reply.keptMetadata ? ImageMetadata(exif: reply.exif, hadICCProfile: reply.hadICCProfile) : nil
        let source = BitmapSource(info: reply.info, decodedLeniently: reply.decodedLeniently, metadata: metadata)
        guard let delays = reply.delays else {
            let bitmap = try Bitmap(
                width: reply.width, height: reply.height, channels: reply.channels,
                scale: reply.scale, pixels: pixels)
            return .still(bitmap.withSource(source))
        }
        let (frameBytes, overflow) = (reply.width * reply.channels).multipliedReportingOverflow(by: reply.height)
        guard !overflow, frameBytes > 0, !delays.isEmpty, pixels.count == frameBytes * delays.count else {
            throw VipsError(
                .internal,
                "a decode worker sent \(pixels.count) bytes for \(delays.count) frames of "
                    + "\(reply.width)×\(reply.height)×\(reply.channels)")
        }
        var frames: [Bitmap] = []
        for index in delays.indices {
            let frame = pixels[pixels.startIndex + index * frameBytes..<pixels.startIndex + (index + 1) * frameBytes]
            frames.append(
                try Bitmap(
                    width: reply.width, height: reply.height, channels: reply.channels,
                    scale: reply.scale, pixels: Data(frame)
                ).withSource(source))
        }
        return .animation(try AnimatedBitmap(frames: frames, delays: delays, loopCount: reply.loopCount))
    }

    /// Probes the header of the file at `path` (or of `data`); messages call
    /// the input `name` when given (a download's URL).
    func info(path: String?, data: Data = Data(), name: String? = nil) -> Result<ImageInfo, VipsError> {
        request(WorkerProtocol.Request(operation: "info", path: path, name: name), body: data).map { reply, _ in
            reply.info
        }
    }

    private func onQueue<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: body()) }
        }
    }

    /// Ends every idle worker and refuses new requests.
    func shutdown() {
        let idle = state.withLock { state -> [Worker] in
            state.closed = true
            defer { state.idle = [] }
            return state.idle
        }
        for worker in idle { end(worker, kill: false) }
    }

    /// Kills every worker of every pool (SIGINT, SIGTERM).
    static func endAll() {
        for pid in live.withLock({ $0 }) { kill(pid, SIGKILL) }
    }

    // MARK: - One request

    private func request(
        _ request: WorkerProtocol.Request, body: Data
    ) -> Result<(WorkerProtocol.Reply, Data), VipsError> {
        slots.wait()
        defer { slots.signal() }
        let label = request.name ?? request.path ?? "<\(body.count) bytes>"
        let worker: Worker
        switch takeWorker() {
        case .success(let taken): worker = taken
        case .failure(let error): return .failure(error)
        }
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(timeoutSeconds) * 1_000_000_000
        let sent = WorkerProtocol.write(request, body: body, to: worker.requests)
        let reply =
            sent
            ? WorkerProtocol.read(WorkerProtocol.Reply.self, from: worker.replies, deadline: deadline)
            : .failure(.closed)
        switch reply {
        case .success(let (header, _)) where WorkerProtocol.refusal(of: header.version, from: "worker") != nil:
            end(worker, kill: true)
            return .failure(WorkerProtocol.refusal(of: header.version, from: "worker") ?? .cancelled(label))
        case .success(let (header, pixels)):
            giveBack(worker)
            if let kind = header.errorKind {
                return .failure(VipsError(VipsError.Kind(rawValue: kind) ?? .internal, header.errorMessage ?? kind))
            }
            return .success((header, pixels))
        case .failure where SignalHandling.stopRequested:
            // SIGINT/SIGTERM ended the workers (`endAll()`): the input was stopped, not crashed.
            end(worker, kill: true)
            return .failure(VipsError(.cancelled, "\(label): stopped by a signal"))
        case .failure(.timedOut):
            end(worker, kill: true)
            return .failure(
                VipsError(
                    .timedOut,
                    "\(label): decoding took longer than \(timeoutSeconds) s (--timeout); its worker was killed"))
        case .failure(.closed), .failure(.malformed):
            let status = end(worker, kill: false)
            let signal = status & 0x7f
            let cap =
                workerMemory > 0 && [SIGABRT, SIGSEGV, SIGBUS].contains(signal)
                ? " (perhaps out of memory: workers are capped at \(workerMemory) MB, --worker-memory)" : ""
            return .failure(
                VipsError(.crashed, "\(label): the decoder \(Self.describe(status))\(cap); only this input failed"))
        }
    }

    private func takeWorker() -> Result<Worker, VipsError> {
        let idle = state.withLock { state -> Worker?? in
            guard !state.closed else { return .some(nil) }
            return state.idle.popLast().map { .some($0) } ?? nil
        }
        switch idle {
        case .some(.some(let worker)): return .success(worker)
        case .some(.none): return .failure(VipsError(.cancelled, "the decode workers were shut down"))
        case .none: return spawn()
        }
    }

    private func giveBack(_ worker: Worker) {
        let keep = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.idle.append(worker)
            return true
        }
        if !keep { end(worker, kill: false) }
    }

    /// Closes the worker's pipes, kills it if asked, and reaps it; returns its wait status.
    @discardableResult
    private func end(_ worker: Worker, kill killing: Bool) -> Int32 {
        close(worker.requests)
        close(worker.replies)
        if killing { kill(worker.pid, SIGKILL) }
        var status: Int32 = 0
        while waitpid(worker.pid, &status, 0) < 0, errno == EINTR {}
        _ = Self.live.withLock { $0.remove(worker.pid) }
        return status
    }

    /// "was killed by SIGSEGV", "exited with status 3".
    static func describe(_ status: Int32) -> String {
        let signal = status & 0x7f
        guard signal != 0 else { return "exited with status \((status >> 8) & 0xff)" }
        let names: [Int32: String] = [
            SIGSEGV: "SIGSEGV", SIGABRT: "SIGABRT", SIGKILL: "SIGKILL", SIGBUS: "SIGBUS",
            SIGILL: "SIGILL", SIGFPE: "SIGFPE", SIGTRAP: "SIGTRAP", SIGTERM: "SIGTERM",
            SIGXCPU: "SIGXCPU", SIGINT: "SIGINT", SIGSYS: "SIGSYS"
        ]
        return "was killed by \(names[signal] ?? "signal \(signal)")"
    }

    /// Starts a worker: this executable with the hidden subcommand, on two
    /// close-on-exec pipes. One at a time (`spawnQueue`), so no worker inherits
    /// another's pipe before it is marked close-on-exec.
    private func spawn() -> Result<Worker, VipsError> {
        Self.spawnQueue.sync { spawnNow() }
    }

    private static let spawnQueue = DispatchQueue(label: "vipsload-worker-spawn")

    private static func pipeClosedOnExec(_ fds: inout [Int32]) -> Bool {
        guard pipe(&fds) == 0 else { return false }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return true
    }

    private func spawnNow() -> Result<Worker, VipsError> {
        var toWorker: [Int32] = [0, 0], fromWorker: [Int32] = [0, 0]
        guard Self.pipeClosedOnExec(&toWorker) else {
            return .failure(
                VipsError(.internal, "cannot start a decode worker: pipe: \(String(cString: strerror(errno)))"))
        }
        guard Self.pipeClosedOnExec(&fromWorker) else {
            close(toWorker[0]); close(toWorker[1])
            return .failure(
                VipsError(.internal, "cannot start a decode worker: pipe: \(String(cString: strerror(errno)))"))
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toWorker[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromWorker[1], 1)
        // Nothing else this process holds open (a parent's pipes, sockets) goes to the worker.
        // (Listed now, under `spawnQueue`; a descriptor opened meanwhile by another thread is
        // close-on-exec if it is ours, and the worker's parent watch covers the rest.)
        let open = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).compactMap {
            Int32($0)
        }
        for fd in open where fd > 2 { posix_spawn_file_actions_addclose(&actions, fd) }
        let arguments = ["vipsload", DecodeWorker.command, "--parent", String(getpid())] + workerArguments
        var environment = ProcessInfo.processInfo.environment
        // A crashing worker dies at once instead of writing a backtrace first.
        environment["SWIFT_BACKTRACE"] = "enable=no"
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        // The spawning thread's signal mask (Dispatch's threads block most
        // signals) is not the worker's: it starts with none blocked, and with
        // SIGTERM at its default (SIGINT stays ignored: the parent handles it).
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t(), defaults = sigset_t()
        sigemptyset(&empty)
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGTERM)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let result = posix_spawn(&pid, "/proc/self/exe", &actions, &attributes, argv, envp)
        close(toWorker[0])
        close(fromWorker[1])
        guard result == 0 else {
            close(toWorker[1]); close(fromWorker[0])
            return .failure(VipsError(.internal, "cannot start a decode worker: \(String(cString: strerror(result)))"))
        }
        _ = Self.live.withLock { $0.insert(pid) }
        return .success(Worker(pid: pid, requests: toWorker[1], replies: fromWorker[0]))
    }
}
