import Foundation

extension PipelineEngine {
    /// Creates the data unit for a source and queues its load: local sources
    /// of the default loader on the I/O lane, everything else on the network
    /// lane. The unit keeps the data while decodes of any size hold it.
    func startLoad(_ source: ImageSource, key: String, priority: ImageRequest.Priority,
                   _ effects: inout Effects) -> SharedWork<ImageData> {
        let unit = SharedWork<ImageData>(priority: priority, retainsValue: true, finishesWithoutSubscribers: false)
        loads.insert(unit, for: key)
        if usesDefaultLoader, source.isLocal {
            let pool = ioPool
            let id = pool.reserveID()
            unit.attach(WorkHandle(cancel: { pool.cancel(id) }, setPriority: { pool.setPriority($0, of: id) }), &effects)
            effects.add { [weak self] in
                pool.enqueue(id, priority: priority) { [weak self] in self?.runLocalLoad(unit, source) }
            }
        } else {
            let lane = loadLane
            let id = lane.reserveID()
            unit.attach(WorkHandle(cancel: { lane.cancel(id) }, setPriority: { lane.setPriority($0, of: id) }), &effects)
            effects.add { [weak self] in
                lane.enqueue(id, priority: priority) { [weak self] in self?.startRemoteLoad(unit, source) ?? lane.finish() }
            }
        }
        return unit
    }

    /// Reads a local source on an I/O thread (a file is checked, not read:
    /// libvips reads it while decoding).
    private func runLocalLoad(_ unit: SharedWork<ImageData>, _ source: ImageSource) {
        guard perform({ _ in unit.begin() }) else { return }
        metrics.dataLoadsStarted.add(1, ordering: .relaxed)
        let result = Result { () throws(VipsError) -> ImageData in try DataLoader.local(source) }
        finishLoad(unit, result)
    }

    /// Starts a network-lane load in its own Swift task; its handle lets the
    /// unit cancel it (which runs the loader's cancellation handlers, after
    /// the engine lock is released).
    private func startRemoteLoad(_ unit: SharedWork<ImageData>, _ source: ImageSource) {
        let lane = loadLane
        let task = Task { [weak self] in
            defer { lane.finish() }
            await self?.runRemoteLoad(unit, source)
        }
        perform { effects in
            unit.attach(WorkHandle(cancel: { task.cancel() }, setPriority: { _ in }), &effects)
        }
    }

    private func runRemoteLoad(_ unit: SharedWork<ImageData>, _ source: ImageSource) async {
        guard perform({ _ in unit.begin() }), !Task.isCancelled else { return }
        metrics.dataLoadsStarted.add(1, ordering: .relaxed)
        let result: Result<ImageData, VipsError>
        do {
            result = .success(try await loader.loadData(for: source))
        } catch {
            result = .failure(VipsError.from(error, source: source))
        }
        finishLoad(unit, result)
    }

    private func finishLoad(_ unit: SharedWork<ImageData>, _ result: Result<ImageData, VipsError>) {
        if case .success(let data) = result { metrics.bytesLoaded.add(data.byteCount, ordering: .relaxed) }
        perform { effects in unit.complete(with: result, &effects) }
    }
}

extension VipsError {
    /// Any error a loader threw, as a `VipsError`: cancellation is `.cancelled`,
    /// a foreign error `.internal`, each naming the source.
    static func from(_ error: any Error, source: ImageSource) -> VipsError {
        switch error {
        case let error as VipsError: return error
        case is CancellationError: return .cancelled(source.description)
        default: return VipsError(.internal, "\(source): \(error)")
        }
    }
}

extension VipsError {
    /// An error out of a stream that only ever throws `VipsError`.
    static func from(_ error: any Error) -> VipsError {
        (error as? VipsError) ?? VipsError(.internal, "\(error)")
    }
}
