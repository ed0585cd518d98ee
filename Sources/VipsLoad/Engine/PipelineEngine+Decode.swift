import Foundation

extension PipelineEngine {
    /// What a decode unit turns into pixels.
    enum DecodeInput: Sendable {
        /// Encoded bytes of the source.
        case data(ImageData)
        /// A larger cached bitmap of the same source, to be downscaled.
        case bitmap(Bitmap)
    }

    /// Creates the decode unit for `request`: a downscale of a larger cached
    /// bitmap when there is one, otherwise a subscription to the source's data
    /// unit (joined when one is in flight or loaded, else started).
    func startDecode(_ request: ValidatedRequest, _ effects: inout Effects) -> SharedWork<ImageResponse> {
        let unit = SharedWork<ImageResponse>(
            priority: request.priority, retainsValue: false, finishesWithoutSubscribers: true)
        if request.readsMemoryCache, resizesFromLargerCachedImages, request.key.isPlainFit,
            !request.request.options.contains(.disableResizingFromLargerCachedImages),
            let larger = memoryCache?.largerBitmap(for: request.key)
        {
            enqueueDecode(unit, request, .bitmap(larger), &effects)
            return unit
        }
        let (data, joined) = loads.join(request.loadKey) {
            var policy = request.dataPolicy
            if !storesOriginalData(request) { policy.writes = false }
            return startLoad(
                request.request.source, key: request.loadKey, policy: policy, priority: request.priority, &effects)
        }
        if joined { metrics.dataLoadsShared.add(1, ordering: .relaxed) }
        chain(unit, to: data, &effects) { [weak self] bytes, unit, effects in
            self?.enqueueDecode(unit, request, .data(bytes), &effects)
        }
        return unit
    }

    /// Queues the unit's decode on the decode lane.
    private func enqueueDecode(
        _ unit: SharedWork<ImageResponse>, _ request: ValidatedRequest, _ input: DecodeInput,
        _ effects: inout Effects
    ) {
        unit.enqueue({ [weak self] in self?.runDecode(unit, request, input) }, on: decodePool, &effects)
    }

    /// Runs one decode or downscale on a decode thread, stores the bitmap and
    /// delivers it; a unit disposed of while queued never decodes.
    private func runDecode(_ unit: SharedWork<ImageResponse>, _ request: ValidatedRequest, _ input: DecodeInput) {
        let cancellation = DecodeCancellation()
        let stop: (@Sendable () -> Void)? = stopsAbandonedWork ? { @Sendable in cancellation.cancel() } : nil
        guard lock.perform({ _ in unit.beginStoppable(stop) }) else { return }
        let watchdog = startWatchdog(cancellation, label: request.request.source.description) { [weak self] error in
            self?.lock.perform { effects in unit.complete(with: .failure(error), &effects) }
        }
        defer { watchdog?.cancel() }
        decodeObserver.withLock { $0 }?(request.key)

        var result: Result<Bitmap, VipsError>
        let origin: ImageResponse.Origin
        switch input {
        case .data(let data):
            metrics.decodesStarted.add(1, ordering: .relaxed)
            result = Result { () throws(VipsError) -> Bitmap in
                try cancellation.run { () throws(VipsError) -> Bitmap in
                    try request.request.decode(
                        data.input, with: decoder(for: data, named: request.request.source.description),
                        allowUpscale: request.key.allowUpscale)
                }
            }
            result = result.map { $0.fromDataCache(data.isFromDataCache) }
            origin = data.isFromDataCache ? .dataCache : .load
            metrics.decodesFinished.add(1, ordering: .relaxed)
            if case .success(let bitmap) = result { metrics.bytesDecoded.add(bitmap.cost, ordering: .relaxed) }
            result = result.mapError { $0.decodeError(naming: request.request.source.description) }
        case .bitmap(let larger):
            metrics.memoryResizes.add(1, ordering: .relaxed)
            result = Result { () throws(VipsError) -> Bitmap in
                try cancellation.run { () throws(VipsError) -> Bitmap in
                    try decoder.resize(larger, to: request.request.size, scale: request.request.scale)
                }
            }
            result = result.map { $0.withSource(larger.source) }
            origin = .derivedFromMemoryCache
        }
        finish(unit, request, result.map { ImageResponse(bitmap: $0, origin: origin) })
    }
}

extension PipelineEngine {
    /// At `decodeTimeLimit` from now: stops `cancellation`'s decode and calls
    /// `expire` with the `.timedOut` error for its waiting requests (they are
    /// told then, even when the decode is inside a call that cannot be
    /// interrupted). Nil when there is no limit; cancel the item once the decode returns.
    func startWatchdog(
        _ cancellation: DecodeCancellation, label: String,
        expire: @escaping @Sendable (VipsError) -> Void
    ) -> DispatchWorkItem? {
        guard let limit = decodeTimeLimit, limit > .zero else { return nil }
        let error = VipsError(
            .timedOut, "decoding took longer than the pipeline's decodeTimeLimit of \(limit)", source: label)
        let item = DispatchWorkItem {
            cancellation.cancel()
            expire(error)
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + limit.dispatchInterval, execute: item)
        return item
    }

    /// The decoder for `data`, told what its messages call the input (`name`,
    /// the request's source: a download's file is a temporary or cache file,
    /// named to no one), and the file's size and first bytes when the loader
    /// or cache read them, so it does not open the file to sniff it.
    func decoder(for data: ImageData, named name: String) -> ImageDecoder {
        var told = decoder
        told.inputName = name
        if case .file(let path) = data.input, !data.leadingBytes.isEmpty {
            told.knownFile = (path, data.byteCount, data.leadingBytes)
        }
        return told
    }
}
