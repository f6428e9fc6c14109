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
    /// Sessions and grants signed in before this (Unix seconds, ``Grant/signedInAt``): a
    /// sign-out's, so that a sign-in after it survives its late delivery or retry.
    var signedInBefore: Double?

    /// Whether the filter is one a store can answer: a subject or a provider session only
    /// with its provider.
    var isValid: Bool { provider != nil || (subject == nil && providerSessionID == nil) }

    func matches(_ session: borrowing Session) -> Bool {
        matches(provider: session.provider, app: session.app, subject: session.subject, providerSessionID: session.providerSessionID,
                signedInAt: session.signedInAt)
    }

    /// Whether a grant held for `app` on its way to a session (behind a handoff or device code)
    /// matches.
    func matches(_ grant: Grant, app: String) -> Bool {
        matches(provider: grant.provider, app: app, subject: grant.subject, providerSessionID: grant.providerSessionID,
                signedInAt: grant.signedInAt)
    }

    private func matches(provider: String, app: String, subject: String, providerSessionID: String?, signedInAt: Double) -> Bool {
        (self.provider == nil || self.provider == provider)
            && (self.app == nil || self.app == app)
            && (self.subject == nil || self.subject == subject)
            && (self.providerSessionID == nil || self.providerSessionID == providerSessionID)
            && (signedInBefore.map { signedInAt < $0 } ?? true)
    }
}

/// One page of the sessions a filter matches, in the order of their ids.
struct SessionPage: Sendable {
    let sessions: [Session]
    /// The id to ask for the next page after; nil on the last page.
    let next: SHA256Digest?
}
