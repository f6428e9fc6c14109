import Logging
import Synchronization

/// A log handler that keeps the audit trail's lines (``AuditTrail``: `notice` lines with an
/// `audit` field) for a test to read, and drops the rest.
final class AuditLines: LogHandler, Sendable {
    private let lines = Mutex<[[String: String]]>([])

    var logLevel: Logger.Level {
        get { .trace }
        set {}
    }

    var metadata: Logger.Metadata {
        get { [:] }
        set {}
    }

    subscript(metadataKey _: String) -> Logger.Metadata.Value? {
        get { nil }
        set {}
    }

    func log(event: LogEvent) {
        guard let fields = event.metadata, fields["audit"] != nil else { return }
        lines.withLock { $0.append(fields.mapValues { "\($0)" }) }
    }

    /// The fields of each audit line recording `action`, in order.
    func events(_ action: String) -> [[String: String]] {
        lines.withLock { $0.filter { $0["audit"] == action } }
    }
}
