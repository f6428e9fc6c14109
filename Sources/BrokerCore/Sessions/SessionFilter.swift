import BrokerCrypto

/// Which sessions the admin API lists or ends, and which a logout token names: every given
/// field must match. A subject (`sub`) or a provider session (`sid`) is the provider's, so it
/// comes with the provider.
struct SessionFilter: Sendable {
    var provider: String?
    var app: String?
    /// The user's id at `provider`.
    var subject: String?
    /// The provider's session at sign-in (``Session/providerSessionID``).
    var providerSessionID: String?
    /// Sessions begun at or before this (Unix seconds): a logout token's, so that a sign-in after
    /// the logout survives its late delivery or retry.
    var signedInBy: Double?

    /// Whether the filter is one a store can answer: a subject or a provider session only
    /// with its provider.
    var isValid: Bool { provider != nil || (subject == nil && providerSessionID == nil) }

    func matches(_ session: borrowing Session) -> Bool {
        (provider == nil || provider == session.provider)
            && (app == nil || app == session.app)
            && (subject == nil || subject == session.subject)
            && (providerSessionID == nil || providerSessionID == session.providerSessionID)
            && (signedInBy.map { session.createdAt <= $0 } ?? true)
    }
}

/// One page of the sessions a filter matches, in the order of their ids.
struct SessionPage: Sendable {
    let sessions: [Session]
    /// The id to ask for the next page after; nil on the last page.
    let next: SHA256Digest?
}
