import Foundation

/// `vipsthumbnail` from libvips-tools on the same files, for the `--compare`
/// ratio: one process over all the files, as a user would run it.
public enum VipsthumbnailPeer {
    public struct Measurement: Sendable {
        public let imagesPerSecond: Double
        public let peakRSS: Int
    }

    /// Median images/s over `repeats` runs and the largest peak RSS; nil when
    /// vipsthumbnail is missing and cannot be installed.
    public static func measure(_ files: [URL], size: Int, repeats: Int) -> Measurement? {
        guard !files.isEmpty, PeerProcess.ensure("vipsthumbnail", package: "libvips-tools") else { return nil }
        let output = FileManager.default.temporaryDirectory.appendingPathComponent(
            "vipsload-bench-\(UUID().uuidString)")
        guard (try? FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)) != nil else {
            return nil
        }
        defer { try? FileManager.default.removeItem(at: output) }
        var rates: [Double] = [], peak = 0
        for _ in 0..<max(1, repeats) {
            let arguments = ["vipsthumbnail", "-s", String(size), "-o", output.path + "/%s.jpg"] + files.map(\.path)
            guard let run = try? PeerProcess.measure(arguments), run.status == 0 else { return nil }
            rates.append(Double(files.count) / run.seconds)
            peak = max(peak, run.peakRSS)
        }
        return Measurement(imagesPerSecond: LatencyStatistics.median(rates), peakRSS: peak)
    }
}
