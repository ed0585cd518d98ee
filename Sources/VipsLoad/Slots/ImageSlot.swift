/// A place that shows one image at a time: the Linux stand-in for an image
/// view or a table cell.
///
/// ```swift
/// let slot = ImageSlot(pipeline: pipeline)   // on the main actor
/// slot.placeholder = grey
/// slot.onEvent = { event in render(event) }
/// slot.load(ImageRequest(path: path, size: .maxPixelSize(128)))
/// ```
///
/// `load` cancels whatever the slot was loading before, so a slot rebound
/// while scrolling never receives an image it has moved on from: a result is
/// delivered only while its request is still the slot's current one. A
/// memory-cache hit is delivered synchronously, inside `load`; anything else
/// shows the placeholder first and delivers later on the actor `load` was
/// called from (the main actor in an app).
///
/// The slot is not `Sendable`: it belongs to the actor that uses it, and the
/// compiler keeps it there. Use it from an actor (not from nonisolated code),
/// since results are delivered on the caller's isolation.
public final class ImageSlot {
    /// What the slot shows, delivered to `onEvent`.
    public enum Event: Sendable {
        /// A load began and missed the memory cache: the placeholder (nil when
        /// none is set) is shown until the image arrives.
        case placeholder(Bitmap?, ImageRequest)
        /// A preview of the request's image while it downloads (only for a
        /// request with `ImageRequest.Options.progressivePreviews`): shown in
        /// place of the placeholder, never after the image or a failure.
        case preview(Bitmap, ImageRequest)
        /// The request's image. `fromMemoryCache` is true for a synchronous hit.
        case image(Bitmap, ImageRequest, fromMemoryCache: Bool)
        /// The request failed (a request the slot moved on from is never reported).
        case failure(VipsError, ImageRequest)
    }

    /// The pipeline the slot loads through.
    public let pipeline: ImagePipeline
    /// Shown while a load that missed the memory cache is in flight. Default nil.
    public var placeholder: Bitmap?
    /// Called on the slot's actor with every change of what it shows.
    public var onEvent: ((Event) -> Void)?
    /// The request the slot shows or loads now; nil when reset.
    public private(set) var request: ImageRequest?
    /// The bitmap shown now: the current request's image, the placeholder, or nil.
    public private(set) var bitmap: Bitmap?

    private var task: ImageTask?
    /// Bumped by every `load`, so a late result can tell it is stale.
    private var generation = 0

    /// An empty slot loading through `pipeline` (default: `ImagePipeline.shared`).
    public init(pipeline: ImagePipeline = .shared) {
        self.pipeline = pipeline
    }

    deinit {
        task?.cancel()
    }

    /// Shows `request`'s image: at once from the memory cache, or after the
    /// placeholder once it is loaded. Cancels the previous load. Passing nil
    /// only cancels and clears the slot (what a cell does before reuse).
    public func load(_ request: ImageRequest?, isolation: isolated (any Actor)? = #isolation) {
        let previous = task
        task = nil
        generation += 1
        // Everything this call decides is fixed before any event handler runs:
        // a handler may load or reset this slot (or another) re-entrantly.
        let generation = self.generation
        self.request = request
        previous?.cancel()
        guard let request else {
            bitmap = nil
            return
        }
        switch pipeline.start(request) {
        case .hit(let hit):
            bitmap = hit
            onEvent?(.image(hit, request, fromMemoryCache: true))
        case .failed(let error):
            bitmap = placeholder
            onEvent?(.failure(error, request))
        case .task(let newTask):
            task = newTask
            bitmap = placeholder
            // Inherits `isolation`, so the result is handled on the slot's actor.
            if request.options.contains(.progressivePreviews) {
                // The task's events bring the previews, then the outcome (never a preview after it).
                let events = newTask.events
                Task { [weak self] in
                    _ = isolation
                    var result = Result<Bitmap, VipsError>.failure(.cancelled(request.source.description))
                    for await event in events {
                        switch event {
                        case .preview(let preview): self?.showPreview(preview, request: request, generation: generation)
                        case .finished(let outcome): result = outcome
                        case .progress, .cacheHit: break
                        }
                    }
                    self?.finish(result, request: request, generation: generation)
                }
            } else {
                Task { [weak self] in
                    _ = isolation
                    let result: Result<Bitmap, VipsError>
                    do throws(VipsError) {
                        result = .success(try await newTask.image)
                    } catch {
                        result = .failure(error)
                    }
                    self?.finish(result, request: request, generation: generation)
                }
            }
            onEvent?(.placeholder(placeholder, request))
        }
    }

    /// Cancels the current load and clears the slot.
    public func reset(isolation: isolated (any Actor)? = #isolation) {
        load(nil)
    }

    private func showPreview(_ preview: Bitmap, request: ImageRequest, generation: Int) {
        guard generation == self.generation else { return }
        bitmap = preview
        onEvent?(.preview(preview, request))
    }

    private func finish(_ result: Result<Bitmap, VipsError>, request: ImageRequest, generation: Int) {
        // Moved on (or reset) since: this result belongs to nobody.
        guard generation == self.generation else { return }
        task = nil
        switch result {
        case .success(let image):
            bitmap = image
            onEvent?(.image(image, request, fromMemoryCache: false))
        case .failure(let error):
            onEvent?(.failure(error, request))
        }
    }
}
