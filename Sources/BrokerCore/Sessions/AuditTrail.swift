import Logging
import WireValues

/// Where admin actions and provider sign-outs are recorded: one structured log line each
/// (`audit` names the action), and the same event to the webhook when one is configured. Never
/// a token: sessions are named by their id (the hash of their token).
struct AuditTrail: Sendable {
    let logger: Logger
    let webhooks: WebhookSender?

    func record(_ action: String, _ fields: [(String, JSONValue)]) {
        var metadata: Logger.Metadata = ["audit": "\(action)"]
        for (name, value) in fields { metadata[name] = "\(Self.text(value))" }
        logger.notice("audit", metadata: metadata)
        webhooks?.event(type: action, fields)
    }

    private static func text(_ value: JSONValue) -> String {
        switch value {
        case .string(let text): text
        default: String(decoding: value.serialized(), as: UTF8.self)
        }
    }
}
