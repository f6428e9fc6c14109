import Foundation
import Prometheus
import Synchronization

/// The standard `process_*` metrics of Prometheus's client libraries, read from `/proc/self` when
/// `/metrics` is rendered: CPU time, resident and virtual memory, open and allowed file
/// descriptors, start time.
final class ProcessMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    /// The CPU time `process_cpu_seconds_total` has counted so far: a counter, as every client
    /// library exports it, grows by what the kernel's total gained since.
    private let countedCPUSeconds = Mutex<Double>(0)
    private static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
    private static let pageBytes = Double(sysconf(Int32(_SC_PAGESIZE)))

    init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
    }

    func update() {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
              let afterName = stat.lastIndex(of: ")") else { return }
        // Fields after the command's name, from field 3 (state) on: utime is 14, stime 15,
        // starttime 22, vsize 23, rss 24 (proc(5)).
        let fields = stat[stat.index(after: afterName)...].split(separator: " ")
        func field(_ number: Int) -> Double? { fields.count > number - 3 ? Double(fields[number - 3]) : nil }
        if let user = field(14), let system = field(15) {
            let total = (user + system) / Self.ticksPerSecond
            let gained = countedCPUSeconds.withLock { counted in
                defer { counted = max(counted, total) }
                return max(0, total - counted)
            }
            registry.makeCounter(descriptor: MetricNameDescriptor(namespace: "process", metricName: "cpu_seconds_total", unitName: "",
                                                                   helpText: "Total user and system CPU time spent in seconds."))
                .increment(by: gained)
        }
        if let start = field(22), let boot = Self.bootTime() {
            gauge("start_time_seconds", "Start time of the process since the Unix epoch in seconds.").set(boot + start / Self.ticksPerSecond)
        }
        if let virtual = field(23) { gauge("virtual_memory_bytes", "Virtual memory size in bytes.").set(virtual) }
        if let resident = field(24) { gauge("resident_memory_bytes", "Resident memory size in bytes.").set(resident * Self.pageBytes) }
        if let open = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            gauge("open_fds", "Number of open file descriptors.").set(Double(open.count))
        }
        var limit = rlimit()
        if getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            gauge("max_fds", "Maximum number of open file descriptors.").set(Double(limit.rlim_cur))
        }
    }

    private func gauge(_ name: String, _ help: String) -> Gauge {
        registry.makeGauge(descriptor: MetricNameDescriptor(namespace: "process", metricName: name, unitName: "", helpText: help))
    }

    /// When the machine booted (the start time in `/proc/self/stat` counts from it).
    private static func bootTime() -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = stat.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }) else { return nil }
        return Double(line.dropFirst(6))
    }
}
