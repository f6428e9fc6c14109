public import Foundation

/// `webhooks`: where the broker reports sessions that end or keep failing to refresh. Each event
/// is signed with HMAC-SHA256 under `secret` (docs/operations.md, "Webhooks").
public struct WebhookSettings: Sendable {
    public let url: URL
    public let secret: Secret
    /// Consecutive failed refreshes of one session before a `refresh.failing` event.
    public let failuresBeforeEvent: Int

    /// Creates webhook settings; the default is that of the embedded configuration.
    public init(url: URL, secret: Secret, failuresBeforeEvent: Int = WebhookSettings.defaultFailuresBeforeEvent) {
        self.url = url
        self.secret = secret
        self.failuresBeforeEvent = failuresBeforeEvent
    }

    /// `failures_before_event` when none is configured. A named constant rather than only an
    /// argument default: without a URL there are no settings, but the configuration keeps the
    /// count while the URL and the secret are still being read.
    public static let defaultFailuresBeforeEvent = 3
    /// Accepted range of `failures_before_event`.
    static let failuresBeforeEventRange = 1...100
}

extension ConfigDocumentDecoder {
    /// Reads `webhooks.secret_env` or `webhooks.secret_file` (exactly one) and resolves it.
    func decodeWebhookSecret(_ reader: YAMLMappingReader, into draft: inout ConfigDraft, problems: inout ConfigProblemList) {
        guard case .found(let reference, let key) = reader.secretReference("secret", problems: &problems) else { return }
        draft.lines[reader.path.child(key).description] = reader.line(of: key)
        switch reference.resolve(environment: environment, baseDirectory: baseDirectory) {
        case .success(let secret): draft.webhookSecret = secret
        case .failure(let error): problems.add(reader.path.child(key), error.message, line: reader.line(of: key))
        }
    }
}
