import Foundation
import VipsCore
import VipsHTTP
import VipsLoad

/// `Content-Disposition` of an image answer, as imgproxy writes it:
/// `inline` (or `attachment`) with a file name made of `filename` (or the
/// source URL's last path component without its extension, or `image`) and
/// the answer's own format's extension.
struct ContentDisposition: Sendable, Hashable {
    /// The name without its extension, as given.
    let stem: String
    /// `attachment` rather than `inline`.
    let attachment: Bool

    /// The disposition of `options` for the source URL `source`.
    init(options: ProcessingOptions, source: String) {
        attachment = options.returnAttachment
        if let filename = options.filename {
            stem = filename
            return
        }
        var path = Substring(source)
        if let end = path.firstIndex(where: { $0 == "?" || $0 == "#" }) { path = path[..<end] }
        var name = path.split(separator: "/", omittingEmptySubsequences: false).last ?? ""
        if name.hasPrefix(".") == false, let dot = name.lastIndex(of: ".") { name = name[..<dot] }
        stem = name.isEmpty || path.hasSuffix("/") ? "image" : String(name)
    }

    /// The field value for an answer in `format`. The name is quoted; a
    /// quote, a backslash, `%`, a control byte and every byte outside ASCII
    /// is written `%XX`, so no name can break out of the field or the header.
    func value(for format: ImageFormat) -> String {
        var quoted = ""
        for byte in stem.utf8 {
            if byte < 0x20 || byte >= 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
                || byte == UInt8(ascii: "%")
            {
                quoted += String(format: "%%%02X", byte)
            } else {
                quoted.append(Character(Unicode.Scalar(byte)))
            }
        }
        return "\(attachment ? "attachment" : "inline"); filename=\"\(quoted)\(Self.fileExtension(format))\""
    }

    /// imgproxy's extension of a format.
    static func fileExtension(_ format: ImageFormat) -> String {
        switch format {
        case .jpeg: return ".jpg"
        case .heif: return ".heic"
        default: return "." + format.rawValue
        }
    }
}

extension RenderJob {
    /// What `raw` and `skip_processing` ask for.
    enum Unprocessed: Sendable, Hashable {
        /// `raw`: the source's bytes, whatever they are.
        case raw
        /// `skip_processing`: the source's bytes when it is in one of these
        /// formats and the URL sets no other output format.
        case skip(Set<ImageFormat>)
    }
}

/// The response options (`raw`, `skip_processing`, `expires`, `filename`,
/// `return_attachment`): set on the job from the URL, and the answer made of
/// the source's own bytes.
extension ImageEndpoint {
    /// `job` with the response options of `processing`.
    func withResponseOptions(_ job: RenderJob, _ processing: ProcessingRequest) -> RenderJob {
        var job = job
        let options = processing.options
        job.disposition = ContentDisposition(options: options, source: processing.url.source)
        if options.raw {
            job.unprocessed = .raw
        } else if !options.skipProcessing.isEmpty {
            job.unprocessed = .skip(options.skipProcessing)
        }
        if let expires = options.expires {
            // As imgproxy: the answer may be kept until the URL expires, and no longer.
            let left = expires - Int(Date().timeIntervalSince1970)
            job.maxAge = max(0, min(job.maxAge, left))
        }
        return job
    }

    /// `job`'s answer: its source's own bytes for `raw` and a
    /// `skip_processing` that applies, else its render.
    func answerJob(_ job: RenderJob) async -> HTTPAnswer {
        guard job.unprocessed != nil else { return await answer(job) }
        return await withDeadline { [self] in await answerUnprocessed(job) }
    }

    /// The source's bytes, loaded as a render loads them (a remote source
    /// within the loader's limits, on the network lane) and held within the
    /// memory budget while the answer is made; a `skip_processing` that does
    /// not apply (another format, or another output format asked for)
    /// renders the job from those bytes.
    private func answerUnprocessed(_ job: RenderJob) async -> HTTPAnswer? {
        let data: ImageData
        do throws(VipsError) {
            if let preloaded = job.preloaded {
                data = preloaded
            } else {
                data = try await pipeline.data(for: job.request)
            }
        } catch {
            return Task.isCancelled ? nil : HTTPAnswer(ErrorStatus(error).response())
        }
        let format = await source.sniff(data.input)
        if case .skip(let formats) = job.unprocessed {
            let asked = job.vary.contains("Accept") ? nil : job.knownFormat?.imageFormat
            guard let format, formats.contains(format), asked == nil || asked == format else {
                var rendered = job
                rendered.unprocessed = nil
                if job.isRemote { rendered.preloaded = data }
                return await answer(rendered)
            }
        }
        let ticket: MemoryAdmission.Ticket
        do throws(MemoryAdmission.Refusal) {
            ticket = try await admission.acquire(data.byteCount)
        } catch {
            switch error {
            case .overBudget: return HTTPAnswer(ErrorStatus.overMemoryBudget.response())
            case .cancelled: return nil
            }
        }
        defer { ticket.release() }
        let bytes: Data
        do throws(VipsError) {
            bytes = try await Self.contents(of: data)
        } catch {
            return HTTPAnswer(ErrorStatus(error).response())
        }
        let job = datedByOrigin(job, data.validators)
        guard let response = job.response(body: bytes, format: format ?? ImageFormat(rawValue: "unknown")) else {
            return HTTPAnswer(ErrorStatus(500, "internal error").response())
        }
        responses.store(response, for: job.key.text, lifetime: job.cacheLifetime.map { .seconds($0) })
        metrics.record { $0.renders += 1 }
        return HTTPAnswer(response, note: job.unprocessed == .raw ? "raw" : "skipped")
    }

    /// The bytes of `data`, read off the cooperative threads when they are in a file.
    private static func contents(of data: ImageData) async throws(VipsError) -> Data {
        if case .data(let bytes) = data.input { return bytes }
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<Data, VipsError>, Never>) in
            DispatchQueue.global().async {
                continuation.resume(returning: Result { () throws(VipsError) in try data.contents() })
            }
        }
        return try result.get()
    }

    /// `body`'s answer, or 504 at the request's deadline, or 499 (nothing is
    /// sent) when the calling task is cancelled; `body` returns nil when it
    /// was cancelled.
    func withDeadline(_ body: @escaping @Sendable () async -> HTTPAnswer?) async -> HTTPAnswer {
        let deadline = configuration.requestTimeout
        return await withTaskGroup(of: HTTPAnswer?.self) { group in
            group.addTask { await body() }
            group.addTask {
                try? await Task.sleep(for: deadline)
                return Task.isCancelled ? nil : HTTPAnswer(ErrorStatus.timedOut.response())
            }
            defer { group.cancelAll() }
            while let next = await group.next() {
                guard let next else { continue }
                if next.response?.status == ErrorStatus.timedOut.code { metrics.record { $0.timeouts += 1 } }
                return next
            }
            metrics.record { $0.clientCancels += 1 }
            return HTTPAnswer(ErrorStatus.clientGone.response())
        }
    }
}
