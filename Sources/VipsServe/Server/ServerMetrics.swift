import Foundation
import VipsCore
import VipsHTTP
import VipsLoad

#if canImport(Glibc)
    import Glibc
#endif

/// The server's own counters, and `/metrics`: them, the pipeline's, and the
/// process's, in the Prometheus text exposition format (version 0.0.4).
final class ServerMetrics: Sendable {
    /// Upper bounds of the request-duration histogram's buckets, in seconds.
    static let durationBuckets: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    /// Counters as of one moment.
    struct Counts: Sendable {
        /// Requests answered, by status code.
        var requestsByStatus: [Int: Int] = [:]
        /// Requests per duration bucket (`durationBuckets`, then +Inf), not cumulative.
        var durationCounts = [Int](repeating: 0, count: ServerMetrics.durationBuckets.count + 1)
        var durationSum = 0.0
        /// Requests served from the memory cache of responses, and from the disk cache.
        var memoryHits = 0
        var diskHits = 0
        /// Renders started, and requests that joined one already in flight.
        var renders = 0
        var coalesced = 0
        /// Requests whose client hung up before the answer.
        var clientCancels = 0
        /// Requests refused with 429, and requests answered 504 (their time ran
        /// out, or the origin's or the decode's did).
        var rejected = 0
        var timeouts = 0
        /// Answers of 304 Not Modified.
        var notModified = 0
    }

    private let counts = LockedState(Counts())

    /// Applies `change` to the counters.
    func record(_ change: (inout Counts) -> Void) {
        counts.withLock { change(&$0) }
    }

    /// A finished request: its status and duration.
    func completed(status: Int, seconds: Double) {
        let bucket = Self.durationBuckets.firstIndex { seconds <= $0 } ?? Self.durationBuckets.count
        counts.withLock { counts in
            counts.requestsByStatus[status, default: 0] += 1
            counts.durationCounts[bucket] += 1
            counts.durationSum += seconds
        }
    }

    var snapshot: Counts { counts.withLock { $0 } }

    /// Gauges read when `/metrics` is asked for.
    struct Gauges: Sendable {
        var queueDepth: Int
        var queueLimit: Int
        var activeRequests: Int
        var openConnections: Int
        var responseCacheBytes: Int
        var responseCacheEntries: Int
        var draining: Bool
        /// Connections the server closed before their header was complete
        /// (counters the HTTP layer keeps).
        var closedConnections = ConnectionDeadlines.Counts()
        /// Responses the disk cache failed to store (a counter, read at exposition time).
        var cacheWriteFailures: Int = 0
        var admission: MemoryAdmission.Snapshot
    }

