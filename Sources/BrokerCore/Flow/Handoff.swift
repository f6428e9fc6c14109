import BrokerCrypto

/// A one-time handoff code's record, between `/callback` and `POST /token`: bound to the app,
/// its redirect URI and its PKCE challenge; short-lived. Its ``Status`` says what it holds, and
/// ``redeem(_:)`` and ``expire(at:)`` are the one rule for what a redemption and an expiry do,
/// which both stores apply (docs/lifecycle.md).
struct Handoff: Sendable {
    let app: String
    let redirectURI: String
    let appChallenge: String
    let expiresAt: Double
    var status: Status
    /// Redemptions refused so far (another app or redirect URI, a verifier that does not match):
    /// someone other than its app has the code.
    var refusals = 0

    enum Status: Sendable {
        /// Waiting for its app, with the grant of a new session.
        case holding(Grant)
        /// Waiting for its app; the grant of an incremental authorization is in this session,
        /// whose token is bound to the key `boundTo` names (DPoP), if any: only a proof of that
        /// key redeems the code; whose grant is `provider`'s (nil in a record from before it
        /// was kept); and whose provider token is bound to the broker's key when
        /// `providerBound`. A session bound either way is answered with its own token at a
        /// standard token endpoint, which the code does not carry: only `POST /token` redeems it.
        case merged(into: SHA256Digest, boundTo: String?, provider: String?, providerBound: Bool)
        /// Redeemed, releasing this session: redeemed again by a request that could have
        /// redeemed it, the code has leaked with its verifier, and the session ends.
        case redeemed(SHA256Digest)
        /// Released nothing, and never will; a grant it held was revoked.
        case spent(SpentReason)
    }

    /// Why a code released nothing.
    enum SpentReason: Sendable, Equatable {
        /// Not redeemed in time.
        case expired
        /// Refused ``Handoff/refusalLimit`` times.
        case refusedTooOften
        /// Its user signed out before it was redeemed.
        case signedOut
    }

    /// Refusals after which a code is spent: guessing a PKCE verifier is hopeless, so a refusal
    /// is a mistake or someone else holding the code, and its app may still redeem it until then.
    static let refusalLimit = 3

    /// The grant it holds for a session not made yet.
    var heldGrant: Grant? {
        if case .holding(let grant) = status { grant } else { nil }
    }

    /// Whether `attempt` may have what the code holds: nil, or why not.
    func refusal(of attempt: HandoffAttempt) -> HandoffRefusal? {
        guard attempt.app == app, attempt.redirectURI == redirectURI else { return .wrongClient }
        guard PKCE.verify(verifier: attempt.verifier, challenge: appChallenge) else { return .wrongVerifier }
        if case .merged(_, let bound, _, let providerBound) = status {
            if let bound, attempt.keyThumbprint != bound { return .wrongKey }
            if attempt.issuer != nil, bound != nil || providerBound { return .boundSessionAtIssuer }
        }
        if let issuer = attempt.issuer, let provider, provider != issuer { return .wrongIssuer }
        return nil
    }

    /// The provider whose grant the code holds or stands for, while it waits; nil after.
    private var provider: String? {
        switch status {
        case .holding(let grant): grant.provider
        case .merged(_, _, let provider, _): provider
        case .redeemed, .spent: nil
        }
    }

    /// A redemption by `attempt`: what it finds, the code as it is after, and what the store does
    /// with it. Refused, it spends nothing until the ``refusalLimit``th refusal; in time and
    /// allowed, it releases its grant as the session `attempt` names (or the session an
    /// incremental authorization merged into); allowed again, it ends that session; late, it
    /// releases nothing and its grant is revoked.
    mutating func redeem(_ attempt: HandoffAttempt) -> (HandoffRedemption, [GrantEffect]) {
        switch status {
        case .spent(let reason):
            return (.spent(reason), [])
        case .redeemed(let session):
            if let refusal = refusal(of: attempt) { return (.refused(refusal), []) }
            return (.replayed, [.endSession(session, .replayedCode)])
        case .holding(let grant):
            if let stopped = stop(attempt) { return stopped }
            status = .redeemed(attempt.sessionID)
            return (.released(signIn: grant.signInID), [.makeSession(Session(id: attempt.sessionID, app: app, grant: grant, keyThumbprint: attempt.keyThumbprint, at: attempt.at))])
        case .merged(let session, _, _, _):
            if let stopped = stop(attempt) { return stopped }
            status = .redeemed(session)
            return (.merged(session), [])
        }
    }

    /// What stops a first redemption: the code's lifetime, then a refusal (counted; the
    /// ``refusalLimit``th spends the code). Nil when `attempt` redeems it. A bound session's code
    /// tried at an issuer is not counted: the attempt proved the verifier (and the app's key, for
    /// a session bound to one), so it is the app's, at the wrong endpoint.
    private mutating func stop(_ attempt: HandoffAttempt) -> (HandoffRedemption, [GrantEffect])? {
        guard expiresAt > attempt.at else { return (.spent(.expired), spend(.expired, .codeExpired)) }
        guard let refusal = refusal(of: attempt) else { return nil }
        if refusal == .boundSessionAtIssuer { return (.refused(refusal), []) }
        refusals += 1
        guard refusals >= Self.refusalLimit else { return (.refused(refusal), []) }
        return (.spent(.refusedTooOften), spend(.refusedTooOften, .refusedCode))
    }

    /// Past its lifetime at `now` and not redeemed: it releases nothing any more, and its grant is
    /// revoked (a sweep).
    mutating func expire(at now: Double) -> [GrantEffect] {
        guard expiresAt <= now, heldGrant != nil else { return [] }
        return spend(.expired, .codeExpired)
    }

    /// Its user signed out (`signOut`): a grant it holds and `signOut` covers is revoked, and the
    /// code releases nothing.
    mutating func end(_ signOut: SignOut) -> [GrantEffect] {
        guard let grant = heldGrant, signOut.filter.matches(grant, app: app) else { return [] }
        return spend(.signedOut, signOut.reason)
    }

    private mutating func spend(_ spent: SpentReason, _ reason: EndReason) -> [GrantEffect] {
        let held = heldGrant
        status = .spent(spent)
        return held.map { [.revoke($0, held: .handoffCode, app: app, reason)] } ?? []
    }
}

/// A redemption of a handoff code, as ``Handoff/redeem(_:)`` judges it: who asks, when, and the
/// id of the session the code may release (the hash of the token its app is about to get).
struct HandoffAttempt: Sendable {
    let app: String
    let redirectURI: String
    let verifier: String
    let sessionID: SHA256Digest
    /// The key the redeeming request proved it holds (its DPoP proof): the new session's token is
    /// bound to it, and a merged code's session must be bound to it already.
    var keyThumbprint: String? = nil
    /// The provider at whose issuer's token endpoint the code is redeemed; nil at the broker's
    /// own, which serves every provider.
    var issuer: String? = nil
    let at: Double
}
