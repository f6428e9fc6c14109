import Logging
import WireValues

/// Where admin actions and provider sign-outs are recorded: one structured log line each
/// (`audit` names the action), the same event to the webhook when one is configured, and a count
/// by action in `broker_audit_events_total` (the action names are the code's own, so the label
/// stays bounded). Never a token: sessions are named by their id (the hash of their token).
/// Refusals of requests anyone can send (a wrong admin token, a bad logout token) are log lines
/// and counts only: a flood of them must not fill the webhook's queue and crowd out the events
/// that matter.
struct AuditTrail: Sendable {
    let logger: Logger
    let webhooks: WebhookSender?
    let metrics: BrokerMetrics

    /// Every audit line's `msg`: how the log tells an audit line from other events
    /// (`LogLineKind`).
    static let message = "audit"

    /// An action: a log line, a webhook event and a count.
    func record(_ action: StaticString, _ fields: [(String, JSONValue)]) {
        log(action, fields)
        webhooks?.event(type: action.description, fields)
    }

    /// A refused request: a log line and a count.
    func refused(_ action: StaticString, _ fields: [(String, JSONValue)]) {
        log(action, fields)
    }

    private func log(_ action: StaticString, _ fields: [(String, JSONValue)]) {
        metrics.auditEvent(action: action.description)
        var metadata: Logger.Metadata = ["audit": "\(action)"]
        for (name, value) in fields { metadata[name] = Self.metadata(value) }
        logger.notice("\(Self.message)", metadata: metadata)
    }

    /// The field as the log writes it: numbers as numbers, lists as lists.
    private static func metadata(_ value: JSONValue) -> Logger.Metadata.Value {
        switch value {
        case .null: "null"
        case .bool(let value): .stringConvertible(value)
        case .int(let value): .stringConvertible(value)
        case .double(let value): .stringConvertible(value)
        case .string(let text): .string(text)
        case .array(let values): .array(values.map(metadata))
        case .object(let members): .dictionary(Dictionary(members.map { ($0, metadata($1)) }) { $1 })
        }
    }
}
