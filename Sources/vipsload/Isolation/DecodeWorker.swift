import Dispatch
import Foundation
import VipsCore

/// `vipsload __decode-worker [decoder and processing options]`: the hidden
/// subcommand a `WorkerPool` starts. It caps its own address space
/// (`--worker-memory MB`, `setrlimit(RLIMIT_AS)`), then answers requests read
/// from standard input on the standard output it had at start-up (its later
/// standard output goes to stderr, so nothing a library prints can corrupt a
/// reply), until standard input closes or its parent is gone.
///
/// Test-only: with `VIPSLOAD_WORKER_TEST_FAULTS=1` in the environment, an
/// input whose path contains `__crash-SIGSEGV__` (or another signal name),
/// `__hang__` or `__balloon__` makes the worker die by that signal, spin
/// for ever (saying so on stderr first), or allocate memory without end. The tests of the isolation use
/// it; nothing else sets it.
enum DecodeWorker {
    static let command = "__decode-worker"

    static func run(_ arguments: [String]) -> Int32 {
        let parser = ArgumentParser(
            valueOptions: DecoderFlags.valueOptions.union(ProcessingFlags.valueOptions).union([
                "worker-memory", "parent"
            ]),
            flagOptions: DecoderFlags.flagOptions.union(ProcessingFlags.flagOptions))
        let decoder: ImageDecoder
        let processing: ProcessingFlags.Settings
        let parent: pid_t
        do throws(ArgumentParser.UsageError) {
            let parsed = try parser.parse(arguments)
            // The pool's process id: a parent killed before this line ran is still noticed.
            parent = pid_t(try parsed.int("parent", default: Int(getppid()), in: 1...Int(Int32.max)))
            let megabytes = try parsed.int(
                "worker-memory", default: IsolationFlags.defaultWorkerMemory, in: 0...1_048_576)
            if megabytes > 0 {
                let bytes = rlim_t(megabytes) << 20
                var limit = rlimit(rlim_cur: bytes, rlim_max: bytes)
                guard setrlimit(Int32(RLIMIT_AS.rawValue), &limit) == 0 else {
                    Terminal.err(
                        "vipsload \(command): cannot cap memory at \(megabytes) MB: \(String(cString: strerror(errno)))"
                    )
                    return 2
                }
            }
            decoder = ImageDecoder(options: try DecoderFlags.options(parsed))
            processing = try ProcessingFlags.settings(parsed)
        } catch {
            Terminal.err("vipsload \(command): \(error.description)")
            return 2
        }
        // One thread per decode: the parent runs several workers at once.
        try? VipsRuntime.setThreadsPerImage(1)
        let replies = dup(1)
        dup2(2, 1)
        watchParent(parent)
        let faults = ProcessInfo.processInfo.environment["VIPSLOAD_WORKER_TEST_FAULTS"] == "1"
        while true {
            guard
                case .success(let (request, body)) = WorkerProtocol.read(
                    WorkerProtocol.Request.self, from: 0, deadline: nil)
            else {
                return 0
            }
            // A download's fault is named by its URL (`name`), a file's by its path.
            if faults { for named in [request.path, request.name].compactMap({ $0 }) { injectFault(named) } }
            let input: ImageInput = request.path.map { .file($0) } ?? .data(body)
            // Messages name what the parent says the input is (a download's URL), not its file.
            var decoder = decoder
            decoder.inputName = request.name
            var reply = WorkerProtocol.Reply()
            var pixels = Data()
            do throws(VipsError) {
                if let refused = WorkerProtocol.refusal(of: request.version, from: "parent") { throw refused }
                if request.operation == "info" {
                    reply.describe(try decoder.info(input))
                } else if let geometry = request.geometry {
                    // A server's request: its own size and mode, one still image.
                    let (size, mode) = try geometry.target()
                    let bitmap = try decoder.decode(
                        input, size: size, mode: mode, scale: geometry.scale, allowUpscale: geometry.allowUpscale,
                        keepingMetadata: geometry.keepMetadata)
                    describe(bitmap, into: &reply)
                    pixels = bitmap.pixelData
                } else if request.animated ?? processing.animated {
                    // As `ImagePipeline.animatedImage(for:)`: every frame, fitted alike.
                    let animation = try decoder.decodeAnimation(input, size: processing.size)
                    // Each frame carries the source's header, read once by the decode.
                    if let info = animation.frames.first?.source?.info { reply.describe(info) }
                    reply.width = animation.width
                    reply.height = animation.height
                    reply.channels = animation.frames[0].channels
                    reply.delays = animation.delays
                    reply.loopCount = animation.loopCount
                    for frame in animation.frames { pixels.append(frame.pixelData) }
                } else {
                    // As the pipeline decodes a thumbnail request (`ThumbEngine`).
                    let bitmap = try decoder.decode(
                        input, size: processing.size, mode: processing.mode,
                        keepingMetadata: request.keepMetadata ?? processing.keepMetadata)
                    describe(bitmap, into: &reply)
                    pixels = bitmap.pixelData
                }
            } catch {
                let error = request.name.map { error.decodeError(naming: $0) } ?? error
                reply.errorKind = error.kind.rawValue
                reply.errorMessage = error.message
            }
            guard WorkerProtocol.write(reply, body: pixels, to: replies) else { return 0 }
            VipsRuntime.releaseFreedMemory()
        }
    }

    /// A decoded still image's size and source header, into its reply.
    private static func describe(_ bitmap: Bitmap, into reply: inout WorkerProtocol.Reply) {
        reply.width = bitmap.width
        reply.height = bitmap.height
        reply.channels = bitmap.channels
        reply.scale = bitmap.scale
        if let source = bitmap.source {
            reply.describe(source.info)
            reply.decodedLeniently = source.decodedLeniently
            if let metadata = source.metadata {
                reply.keptMetadata = true
                reply.exif = metadata.exif
                reply.hadICCProfile = metadata.hadICCProfile
            }
        }
    }

    /// Ends the worker when its parent is gone, even in the middle of a decode
    /// that never returns (standard input's end is only seen between requests).
    private static func watchParent(_ parent: pid_t) {
        let thread = Thread {
            while getppid() == parent { sleep(1) }
            _exit(0)
        }
        thread.start()
    }

    /// The test-only faults described above.
    private static func injectFault(_ path: String) {
        let name = URL(fileURLWithPath: path).lastPathComponent
        let signals: [String: Int32] = ["SIGSEGV": SIGSEGV, "SIGABRT": SIGABRT, "SIGKILL": SIGKILL, "SIGBUS": SIGBUS]
        for (signalName, number) in signals where name.contains("__crash-\(signalName)__") {
            signal(number, SIG_DFL)
            raise(number)
        }
        if name.contains("__hang__") {
            // Said on stderr (the parent's), so a test can wait for the hang instead of polling for it.
            Terminal.err("vipsload \(command): hanging on \(name) (test fault)")
            while true { sleep(1) }
        }
        if name.contains("__balloon__") {
            var kept: [UnsafeMutableRawPointer] = []
            while let block = malloc(16 << 20) {
                memset(block, 1, 16 << 20)
                kept.append(block)
            }
            // The cap stopped it: fail as libvips' allocator does when memory runs out.
            Terminal.err("vipsload \(command): out of memory after \(kept.count * 16) MB")
            signal(SIGABRT, SIG_DFL)
            abort()
        }
    }
}
