import BrokerCrypto

/// A grant's tokens waiting in the store to be revoked at their provider (RFC 7009), queued in the
/// same change that ended the grant, until the provider confirms each (docs/lifecycle.md).
struct QueuedRevocation: Sendable {
    /// Its key in the store, made of its provider and tokens: the same tokens queued twice (a
    /// change applied again after a lost acknowledgement) are one entry.
    let id: SHA256Digest
    let provider: String
    /// Still to revoke; revoked first, since that ends the grant at most providers.
    var refreshToken: String?
    /// Still to revoke.
    var accessToken: String?
    let app: String
    let subject: String
    let reason: EndReason
    let queuedAt: Double
    /// Deliveries tried and not confirmed.
    var attempts: Int
    /// When it is next tried.
    var dueAt: Double
    /// The key the tokens are bound to (DPoP), whose proofs go with the revocation; nil for
    /// bearer tokens.
    let proofKey: ProofSigningKey?

    init(id: SHA256Digest, provider: String, refreshToken: String?, accessToken: String?, app: String, subject: String,
         reason: EndReason, queuedAt: Double, attempts: Int, dueAt: Double, proofKey: ProofSigningKey? = nil) {
        self.id = id
        self.provider = provider
        self.refreshToken = refreshToken
        self.accessToken = accessToken
        self.app = app
        self.subject = subject
        self.reason = reason
        self.queuedAt = queuedAt
        self.attempts = attempts
        self.dueAt = dueAt
        self.proofKey = proofKey
    }

    /// The tokens of a grant its holder let go of at `now`, due at once.
    init(provider: String, accessToken: String, refreshToken: String?, app: String, subject: String, reason: EndReason,
         proofKey: ProofSigningKey? = nil, at now: Double) {
        self.init(id: SHA256.hash(Array("revocation\u{0}\(provider)\u{0}\(accessToken)\u{0}\(refreshToken ?? "")".utf8)), provider: provider,
                  refreshToken: refreshToken, accessToken: accessToken, app: app, subject: subject, reason: reason,
                  queuedAt: now, attempts: 0, dueAt: now, proofKey: proofKey)
    }

    init(_ grant: Grant, app: String, reason: EndReason, at now: Double) {
        self.init(provider: grant.provider, accessToken: grant.accessToken, refreshToken: grant.refreshToken, app: app,
                  subject: grant.subject, reason: reason, proofKey: grant.proofKey, at: now)
    }

    /// Seconds before the next try after `attempts` failed ones: 10 s, tripling, at most an hour.
    static func backoff(after attempts: Int) -> Double {
        (1..<max(1, attempts)).reduce(10.0) { delay, _ in min(3600, delay * 3) }
    }

    /// The entry after a delivery that failed at `now`, with what it left to revoke: due again
    /// after the backoff.
    func retried(refreshToken: String?, accessToken: String?, at now: Double) -> QueuedRevocation {
        var next = self
        next.refreshToken = refreshToken
        next.accessToken = accessToken
        next.attempts += 1
        next.dueAt = now + Self.backoff(after: next.attempts)
        return next
    }
}
