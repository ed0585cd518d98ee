import Foundation

extension DiskCache {
    /// Where a disk cache lives and how large it may grow. Every property documents its default.
    public struct Configuration: Sendable, Hashable {
        /// The cache folder; created when missing. Several caches (in one
        /// process or several) may share it. No default
        /// (`DiskCache.defaultDirectory` is the conventional place).
        public var directory: URL
        /// The most bytes the entries may take. When writes push the folder past
        /// it, a background sweep deletes the least recently used entries until
        /// the folder is at 90% of it. Default 512 MiB.
        public var sizeLimit: Int
        /// Entries up to this size have every byte checked against their stored
        /// checksum on each read; larger ones have their length and three 64 KiB
        /// windows checked, so a read never costs a second full pass over a large
        /// file. Default 8 MiB.
        public var fullVerificationLimit: Int
        /// Files left behind by interrupted writes (a killed process) are deleted
        /// by the sweep once they are this old, and so are the private links
        /// behind the `ImageData` a lookup returns: decode such data within this
        /// time (a pipeline decodes at once). Default 1 hour.
        public var abandonedFileLifetime: TimeInterval

        /// A configuration for the cache in `directory`; each other parameter defaults as its property documents.
        public init(
            directory: URL, sizeLimit: Int = 512 * 1024 * 1024,
            fullVerificationLimit: Int = 8 * 1024 * 1024, abandonedFileLifetime: TimeInterval = 3600
        ) {
            self.directory = directory
            self.sizeLimit = sizeLimit
            self.fullVerificationLimit = fullVerificationLimit
            self.abandonedFileLifetime = abandonedFileLifetime
        }
    }
}

extension DiskCache {
    /// The conventional per-user cache folder (XDG Base Directory):
    /// `$XDG_CACHE_HOME/vipsload/images`, else `~/.cache/vipsload/images`,
    /// else `vipsload/images` in the system's temporary folder.
    public static var defaultDirectory: URL {
        let environment = ProcessInfo.processInfo.environment
        let base: URL
        if let cacheHome = environment["XDG_CACHE_HOME"], cacheHome.hasPrefix("/") {
            base = URL(fileURLWithPath: cacheHome, isDirectory: true)
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            base = URL(fileURLWithPath: home, isDirectory: true).appendingPathComponent(".cache", isDirectory: true)
        } else {
            base = FileManager.default.temporaryDirectory
        }
        return base.appendingPathComponent("vipsload", isDirectory: true).appendingPathComponent(
            "images", isDirectory: true)
    }
}
