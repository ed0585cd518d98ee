import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The one delegate of a loader's `URLSession`: routes each task's events to
/// the `HTTPTransfer` that started it.
final class HTTPSessionDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private let transfers = LockedState<[Int: HTTPTransfer]>([:])

    func register(_ transfer: HTTPTransfer, for task: URLSessionTask) {
        let id = task.taskIdentifier
        transfers.withLock { $0[id] = transfer }
    }

    func unregister(_ task: URLSessionTask) {
        let id = task.taskIdentifier
        _ = transfers.withLock { $0.removeValue(forKey: id) }
    }

    private func transfer(for task: URLSessionTask) -> HTTPTransfer? {
        let id = task.taskIdentifier
        return transfers.withLock { $0[id] }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        guard let transfer = transfer(for: dataTask) else {
            completionHandler(.cancel)
            return
        }
        transfer.receive(response: response, decide: completionHandler)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        transfer(for: dataTask)?.receive(data: data)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        guard let transfer = transfer(for: task) else {
            completionHandler(nil)
            return
        }
        transfer.redirect(from: response, to: request, decide: completionHandler)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let id = task.taskIdentifier
        let transfer = transfers.withLock { $0.removeValue(forKey: id) }
        transfer?.complete(error: error, taskResponse: task.response)
    }
}
