import Foundation
import VipsCore

/// The pipe protocol between `vipsload` and its decode workers
/// (`vipsload __decode-worker`): every message, either way, is a frame of a
/// little-endian UInt32 header length, a JSON header, a little-endian UInt64
/// body length and the body's bytes (an input's bytes in a request, a
/// bitmap's pixels in a reply).
///
/// Every message carries `version`; a side that reads another version (or
/// none) refuses the message with a typed error instead of guessing at it.
enum WorkerProtocol {
    /// The protocol's version. 1: unversioned messages, the thumb decode's
    /// `--animated` and `--keep-metadata` given only as the worker's
    /// arguments. 2: `version` in every message, and a thumb request says
    /// itself whether it keeps every frame and the metadata.
    static let version = 2

    /// Why a message of another version is refused, or nil when it is this one's.
    static func refusal(of version: Int?, from sender: String) -> VipsError? {
        guard version != Self.version else { return nil }
        return VipsError(
            .internal,
            "the decode \(sender) speaks worker protocol \(version.map(String.init) ?? "1"), not \(Self.version)")
    }

    /// What the parent asks for.
    struct Request: Codable {
        /// `WorkerProtocol.version` of the sender.
        var version: Int? = WorkerProtocol.version
        /// "thumb" (decode to the worker's size and mode) or "info" (header probe).
        var operation: String
        /// The input file, or nil when the body holds the input's bytes.
        var path: String?
        /// What messages call the input (a downloaded file's URL); nil: the
        /// path, or the byte count.
        var name: String? = nil
        /// A "thumb" of this size and mode instead of the worker's own (a
        /// server's requests each ask for their own); nil for the worker's.
        var geometry: Geometry?
        /// A "thumb" without `geometry`: decode every frame of an animated
        /// input (`--animated`); nil: as the worker's arguments say.
        var animated: Bool? = nil
        /// A "thumb" without `geometry`: keep the EXIF block and profile mark
        /// (`--keep-metadata`); nil: as the worker's arguments say.
        var keepMetadata: Bool? = nil
    }

    /// A decode's size and resize mode, as a server's request gives them
    /// (`TargetSize` and `ResizeMode` in plain fields).
    struct Geometry: Codable, Equatable {
        /// "original", "max", "fit", "width" or "height", with `width` and `height` as that case needs.
        var size: String
        var width = 0
        var height = 0
        /// "fit", "fill", "contain" or "stretch".
        var mode: String
        /// The gravity of fill and contain (`Gravity.rawValue`).
        var gravity = Gravity.centre.rawValue
        /// Contain's padding, red, green, blue, alpha.
        var background: [UInt8] = [255, 255, 255, 255]
        var scale = 1.0
        var allowUpscale = false
        var keepMetadata = false

        init(size target: TargetSize, mode resize: ResizeMode, scale: Double, allowUpscale: Bool, keepMetadata: Bool) {
            switch target {
            case .original: size = "original"
            case .maxPixelSize(let side): (size, width, height) = ("max", side, side)
            case .fit(let boxWidth, let boxHeight): (size, width, height) = ("fit", boxWidth, boxHeight)
            case .width(let side): (size, width) = ("width", side)
            case .height(let side): (size, height) = ("height", side)
            }
            switch resize {
            case .fit: mode = "fit"
            case .fill(let kept): (mode, gravity) = ("fill", kept.rawValue)
            case .contain(let colour, let placed):
                (mode, gravity) = ("contain", placed.rawValue)
                background = [colour.red, colour.green, colour.blue, colour.alpha]
            case .stretch: mode = "stretch"
            }
            self.scale = scale
            self.allowUpscale = allowUpscale
            self.keepMetadata = keepMetadata
        }

        /// The size and mode again; `.invalidArgument` for fields no `init` writes.
        func target() throws(VipsError) -> (TargetSize, ResizeMode) {
            let target: TargetSize
            switch size {
            case "original": target = .original
            case "max": target = .maxPixelSize(width)
            case "fit": target = .fit(width: width, height: height)
            case "width": target = .width(width)
            case "height": target = .height(height)
            default: throw VipsError(.invalidArgument, "a decode worker was sent the size '\(size)'")
            }
            guard let placement = Gravity(rawValue: gravity), background.count == 4 else {
                throw VipsError(.invalidArgument, "a decode worker was sent the gravity '\(gravity)'")
            }
            let resize: ResizeMode
            switch mode {
            case "fit": resize = .fit
            case "fill": resize = .fill(placement)
            case "contain":
                let colour = Colour(red: background[0], green: background[1], blue: background[2], alpha: background[3])
                resize = .contain(background: colour, gravity: placement)
            case "stretch": resize = .stretch
            default: throw VipsError(.invalidArgument, "a decode worker was sent the mode '\(mode)'")
            }
            return (target, resize)
        }
    }

