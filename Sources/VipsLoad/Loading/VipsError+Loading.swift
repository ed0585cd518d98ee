import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension VipsError {
    /// `error`, thrown by a data loader for `source`, as the pipeline reports
    /// it: a `VipsError` as it is; any other error once, as an error about
    /// `source` whose `underlying` is `error`, of the kind it means.
    ///
    /// | thrown | kind |
    /// |---|---|
    /// | `CancellationError`, `URLError.cancelled` | `.cancelled` |
    /// | `URLError.timedOut`, `POSIXError.ETIMEDOUT` | `.timedOut` |
    /// | other `URLError`s (no host, refused, lost, TLS) | `.network`; `.badServerResponse`: `.protocolError` |
    /// | a missing file (`CocoaError.fileReadNoSuchFile`, `.fileNoSuchFile`, `POSIXError.ENOENT`, `URLError.fileDoesNotExist`) | `.fileNotFound` |
    /// | no permission (`CocoaError.fileReadNoPermission`, `POSIXError.EACCES`, `URLError.noPermissionsToReadFile`) | `.permissionDenied` |
    /// | anything else | `.io` |
    ///
    /// A custom `ImageDataLoading` may throw whatever its building blocks
    /// throw: the pipeline calls this once for it. A loader that wants a
    /// kind of its own (`.httpStatus` with the status, say) throws a
    /// `VipsError` itself.
    ///
    /// - Parameters:
    ///   - error: what the loader threw.
    ///   - source: the source it was loading, as messages name it (`ImageSource.description`).
    public init(loading error: any Error, source: String) {
        if let error = error as? VipsError {
            self = error
            return
        }
        self.init(Self.kind(ofLoading: error), String(describing: error), source: source, underlying: error)
    }

    private static func kind(ofLoading error: any Error) -> Kind {
        switch error {
        case is CancellationError:
            return .cancelled
        case let error as URLError:
            switch error.code {
            case .cancelled: return .cancelled
            case .timedOut: return .timedOut
            case .fileDoesNotExist: return .fileNotFound
            case .noPermissionsToReadFile: return .permissionDenied
            case .badServerResponse: return .protocolError
            default: return .network
            }
        case let error as CocoaError:
            switch error.code {
            case .fileNoSuchFile, .fileReadNoSuchFile: return .fileNotFound
            case .fileReadNoPermission, .fileWriteNoPermission: return .permissionDenied
            default:
                if let posix = error.underlying as? POSIXError { return kind(ofLoading: posix) }
                return .io
            }
        case let error as POSIXError:
            switch error.code {
            case .ENOENT, .ENOTDIR: return .fileNotFound
            case .EACCES, .EPERM: return .permissionDenied
            case .ETIMEDOUT: return .timedOut
            case .ECONNREFUSED, .ECONNRESET, .EHOSTUNREACH, .ENETUNREACH, .ENETDOWN: return .network
            default: return .io
            }
        default:
            return .io
        }
    }
}
