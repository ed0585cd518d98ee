import Foundation
import VipsBench
import VipsCore
import VipsLoad

/// `vipsload info --system`: what `SystemResources` detected, where each
/// value came from, and the defaults VipsLoad derives from it.
enum SystemReport {
    static func text(json: Bool) -> String {
        let resources = SystemResources.current
        let configuration = ImagePipeline.Configuration()
        let cacheLimit = MemoryCache.defaultCostLimit(for: resources)
        let pressure = pressureMonitoring(resources, enabled: configuration.monitorsMemoryPressure)
        if json {
            func optional(_ value: String?) -> String { value.map(JSONText.string) ?? "null" }
            return Terminal.jsonObject([
                ("usableCPUs", String(resources.usableCPUs)),
                (
                    "affinityCPUs",
                    resources.affinityCPUs.map { "[" + $0.map(String.init).joined(separator: ", ") + "]" } ?? "null"
                ),
                ("onlineCPUs", String(resources.onlineCPUs)),
                ("cpuQuota", resources.cpuQuota.map { String(format: "%.3f", $0) } ?? "null"),
                ("cpuQuotaFile", optional(resources.cpuQuotaFile)),
                ("memoryLimit", String(resources.memoryLimit)),
                ("memoryLimitSource", JSONText.string(resources.memoryLimitSource.rawValue)),
                ("memoryLimitFile", optional(resources.memoryLimitFile)),
                ("physicalMemory", String(resources.physicalMemory)),
                ("availableMemory", resources.availableMemory.map(String.init) ?? "null"),
                ("memoryInUse", resources.currentMemoryUsage().map(String.init) ?? "null"),
                ("memoryPressureFile", optional(resources.memoryPressureFile)),
                ("controlGroups", JSONText.string(resources.controlGroups)),
                ("decodeConcurrency", String(configuration.decodeConcurrency)),
                ("memoryCacheLimit", String(cacheLimit)),
                ("memoryPressureMonitor", JSONText.string(pressure)),
                ("notes", "[" + resources.notes.map(JSONText.string).joined(separator: ", ") + "]")
            ])
        }
        return resources.description + "\n"
            + "defaults: decode concurrency \(configuration.decodeConcurrency) (thumb --jobs, bench --concurrency: the same), "
            + String(
                format: "memory cache %.0f MiB (20%% of the memory limit, at most 512 MiB)\n",
                Double(cacheLimit) / 1_048_576)
            + "memory pressure monitor: \(pressure)"
    }

    /// How a default pipeline's monitor would watch: armed PSI triggers,
    /// sampling (and why), or off.
    private static func pressureMonitoring(_ resources: SystemResources, enabled: Bool) -> String {
        let mode: String
        if let file = resources.memoryPressureFile {
            do throws(VipsError) {
                let trigger = try MemoryPressureTrigger(file: file)
                trigger.close()
                mode = "PSI triggers on \(file)"
            } catch {
                mode = "sampling usage every second (PSI triggers refused: \(error.message))"
            }
        } else {
            mode = "sampling usage every second (no PSI file)"
        }
        return enabled ? mode : "off by default (Configuration.monitorsMemoryPressure; would use \(mode))"
    }
}
