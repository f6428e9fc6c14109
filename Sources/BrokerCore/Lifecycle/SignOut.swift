/// A user signed out: at their provider (a back-channel logout token, by `sub` and/or `sid`) or
/// everywhere by an admin. Everything of theirs signed in before ``signedInBefore`` ends — sessions,
/// grants behind handoff and device codes, and sign-ins still under way when it arrived, which
/// the store remembers it for (docs/lifecycle.md).
struct SignOut: Sendable {
    let provider: String
    let subject: String?
    let providerSessionID: String?
    /// Grants signed in before this (Unix seconds) are ended.
    let signedInBefore: Double
    let reason: EndReason

    /// The sessions and held grants it ends.
    var filter: SessionFilter {
        SessionFilter(provider: provider, subject: subject, providerSessionID: providerSessionID, signedInBefore: signedInBefore)
    }

    /// How long the store remembers it past `now`: longer than a login may take to come back
    /// from the provider (``SessionSettings/loginLifetimeSeconds``), with a minute of skew.
    static func memory(loginLifetime: Double) -> Double { loginLifetime + 60 }

    /// Whose sign-ins a store remembers it for: the provider session it names, when it names one
    /// (a logout of one provider session covers that session's sign-ins, not the user's others),
    /// else the user.
    enum Scope: Sendable, Equatable {
        case subject(String)
        case providerSession(String)
    }

    /// Whose sign-ins it covers; nil when it names neither (a logout token always names one).
    var scope: Scope? {
        if let providerSessionID { return .providerSession(providerSessionID) }
        return subject.map { .subject($0) }
    }
}

/// A sign-out as a store remembers it for the sign-ins under way when it came, under its provider
/// with its subject or its provider session: by when they count as before it, why it ended
/// them, and until when it is remembered.
struct RememberedSignOut: Sendable {
    let signedInBefore: Double
    let reason: EndReason
    let until: Double

    /// This and `other`, remembered under one key: the later sign-out's time and reason, for the
    /// longer of the two.
    func merged(_ other: RememberedSignOut) -> RememberedSignOut {
        let later = other.signedInBefore > signedInBefore ? other : self
        return RememberedSignOut(signedInBefore: later.signedInBefore, reason: later.reason, until: max(until, other.until))
    }
}

extension SignOut {
    /// The scopes a sign-out that covers `grant` may have been remembered under: its user, and
    /// its provider session when it has one.
    static func scopes(covering grant: Grant) -> [Scope] {
        [.subject(grant.subject)] + (grant.providerSessionID.map { [.providerSession($0)] } ?? [])
    }

    /// The sign-out that covers `grant` among those remembered under its scopes and not yet
    /// forgotten at `now`: the latest one it was signed in before. Nil when none covers it.
    static func covering(_ grant: Grant, among remembered: [(RememberedSignOut, Scope)], now: Double) -> SignOut? {
        let covering = remembered.filter { $0.0.until > now && grant.signedInAt < $0.0.signedInBefore }
        guard let (latest, scope) = covering.max(by: { $0.0.signedInBefore < $1.0.signedInBefore }) else { return nil }
        let (subject, session): (String?, String?) = switch scope {
        case .subject(let subject): (subject, nil)
        case .providerSession(let session): (nil, session)
        }
        return SignOut(provider: grant.provider, subject: subject, providerSessionID: session, signedInBefore: latest.signedInBefore,
                       reason: latest.reason)
    }
}
