/// A user signed out: at their provider (a back-channel logout token, by `sub` and/or `sid`) or
/// everywhere by an admin. Everything of theirs signed in by ``signedInBy`` ends — sessions,
/// grants behind handoff and device codes, and sign-ins still under way when it arrived, which
/// the store remembers it for (docs/lifecycle.md).
struct SignOut: Sendable {
    let provider: String
    let subject: String?
    let providerSessionID: String?
    /// Grants signed in at or before this (Unix seconds) are ended.
    let signedInBy: Double
    let reason: EndReason

    /// The sessions and held grants it ends.
    var filter: SessionFilter {
        SessionFilter(provider: provider, subject: subject, providerSessionID: providerSessionID, signedInBy: signedInBy)
    }

    /// How long the store remembers it past `now`: longer than a login may take to come back
    /// from the provider (``SessionSettings/loginLifetimeSeconds``), with a minute of skew.
    static func memory(loginLifetime: Double) -> Double { loginLifetime + 60 }
}

/// A sign-out as a store remembers it for the sign-ins under way when it came, under its provider
/// with its subject or its provider session: by when they count as before it, why it ended
/// them, and until when it is remembered.
struct RememberedSignOut: Sendable {
    let signedInBy: Double
    let reason: EndReason
    let until: Double

    /// This and `other`, remembered under one key: the later sign-out's time and reason, for the
    /// longer of the two.
    func merged(_ other: RememberedSignOut) -> RememberedSignOut {
        let later = other.signedInBy > signedInBy ? other : self
        return RememberedSignOut(signedInBy: later.signedInBy, reason: later.reason, until: max(until, other.until))
    }
}

extension SignOut {
    /// The sign-out that covers `grant` among those remembered for its user (`bySubject`: under
    /// its subject, else under its provider session) and not yet forgotten at `now`: the latest
    /// that it was signed in by. Nil when none covers it.
    static func covering(_ grant: Grant, among remembered: [(RememberedSignOut, bySubject: Bool)], now: Double) -> SignOut? {
        let covering = remembered.filter { $0.0.until > now && grant.signedInAt <= $0.0.signedInBy }
        guard let (latest, bySubject) = covering.max(by: { $0.0.signedInBy < $1.0.signedInBy }) else { return nil }
        return SignOut(provider: grant.provider, subject: bySubject ? grant.subject : nil,
                       providerSessionID: bySubject ? nil : grant.providerSessionID, signedInBy: latest.signedInBy, reason: latest.reason)
    }
}
