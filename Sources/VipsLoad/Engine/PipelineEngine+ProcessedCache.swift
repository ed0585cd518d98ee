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
    /// decoded as it is on the decode lane (counted in `processedImageDecodes`,
    /// not as a decode of the source); a miss (or an entry that fails its checksum, which the cache
    /// deletes) falls back to the ordinary decode or processing unit, joined
    /// or started, whose result is encoded and stored before it is delivered.
    ///
    /// Every job is the unit's own, so it moves with the unit's priority and
    /// is cancelled while it waits when the unit is disposed of. The unit is
    /// pending until its decode of the stored entry, or its encode and store,
    /// starts: leaving before then disposes of it (and of its fallback); once
    /// begun, the work finishes and fills the caches, as a decode does.
    func startProcessedCacheWork(_ request: ValidatedRequest, _ effects: inout Effects) -> SharedWork<ImageResponse> {
        let unit = SharedWork<ImageResponse>(
            priority: request.priority, retainsValue: false, finishesWithoutSubscribers: true)
        if request.dataPolicy.reads {
            unit.enqueue({ [weak self] in self?.runProcessedLookup(unit, request) }, on: ioPool, &effects)
        } else {
            fallBack(unit, request, &effects)
        }
        return unit
    }

    /// Looks the processed entry up on an I/O thread; a hit is decoded on the decode lane.
    private func runProcessedLookup(_ unit: SharedWork<ImageResponse>, _ request: ValidatedRequest) {
        guard lock.perform({ _ in unit.isLive }), let dataCache else { return }
        let key = request.processedCacheKey(format: processedImageFormat)
        let hit = dataCache.cachedData(for: key)
        lock.perform { effects in
            guard let hit else { return fallBack(unit, request, &effects) }
            unit.enqueue({ [weak self] in self?.runProcessedDecode(unit, request, hit, key) }, on: decodePool, &effects)
        }
    }

    /// Decodes a stored processed entry on a decode thread and delivers it;
    /// bytes that pass their checksum but do not decode are removed and rebuilt.
    private func runProcessedDecode(
        _ unit: SharedWork<ImageResponse>, _ request: ValidatedRequest, _ hit: CachedImageData, _ key: String
    ) {
        guard lock.perform({ _ in unit.begin() }), let dataCache else { return }
        metrics.processedImageDecodes.add(1, ordering: .relaxed)
        let decoded = Result { () throws(VipsError) -> Bitmap in
            try decoder.decode(hit.data.input, size: .original, scale: request.scale)
        }
        switch decoded {
        case .success(let bitmap):
            dataCacheHits.add(1, ordering: .relaxed)
            // The stored image's own header is the thumbnail's: the response describes its source.
            var served = bitmap.fromDataCache(true)
            if let info = hit.sourceInfo {
                served = served.withSource(BitmapSource(info: info, decodedLeniently: false, fromDataCache: true))
            }
            finish(unit, request, .success(ImageResponse(bitmap: served, origin: .dataCache)))
        case .failure:
            dataCache.removeData(for: key)
            lock.perform { effects in fallBack(unit, request, &effects) }
        }
    }

    /// Subscribes the unit to the ordinary work for its request (joined or
    /// started); its result is encoded and stored on the decode lane, then delivered.
    private func fallBack(_ unit: SharedWork<ImageResponse>, _ request: ValidatedRequest, _ effects: inout Effects) {
        guard unit.isLive else { return }
        let (work, joined) = decodes.join(request.workKey) { startWork(request, &effects) }
        if joined { metrics.coalesced.add(1, ordering: .relaxed) }
        chain(unit, to: work, &effects) { [weak self] response, unit, effects in
            guard let self else { return }
            guard request.dataPolicy.writes else {
                effects.add { self.finish(unit, request, .success(response)) }
                return
            }
            // The result exists: storing it is work begun, finished even if every subscriber leaves.
            _ = unit.begin()
            unit.enqueue(
                { [weak self] in
                    self?.storeProcessed(response.bitmap, request)
                    self?.finish(unit, request, .success(response))
                }, on: self.decodePool, &effects)
        }
    }

    /// Encodes and stores a processed result, with its source's header; a
    /// cache that refuses it costs only the caching.
    private func storeProcessed(_ bitmap: Bitmap, _ request: ValidatedRequest) {
        guard let dataCache,
            let encoded = try? ImageEncoder().encode(bitmap, as: processedImageFormat)
        else { return }
        let data = ImageData(input: .data(encoded.data), byteCount: encoded.data.count)
        _ = try? dataCache.store(
            data, for: request.processedCacheKey(format: processedImageFormat), sourceInfo: bitmap.source?.info)
    }
}
