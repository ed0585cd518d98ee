import Foundation
import VipsCore
import VipsLoad

/// How `thumb` and `info` load `http(s)` URLs: `--cache-dir`, `--cache-size`,
/// `--retries` and `--header`, applied to the command's `ImagePipeline`.
enum DownloadFlags {
    static let valueOptions: Set<String> = ["cache-dir", "cache-size", "retries", "header"]
    static let shortOptions: [Character: String] = ["c": "cache-dir", "r": "retries", "H": "header"]
    static let help = """
          -c, --cache-dir DIR   keep downloaded images in a disk cache in DIR (created when
                                missing), and use what is there: fresh entries are not
                                downloaded again, stale ones revalidated; several
                                processes may share one
              --cache-size MB   the disk cache's size limit (default 512)
          -r, --retries N       retry a transient download failure (connection error,
                                timeout, 429, 5xx) up to N times (default 2), with
                                backoff, honouring Retry-After up to 30 s
          -H, --header 'N: V'   send this header field with every URL request (repeatable;
                                overrides a default field of the same name)
        """

    /// The parsed flags.
    struct Settings {
        var retries: Int
        var headers: [String: String]
        /// The disk cache's folder and size limit in bytes, with `--cache-dir`.
        var cache: (folder: String, sizeLimit: Int)?
    }

    static func settings(_ parsed: ArgumentParser.Parsed) throws(ArgumentParser.UsageError) -> Settings {
        let retries = try parsed.int("retries", default: 2, in: 0...100)
        let megabytes = try parsed.int("cache-size", default: 512, in: 1...1_048_576)
        if parsed.value("cache-size") != nil, parsed.value("cache-dir") == nil {
            throw ArgumentParser.UsageError(description: "--cache-size needs --cache-dir")
        }
        return Settings(
            retries: retries, headers: try headerFields(parsed.values("header")),
            cache: parsed.value("cache-dir").map { (folder: $0, sizeLimit: megabytes * 1_048_576) })
    }

    /// Sets the retries, header fields and disk cache on `configuration`. A
    /// cache folder that cannot be used is reported on stderr (images can
    /// still be downloaded) and left out.
    static func apply(_ settings: Settings, to configuration: inout ImagePipeline.Configuration, command: String) {
        configuration.http.retryPolicy = HTTPRetryPolicy(maxRetries: settings.retries)
        configuration.http.headers.merge(settings.headers) { _, given in given }
        guard let cache = settings.cache else { return }
        do throws(VipsError) {
            configuration.dataCache = try DiskCache(
                directory: URL(fileURLWithPath: cache.folder), sizeLimit: cache.sizeLimit)
        } catch {
            Terminal.err("vipsload \(command): not caching downloads: \(error.message)")
        }
    }

    /// `--header 'Name: value'` fields; a name must be an HTTP token and the
    /// value one line.
    static func headerFields(_ given: [String]) throws(ArgumentParser.UsageError) -> [String: String] {
        var fields: [String: String] = [:]
        let token = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        for field in given {
            guard let colon = field.firstIndex(of: ":") else {
                throw ArgumentParser.UsageError(description: "--header takes 'Name: value', not '\(field)'")
            }
            let name = field[..<colon].trimmingCharacters(in: .whitespaces)
            let value = field[field.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty, name.allSatisfy(token.contains) else {
                throw ArgumentParser.UsageError(description: "--header: '\(name)' is not a valid header name")
            }
            guard !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
                throw ArgumentParser.UsageError(description: "--header: the value of \(name) must be one line")
            }
            fields[name] = value
        }
        return fields
    }
}
