import Foundation
import VipsCore
import VipsHTTP
import VipsLoad

#if canImport(Glibc)
    import Glibc
#endif

/// Conditional requests beyond the server's own `ETag` (imgproxy's
/// `IMGPROXY_USE_ETAG` and `IMGPROXY_USE_LAST_MODIFIED`):
///
/// - A local file's answers carry its modification time as
///   `Last-Modified`, and a client's `If-Modified-Since` at or after it (with
///   no `If-None-Match`, RFC 9110 §13.1.3) is answered `304` at once.
/// - For an `http(s)` source, the client's `If-None-Match` (when it does not
///   name this server's `ETag`, which is answered at once) and
///   `If-Modified-Since` are forwarded to the origin as they were sent; the
///   origin's `304` is answered with a `304` (never an error, never cached),
///   and its `200` body is rendered without a second download. Answers
///   carry the origin's `Last-Modified`.
extension ImageEndpoint {
    /// `job` with its local file's modification time as `Last-Modified`.
    func datedByFile(_ job: RenderJob) -> RenderJob {
        guard configuration.usesLastModified, let path = job.request.source.filePath,
            let lastModified = Self.lastModified(ofFile: path)
        else { return job }
        var dated = job
        dated.lastModified = lastModified
        return dated
    }

    /// A file's modification time as an HTTP date (whole seconds); nil when `stat` fails.
    static func lastModified(ofFile path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return HTTPDate.format(Date(timeIntervalSince1970: TimeInterval(info.st_mtim.tv_sec)))
    }

    /// `job` with the origin's `Last-Modified`, once its source is loaded.
    func datedByOrigin(_ job: RenderJob, _ validators: HTTPValidators?) -> RenderJob {
        guard configuration.usesLastModified, job.isRemote, let lastModified = validators?.lastModified else {
            return job
        }
        var dated = job
        dated.lastModified = lastModified
        return dated
    }

    /// How a request with conditions the `ETag` did not answer is handled:
    /// `304` now for a local file not modified since the client's date, the
    /// origin asked for a remote source, nil to go on as usual.
    func conditionalHandling(_ request: borrowing HTTPRequest, _ job: RenderJob) -> HTTPHandling? {
        let ifNoneMatch = request.header("If-None-Match")
        let ifModifiedSince = configuration.usesLastModified ? request.header("If-Modified-Since") : nil
        if !job.isRemote {
            guard ifNoneMatch == nil, let ifModifiedSince, let lastModified = job.lastModified,
                HTTPConditions(ifModifiedSince: ifModifiedSince).areMet(by: HTTPValidators(lastModified: lastModified))
            else { return nil }
            metrics.record { $0.notModified += 1 }
            return .respond(job.notModified(), note: "not-modified")
        }
        let conditions = HTTPConditions(
            ifNoneMatch: configuration.forwardsEntityTagConditions ? ifNoneMatch : nil,
            ifModifiedSince: ifModifiedSince)
        guard !conditions.isEmpty else { return nil }
        return .later { [self] in await answerAskingTheOrigin(job, conditions) }
    }

    /// Asks the origin with the client's `conditions`, then answers `304`
    /// on its `304`, or renders what it sent; all within the request's deadline.
    private func answerAskingTheOrigin(_ job: RenderJob, _ conditions: HTTPConditions) async -> HTTPAnswer {
        await withDeadline { [self] in
            let load: ConditionalLoad
            do throws(VipsError) {
                load = try await pipeline.data(for: job.request, conditions: conditions)
            } catch {
                return Task.isCancelled ? nil : HTTPAnswer(ErrorStatus(error).response())
            }
            switch load {
            case .notModified(let validators):
                metrics.record { $0.notModified += 1 }
                return HTTPAnswer(datedByOrigin(job, validators).notModified(), note: "origin-not-modified")
            case .loaded(let data):
                var loaded = datedByOrigin(job, data.validators)
                loaded.preloaded = data
                return await answerJob(loaded)
            }
        }
    }
}
