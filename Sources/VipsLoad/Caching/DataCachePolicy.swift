/// What an `ImagePipeline` keeps in its data cache: a superset of Nuke's
/// `DataCachePolicy`. Applies to every source kind for processed images
/// (local files included); originals are only ever stored for remote sources.
///
/// A request is *processed* when it asks for a pixel box, a resize mode other
/// than fit, or processors. Processed entries are encoded in
/// `ImagePipeline.Configuration.processedImageFormat` and keyed by the
/// source's identity (a file's version: an edited or replaced file misses),
/// the geometry, the processors and that format; each is checksummed like
/// every entry, and a corrupt one is deleted and rebuilt from the source.
/// Requests that keep metadata (`.keepMetadata`) are never stored processed.
/// Processed entries carry no HTTP validators: for a URL they are served
/// whatever the original's `Cache-Control` said (as in Nuke);
/// `.reloadIgnoringCachedData` rebuilds one.
public enum DataCachePolicy: Sendable, Hashable {
    /// The downloaded original bytes only (the default, and the behaviour
    /// before this policy existed).
    case storeOriginalData
    /// Processed requests store their encoded result and not the original;
    /// unprocessed requests store the original.
    case storeEncodedImages
    /// Both the original and, for processed requests, the encoded result.
    case storeAll
    /// The encoded result for processed requests, the original otherwise
    /// (each request stores one thing, the one a rerun needs).
    case automatic
}