    /// What the worker answers: a bitmap (pixels in the body) or an
    /// animation (its frames' pixels one after another), with the header of
    /// the image it came from; an image's header alone; or a typed error.
    struct Reply: Codable {
        /// `WorkerProtocol.version` of the sender.
        var version: Int? = WorkerProtocol.version
        var errorKind: String?
        var errorMessage: String?
        /// The decoded bitmap (or each frame).
        var width = 0
        var height = 0
        var channels = 0
        var scale = 1.0
        /// The source image's header.
        var format: String?
        var sourceWidth = 0
        var sourceHeight = 0
        var bands = 0
        var hasAlpha = false
        var orientation = 1
        var pages = 1
        /// The decode was lenient over damaged data.
        var decodedLeniently = false
        /// `--keep-metadata`: the source's EXIF block (base64 in the JSON) and whether it had a profile.
        var exif: Data?
        var hadICCProfile = false
        var keptMetadata = false
        /// `--animated`: each frame's delay in ms (nil for a still), and the loop count.
        var delays: [Int]?
        var loopCount = 0

        /// `info`'s fields, or a decoded bitmap's source header.
        var info: ImageInfo {
            ImageInfo(
                width: sourceWidth, height: sourceHeight, format: ImageFormat(rawValue: format ?? "unknown"),
                bands: bands, hasAlpha: hasAlpha, orientation: orientation, pages: pages)
        }

        mutating func describe(_ info: ImageInfo) {
            format = info.format.rawValue
            sourceWidth = info.width
            sourceHeight = info.height
            bands = info.bands
            hasAlpha = info.hasAlpha
            orientation = info.orientation
            pages = info.pages
        }
    }

    /// Frames larger than this are refused (a worker's reply is a bitmap at most).
    static let maxBodyBytes = 1 << 34
    private static let maxHeaderBytes = 1 << 20

    /// Writes one frame to `fd`; false when the other end is gone.
    static func write(_ header: some Encodable, body: Data, to fd: Int32) -> Bool {
        guard let json = try? JSONEncoder().encode(header) else { return false }
        var frame = Data()
        withUnsafeBytes(of: UInt32(json.count).littleEndian) { frame.append(contentsOf: $0) }
        frame.append(json)
        withUnsafeBytes(of: UInt64(body.count).littleEndian) { frame.append(contentsOf: $0) }
        return writeAll(frame, to: fd) && writeAll(body, to: fd)
    }

    private static func writeAll(_ data: Data, to fd: Int32) -> Bool {
        data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) -> Bool in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0, errno == EINTR { continue }
                guard written > 0 else { return false }
                offset += written
            }
            return true
        }
    }

    /// Why a frame could not be read.
    enum ReadFailure: Error {
        /// The other end closed the pipe (or it broke).
        case closed
        /// The deadline passed first.
        case timedOut
        /// The frame is not a well-formed message.
        case malformed
    }

    /// Reads one frame from `fd`, waiting no later than `deadline` (uptime
    /// nanoseconds; nil waits for ever).
    static func read<Header: Decodable>(
        _ type: Header.Type, from fd: Int32,
        deadline: UInt64?
    ) -> Result<(Header, Data), ReadFailure> {
        do throws(ReadFailure) {
            let headerLength = try Int(readInteger(UInt32.self, fd, deadline))
            guard headerLength <= maxHeaderBytes else { throw .malformed }
            let json = try readExactly(headerLength, fd, deadline)
            let bodyLength = try readInteger(UInt64.self, fd, deadline)
            guard bodyLength <= UInt64(maxBodyBytes) else { throw .malformed }
            let body = try readExactly(Int(bodyLength), fd, deadline)
            guard let header = try? JSONDecoder().decode(Header.self, from: json) else { throw .malformed }
            return .success((header, body))
        } catch {
            return .failure(error)
        }
    }

    private static func readInteger<Integer: FixedWidthInteger>(
        _ type: Integer.Type, _ fd: Int32,
        _ deadline: UInt64?
    ) throws(ReadFailure) -> Integer {
        let bytes = try readExactly(MemoryLayout<Integer>.size, fd, deadline)
        var value = Integer.zero
        for (index, byte) in bytes.enumerated() { value |= Integer(byte) << (8 * index) }
        return value
    }

    private static func readExactly(_ count: Int, _ fd: Int32, _ deadline: UInt64?) throws(ReadFailure) -> Data {
        var data = Data(count: count)
        var offset = 0
        while offset < count {
            if let deadline {
                let now = DispatchTime.now().uptimeNanoseconds
                guard now < deadline else { throw .timedOut }
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let milliseconds = Int32(min((deadline - now) / 1_000_000 + 1, 60_000))
                let ready = poll(&poller, 1, milliseconds)
                if ready < 0, errno == EINTR { continue }
                if ready == 0 { continue }
                guard ready > 0 else { throw .closed }
            }
            let got = data.withUnsafeMutableBytes { buffer in
                Glibc.read(fd, buffer.baseAddress! + offset, count - offset)
            }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { throw .closed }
            offset += got
        }
        return data
    }
}
