import Foundation
import VipsCore

/// `--isolate`, `--timeout` and `--worker-memory`: which inputs `thumb` and
/// `info` decode in worker processes (`WorkerPool`), and the limits of each.
enum IsolationFlags {
    static let valueOptions: Set<String> = ["isolate", "timeout", "worker-memory"]
    /// A worker's address-space cap when `--worker-memory` is not given, in MB.
    static let defaultWorkerMemory = 4096
    static let defaultTimeout = 30
    static let help = """
          --isolate WHAT     decode in worker processes, so an input that crashes or hangs
                             its decoder fails alone: 'optin' (default: the formats only
                             --allow enables), 'all' (every input), 'none'
          --timeout SECONDS  a decode running longer fails with timedOut (default
                             \(defaultTimeout)): an isolated one's worker is killed, one in this
                             process is stopped where libvips can stop it
          --worker-memory MB cap each worker's address space (RLIMIT_AS; default
                             \(defaultWorkerMemory), 0 for no cap): an input that needs more fails alone
        """

    /// Which inputs go to workers.
    enum Scope: String {
        case optIn = "optin"
        case all
        case none
    }

    /// The parsed flags.
    struct Settings {
        var scope: Scope
        var timeoutSeconds: Int
        var workerMemory: Int

        /// Whether an input sniffed as `format` (nil: unknown) is decoded in a worker.
        func isolates(_ format: ImageFormat?) -> Bool {
            switch scope {
            case .none: return false
            case .all: return true
            case .optIn:
                guard let format else { return false }
                return !ImageFormat.defaultAllowed.contains(format)
            }
        }
    }

    static func settings(_ parsed: ArgumentParser.Parsed) throws(ArgumentParser.UsageError) -> Settings {
        let scope = Scope(rawValue: try parsed.choice("isolate", ["optin", "all", "none"], default: "optin")) ?? .optIn
        return Settings(
            scope: scope,
            timeoutSeconds: try parsed.int("timeout", default: defaultTimeout, in: 1...86_400),
            workerMemory: try parsed.int("worker-memory", default: defaultWorkerMemory, in: 0...1_048_576))
    }

    /// The format sniffed from the first bytes of the file at `path`, or nil.
    static func sniff(path: String) -> ImageFormat? {
        guard let handle = FileHandleReader(path: path) else { return nil }
        return ImageFormat.sniff(handle.prefix)
    }

    /// The first 4 KiB of a file.
    private struct FileHandleReader {
        let prefix: [UInt8]

        init?(path: String) {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            defer { close(fd) }
            var bytes = [UInt8](repeating: 0, count: 4096)
            let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { return nil }
            prefix = Array(bytes[..<count])
        }
    }
}
