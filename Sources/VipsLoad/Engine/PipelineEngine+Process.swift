import Foundation

extension PipelineEngine {
    /// Starts the unit that serves `request`: its decode, or, when it has
    /// processors, a processing unit over that decode.
    func startWork(_ request: ValidatedRequest, _ effects: inout Effects) -> SharedWork<ImageResponse> {
        request.request.processors.isEmpty ? startDecode(request, &effects) : startProcess(request, &effects)
    }

    /// Creates the processing unit for `request` (keyed by the decode's key
    /// plus the processors' identifiers, in the same table as decodes): it
    /// runs the processors over the decode's bitmap — the memory-cached one
    /// when there is one, otherwise the decode unit's, joined when in flight
    /// (so different processors over one source and geometry share one decode
    /// and one data load) or started. The unprocessed decode is not cached on
    /// its own account: only the processed result is, under its own key.
    func startProcess(_ request: ValidatedRequest, _ effects: inout Effects) -> SharedWork<ImageResponse> {
        let unit = SharedWork<ImageResponse>(
            priority: request.priority, retainsValue: false, finishesWithoutSubscribers: true)
        let stage = request.decodeStage
        if stage.readsMemoryCache, let decoded = memoryCache?.peek(stage.key) {
            enqueueProcess(unit, request, ImageResponse(bitmap: decoded, origin: .derivedFromMemoryCache), &effects)
            return unit
        }
        let (decode, joined) = decodes.join(stage.workKey) { startDecode(stage, &effects) }
        if joined { metrics.coalesced.add(1, ordering: .relaxed) }
        chain(unit, to: decode, &effects) { [weak self] decoded, unit, effects in
            self?.enqueueProcess(unit, request, decoded, &effects)
        }
        return unit
    }

    /// Queues the unit's processors on the decode lane.
    private func enqueueProcess(
        _ unit: SharedWork<ImageResponse>, _ request: ValidatedRequest, _ input: ImageResponse,
        _ effects: inout Effects
    ) {
        unit.enqueue({ [weak self] in self?.runProcess(unit, request, input) }, on: decodePool, &effects)
    }

    /// Runs the processors on a decode thread, stores the result under the
    /// processed key and delivers it; a unit disposed of while queued never runs.
    private func runProcess(
        _ unit: SharedWork<ImageResponse>, _ request: ValidatedRequest, _ input: ImageResponse
    ) {
        let cancellation = DecodeCancellation()
        let stop: (@Sendable () -> Void)? = stopsAbandonedWork ? { @Sendable in cancellation.cancel() } : nil
        guard lock.perform({ _ in unit.beginStoppable(stop) }) else { return }
        processObserver.withLock { $0 }?(request.key)
        let processors = ImageProcessors.Composition(request.request.processors)
        var result = Result { () throws(VipsError) -> Bitmap in
            try cancellation.run { () throws(VipsError) -> Bitmap in try processors.process(input.bitmap) }
        }
        result = result.mapError { $0.about(request.request.source.description) }
        finish(unit, request, result.map { ImageResponse(bitmap: $0, origin: input.origin) })
    }
}

extension Bitmap {
    /// The bitmap with its source marked as read from the data cache (or not).
    func fromDataCache(_ isFromDataCache: Bool) -> Bitmap {
        guard isFromDataCache, let source else { return self }
        return withSource(
            BitmapSource(
                info: source.info, decodedLeniently: source.decodedLeniently, fromDataCache: true,
                metadata: source.metadata, loadShrink: source.loadShrink))
    }
}
