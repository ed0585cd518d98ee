import Foundation
import VipsCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Runs a pipeline's request modifier for one download, bounded by the
/// request timeout: a modifier that throws or never returns fails only the
/// request it was called for, with a typed error.
///
/// The modifier runs in a Swift task of its own, so one that ignores
/// cancellation cannot hold the download past the deadline (its task is
/// cancelled and its late answer ignored).
enum RequestModification {
    typealias Modifier = @Sendable (URLRequest) async throws -> URLRequest

    private struct State {
        var continuation: CheckedContinuation<Result<URLRequest, VipsError>, Never>?
        var result: Result<URLRequest, VipsError>?
        var tasks: [Task<Void, Never>] = []
    }

    /// `request` as `modifier` returns it; the rewritten URL must still be http(s).
    ///
    /// - Throws: the modifier's `VipsError`; `.timedOut` when it does not answer
    ///   within `timeout`; `.cancelled` when the calling task is cancelled;
    ///   `.invalidArgument` for a URL the loader cannot fetch; `.internal`
    ///   wrapping any other error.
    static func apply(
        _ modifier: @escaping Modifier, to request: URLRequest, timeout: TimeInterval,
        label: String
    ) async throws(VipsError) -> URLRequest {
        let state = LockedState(State())
        @Sendable func settle(_ result: Result<URLRequest, VipsError>) {
            let (continuation, tasks) = state.withLock {
                state -> (CheckedContinuation<Result<URLRequest, VipsError>, Never>?, [Task<Void, Never>]) in
                guard state.result == nil else { return (nil, []) }
                state.result = result
                defer { state.continuation = nil; state.tasks = [] }
                return (state.continuation, state.tasks)
            }
            for task in tasks { task.cancel() }
            continuation?.resume(returning: result)
        }
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<URLRequest, VipsError>, Never>) in
                let work = Task {
                    do {
                        settle(.success(try await modifier(request)))
                    } catch let error as VipsError {
                        settle(.failure(error))
                    } catch is CancellationError {
                        settle(.failure(.cancelled(label)))
                    } catch {
                        settle(.failure(VipsError(.internal, "\(label): the request modifier failed: \(error)")))
                    }
                }
                let timer = Task {
                    guard (try? await Task.sleep(nanoseconds: UInt64(max(0, timeout) * 1e9))) != nil else { return }
                    settle(
                        .failure(
                            VipsError(.timedOut, "\(label): the request modifier did not answer within \(timeout) s")))
                }
                let settled = state.withLock { state -> Result<URLRequest, VipsError>? in
                    if let result = state.result { return result }
                    state.continuation = continuation
                    state.tasks = [work, timer]
                    return nil
                }
                if let settled {
                    work.cancel()
                    timer.cancel()
                    continuation.resume(returning: settled)
                }
            }
        } onCancel: {
            settle(.failure(.cancelled(label)))
        }
        let modified = try result.get()
        guard let scheme = modified.url?.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw VipsError(
                .invalidArgument,
                "\(label): the request modifier returned a URL that is not http(s): "
                    + (modified.url.map(URLRedaction.redacted) ?? "none"))
        }
        return modified
    }
}