    /// The exposition text of everything.
    func exposition(pipeline: ImagePipeline.Metrics, inFlight: ImagePipeline.InFlight, gauges: Gauges) -> String {
        let counts = snapshot
        var text = PrometheusText()
        text.family(
            "vipsload_http_requests_total", "counter", "HTTP requests answered, by status code",
            counts.requestsByStatus.sorted { $0.key < $1.key }.map { ("code=\"\($0.key)\"", Double($0.value)) })
        var cumulative = 0
        var buckets: [(String, Double)] = []
        for (index, bound) in Self.durationBuckets.enumerated() {
            cumulative += counts.durationCounts[index]
            buckets.append(("le=\"\(PrometheusText.format(bound))\"", Double(cumulative)))
        }
        cumulative += counts.durationCounts[Self.durationBuckets.count]
        buckets.append(("le=\"+Inf\"", Double(cumulative)))
        text.histogram(
            "vipsload_http_request_duration_seconds",
            "Time from the request line to the end of the response", buckets: buckets, sum: counts.durationSum,
            count: cumulative)
        text.counter("vipsload_decodes_total", "Decodes begun by the pipeline", pipeline.decodesStarted)
        text.counter(
            "vipsload_coalesced_total",
            "Requests that joined identical work in flight (the server's renders and the pipeline's decodes)",
            counts.coalesced + pipeline.coalesced)
        text.counter(
            "vipsload_cancelled_total", "Requests whose client hung up before the answer", counts.clientCancels)
        text.counter(
            "vipsload_pipeline_cancelled_total", "Pipeline requests cancelled (no one waited any more)",
            pipeline.cancelled)
        text.family(
            "vipsload_cache_hits_total", "counter", "Responses served from a cache of encoded responses, by tier",
            [("tier=\"memory\"", Double(counts.memoryHits)), ("tier=\"disk\"", Double(counts.diskHits))])
        text.counter(
            "vipsload_cache_write_failures_total", "Responses the disk cache failed to store (they were still served)",
            gauges.cacheWriteFailures)
        text.counter("vipsload_renders_total", "Distinct images made (cache misses)", counts.renders)
        text.counter("vipsload_not_modified_total", "Answers of 304 Not Modified", counts.notModified)
        text.counter("vipsload_rejected_total", "Requests refused with 429 because the queue was full", counts.rejected)
        text.counter(
            "vipsload_timeouts_total", "Requests answered 504: their time, the origin's or the decode's ran out",
            counts.timeouts)
        text.counter("vipsload_source_bytes_total", "Encoded source bytes loaded by the pipeline", pipeline.bytesLoaded)
        text.counter("vipsload_downloads_total", "Source downloads completed", pipeline.downloads)
        text.gauge("vipsload_queue_depth", "Distinct images being made or waiting to be", gauges.queueDepth)
        text.gauge("vipsload_queue_limit", "Distinct images in flight beyond which requests get 429", gauges.queueLimit)
        text.gauge("vipsload_decodes_running", "Decodes running on the pipeline's threads", inFlight.runningDecodes)
        text.gauge("vipsload_decodes_queued", "Decodes waiting for a decode thread", inFlight.queuedDecodes)
        text.gauge("vipsload_http_requests_in_flight", "Requests received and not yet answered", gauges.activeRequests)
        text.gauge("vipsload_http_connections", "Open HTTP connections", gauges.openConnections)
        text.counter(
            "vipsload_http_header_timeouts_total",
            "Connections closed because a request's header section was not complete by its deadline",
            gauges.closedConnections.headerTimeouts)
        text.counter(
            "vipsload_http_connections_evicted_total",
            "Connections waiting for a header closed to make room for a new one (the table nearly full)",
            gauges.closedConnections.evictions)
        text.gauge(
            "vipsload_response_cache_bytes", "Body bytes in the memory cache of responses", gauges.responseCacheBytes)
        text.gauge("vipsload_response_cache_entries", "Responses in the memory cache", gauges.responseCacheEntries)
        text.gauge(
            "vipsload_memory_admission_budget_bytes", "Estimated bytes the renders running at once may hold",
            gauges.admission.budget)
        text.gauge(
            "vipsload_memory_admission_bytes", "Estimated bytes held by the renders admitted now",
            gauges.admission.bytesInUse)
        text.gauge(
            "vipsload_memory_admission_waiters", "Renders waiting for their estimated memory to fit the budget",
            gauges.admission.waiters)
        text.counter(
            "vipsload_memory_admission_refusals_total",
            "Renders refused with 422 because they need more than the whole memory budget", gauges.admission.refusals)
        text.gauge("vipsload_draining", "1 while the server drains before exiting", gauges.draining ? 1 : 0)
        text.gauge("process_resident_memory_bytes", "Resident memory size in bytes", Self.residentBytes())
        text.family(
            "process_cpu_seconds_total", "counter", "User and system CPU time spent in seconds",
            [("", Self.cpuSeconds())])
        return text.output
    }

    /// This process's resident set, from `/proc/self/statm`.
    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// User plus system CPU time of this process.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        guard getrusage(Int32(RUSAGE_SELF.rawValue), &usage) == 0 else { return 0 }
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }
}
