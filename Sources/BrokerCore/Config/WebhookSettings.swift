public import Foundation

/// `webhooks`: where the broker reports sessions that end or keep failing to refresh. Each event
/// is signed with HMAC-SHA256 under `secret` (README, "Webhooks").
public struct WebhookSettings: Sendable {
    public let url: URL
    public let secret: Secret
    /// Consecutive failed refreshes of one session before a `refresh.failing` event.
    public let failuresBeforeEvent: Int

    public init(url: URL, secret: Secret, failuresBeforeEvent: Int) {
        self.url = url
        self.secret = secret
        self.failuresBeforeEvent = failuresBeforeEvent
    }
}

extension ConfigDocumentDecoder {
    /// Reads `webhooks.secret_env` or `webhooks.secret_file` (exactly one) and resolves it.
    func decodeWebhookSecret(_ reader: YAMLMappingReader, into draft: inout ConfigDraft, problems: inout ConfigProblemList) {
        let hasEnv = reader.has("secret_env")
        let hasFile = reader.has("secret_file")
        guard hasEnv || hasFile else { return }
        guard !(hasEnv && hasFile) else {
            problems.add(reader.path.child("secret_file"), "set only one of secret_env and secret_file", line: reader.line(of: "secret_file"))
            return
        }
        let key = hasEnv ? "secret_env" : "secret_file"
        guard let text = reader.string(key, problems: &problems) else { return }
        let reference: SecretReference = hasEnv ? .environment(text) : .file(text)
        switch reference.resolve(environment: environment, baseDirectory: baseDirectory) {
        case .success(let secret): draft.webhookSecret = secret
        case .failure(let error): problems.add(reader.path.child(key), error.message, line: reader.line(of: key))
        }
    }
}
