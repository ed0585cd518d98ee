import Foundation

extension PipelineEngine {
    /// Whether `request`'s result is served from, and stored in, the data
    /// cache as an encoded processed image (`DataCachePolicy`).
    func storesProcessedImage(_ request: ValidatedRequest) -> Bool {
        guard dataCache != nil, request.isProcessed, !request.request.options.contains(.keepMetadata) else {
            return false
        }
        switch dataCachePolicy {
        case .storeOriginalData: return false
        case .storeEncodedImages, .storeAll, .automatic: return true
        }
    }

    /// Whether a data load started for `request` stores the original bytes.
    func storesOriginalData(_ request: ValidatedRequest) -> Bool {
        switch dataCachePolicy {
        case .storeOriginalData, .storeAll: return true
        case .storeEncodedImages, .automatic: return !request.isProcessed
        }
    }

    /// Creates the unit that serves a processed request through the data
    /// cache: its stored encoded result is looked up on the I/O lane and
    /// decoded as it is (not counted as a decode of the source); a miss (or
    /// an entry that fails its checksum, which the cache deletes) falls back
    /// to the ordinary decode or processing unit, joined or started, whose
    /// result is encoded and stored before it is delivered.
    func startProcessedCacheWork(_ request: ValidatedRequest, _ effects: inout Effects) -> SharedWork<Bitmap> {
        let unit = SharedWork<Bitmap>(priority: request.priority, retainsValue: false, finishesWithoutSubscribers: true)
        decodes.insert(unit, for: request.processedCacheWorkKey)
        if request.dataPolicy.reads {
            let pool = ioPool
            let id = pool.reserveID()
            unit.attach(
                WorkHandle(cancel: { pool.cancel(id) }, setPriority: { pool.setPriority($0, of: id) }), &effects)
            let priority = unit.priority
            effects.add { [weak self] in
                pool.enqueue(id, priority: priority) { [weak self] in self?.runProcessedLookup(unit, request) }
            }
        } else {
            fallBack(unit, request, &effects)
        }
        return unit
    }

    /// Looks the processed entry up on an I/O thread; a hit is decoded on the decode lane.
    private func runProcessedLookup(_ unit: SharedWork<Bitmap>, _ request: ValidatedRequest) {
        guard perform({ _ in unit.begin() }), let dataCache else { return }
        let key = request.processedCacheKey(format: processedImageFormat)
        guard let hit = dataCache.cachedData(for: key) else {
            perform { effects in fallBack(unit, request, &effects) }
            return
        }
        let pool = decodePool
        let priority = unit.priority
        pool.enqueue(pool.reserveID(), priority: priority) { [weak self] in
            guard let self else { return }
            let decoded = Result { () throws(VipsError) -> Bitmap in
                try self.decoder.decode(hit.data.input, size: .original, scale: request.scale)
            }
            switch decoded {
            case .success(let bitmap):
                self.dataCacheHits.add(1, ordering: .relaxed)
                self.deliver(unit, request, .success(bitmap.fromDataCache(true)))
            case .failure:
                // Stored bytes that pass their checksum but do not decode: rebuilt.
                dataCache.removeData(for: key)
                self.perform { effects in self.fallBack(unit, request, &effects) }
            }
        }
    }

    /// Subscribes the unit to the ordinary work for its request.
    private func fallBack(_ unit: SharedWork<Bitmap>, _ request: ValidatedRequest, _ effects: inout Effects) {
        guard unit.isLive else { return }
        let work: SharedWork<Bitmap>
        if let existing = decodes[request.workKey] {
            work = existing
            metrics.coalesced.add(1, ordering: .relaxed)
        } else {
            work = startWork(request, &effects)
        }
        let subscription = work.subscribe(priority: unit.priority, &effects) { [weak self, weak unit] event in
            guard let self, let unit else { return }
            switch event {
            case .progress(let completed, let total):
                self.perform { effects in unit.reportProgress(completed: completed, total: total, &effects) }
            case .failure(let error):
                self.perform { effects in unit.complete(with: .failure(error), &effects) }
            case .value(let bitmap):
                guard request.dataPolicy.writes else { return self.deliver(unit, request, .success(bitmap)) }
                self.decodePool.enqueue(self.decodePool.reserveID(), priority: unit.priority) { [weak self] in
                    self?.storeProcessed(bitmap, request)
                    self?.deliver(unit, request, .success(bitmap))
                }
            }
        }
        unit.attach(upstream: subscription, &effects)
    }

    /// Encodes and stores a processed result; a cache that refuses it costs only the caching.
    private func storeProcessed(_ bitmap: Bitmap, _ request: ValidatedRequest) {
        guard let dataCache,
            let encoded = try? ImageEncoder().encode(bitmap, as: processedImageFormat)
        else { return }
        let data = ImageData(input: .data(encoded.data), byteCount: encoded.data.count)
        _ = try? dataCache.store(data, for: request.processedCacheKey(format: processedImageFormat), http: nil)
    }

    /// Stores the bitmap in memory (before the unit leaves its table, as a decode does) and completes the unit.
    private func deliver(_ unit: SharedWork<Bitmap>, _ request: ValidatedRequest, _ result: Result<Bitmap, VipsError>) {
        perform { effects in
            if case .success(let bitmap) = result, unit.storesResult, let memoryCache {
                memoryCache.store(bitmap, for: request.key)
            }
            unit.complete(with: result, &effects)
        }
    }
}
