import BrokerCrypto

/// What an app does with a session it holds: read its current token (refreshed when due), force
/// a refresh, revoke it, and read the user's profile (`SessionOperations+Profile.swift`). Takes
/// and returns domain values; the API layer reads the bearer token and writes the answers. A
/// class: `GET /token` reaches it on every request, and a reference costs one retain where a
/// struct of its many references would cost one each.
final class SessionOperations: Sendable {
    let store: any StateStore
    let refresher: Refresher
    let providers: ProviderDirectory
    let calls: ProviderCalls
    let profiles: ProfileCache
    let endings: GrantEndings
    /// Refresh access tokens that expire within this many seconds (AppAuth's 60 s by default).
    let refreshSkew: Double
    let now: BrokerClock

    init(store: any StateStore, refresher: Refresher, providers: ProviderDirectory, calls: ProviderCalls, profiles: ProfileCache,
         endings: GrantEndings, refreshSkew: Double, now: @escaping BrokerClock) {
        self.store = store
        self.refresher = refresher
        self.providers = providers
        self.calls = calls
        self.profiles = profiles
        self.endings = endings
        self.refreshSkew = refreshSkew
        self.now = now
    }

    /// What ``current(_:validFor:_:)`` found.
    enum CurrentToken<Answer: Sendable>: Sendable {
        /// The access token is good for long enough: `answer` made of the session.
        case fresh(Answer)
        /// The access token must be refreshed first (``refresh(_:force:minimumValidity:)``);
        /// `early` when only the asked validity wants it (the token is still good for the skew).
        case refreshDue(early: Bool)
        /// No such live session.
        case unknownSession
        /// The session does not answer the request's holder (``Session/mismatch(_:)``).
        case wrongHolder(HolderMismatch)
    }

    /// The current token without waiting (the hot path, `GET /token`): `answer` is made of the
    /// session where it lies, when `holder` may use it and its access token stays valid for
    /// `validity` more seconds (``decide(_:holder:validFor:at:_:)``). `unknownSession` when this
    /// instance's memory does not hold it: with a shared store, ``currentLoaded(_:holder:validFor:)``
    /// then decides the same on the session read from the store.
    func current<Answer: Sendable>(_ id: SHA256Digest, holder: SessionHolder, validFor validity: Double,
                                   _ answer: (borrowing Session, _ now: Double) -> Answer) -> CurrentToken<Answer> {
        let at = now()
        return store.readSession(id, now: at) { session in decide(session, holder: holder, validFor: validity, at: at, answer) }
            ?? .unknownSession
    }

    /// ``current(_:holder:validFor:_:)`` for a session this instance's memory lacks: the session
    /// read from the store, and the same decision on it; nil when the store has none.
    func currentLoaded(_ id: SHA256Digest, holder: SessionHolder, validFor validity: Double) async throws(StateReadError)
        -> (session: Session, decision: CurrentToken<Void>)? {
        guard let session = try await store.findSession(id, now: now()) else { return nil }
        return (session, decide(session, holder: holder, validFor: validity, at: now()) { _, _ in () })
    }

    /// The one decision on a session's current token: refused to a holder it does not answer;
    /// `fresh` while its access token stays valid for `validity` more seconds; else a refresh is
    /// due — `early` when only the asked validity wants it (the token is still good for the skew),
    /// which per-address limits count.
    private func decide<Answer: Sendable>(_ session: borrowing Session, holder: SessionHolder, validFor validity: Double, at: Double,
                                          _ answer: (borrowing Session, _ now: Double) -> Answer) -> CurrentToken<Answer> {
        if let mismatch = session.mismatch(holder) { return .wrongHolder(mismatch) }
        guard !session.accessTokenValid(for: validity, at: at) else { return .fresh(answer(session, at)) }
        return .refreshDue(early: session.accessTokenValid(for: refreshSkew, at: at))
    }

    /// The one way to a fresh token (golang.org/x/oauth2's `ReuseTokenSource`, AppAuth's
    /// `performActionWithFreshTokens`): `session` as it is when its access token stays valid for
    /// `validity` more seconds, else the session refreshed at the provider first — one refresh
    /// per session at a time, joined by concurrent callers; within `min_refresh_interval_seconds`
    /// of the last one, the current token. `GET /token`, the standard token endpoint and the API
    /// proxy all get their token here; only `GET /token`'s hot path first looks in memory on the
    /// server thread (``current(_:holder:validFor:_:)``), which also says whether a refresh would
    /// be asked before it is due.
    func fresh(_ session: Session, validFor validity: Double) async throws(RefreshFailure) -> Session {
        if let session = freshNow(session, validFor: validity) { return session }
        return try await refresh(session.id, force: false, minimumValidity: validity)
    }

    /// ``fresh(_:validFor:)`` without waiting, for a caller on a server thread: `session` when
    /// its access token stays valid for `validity` more seconds; nil when a refresh is due
    /// first (then `fresh`).
    func freshNow(_ session: Session, validFor validity: Double) -> Session? {
        session.accessTokenValid(for: validity, at: now()) ? session : nil
    }

    /// The session with a token valid for `minimumValidity` seconds, refreshed at the provider
    /// first when it is due or `force`d (one refresh per session at a time: ``Refresher``).
    func refresh(_ id: SHA256Digest, force: Bool, minimumValidity: Double) async throws(RefreshFailure) -> Session {
        try await refresher.refresh(id, force: force, minimumValidity: minimumValidity).session()
    }

    /// A token other than `refused`, which the provider has just refused (a 401 from its API or
    /// its userinfo endpoint): the session's, when another request has replaced it already (here
    /// or on another instance), else one refreshed now — forced, joining a refresh under way — so
    /// that requests refused together make one refresh. `.tooSoon` when the session still holds
    /// `refused` within `min_refresh_interval_seconds` of its last refresh. The one way back from
    /// a refused token, for the API proxy and the profile.
    func replacing(_ refused: String, in id: SHA256Digest) async throws(RefreshFailure) -> Session {
        try await refresher.refresh(id, force: true, minimumValidity: refreshSkew, refused: refused).session()
    }

    /// Ends the session `id` for `reason` (``GrantEndings``), its tokens queued for revocation in
    /// the same change, then delivers that revocation at once: what the provider said, or nil
    /// when there was no such session (ending is idempotent).
    func end(_ id: SHA256Digest, _ reason: EndReason) async throws(StateWriteError) -> ProviderRevocation? {
        try await endings.endAndRevoke(id, reason)?.1
    }
}
