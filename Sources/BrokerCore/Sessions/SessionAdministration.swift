import BrokerCrypto

/// Ending sessions from outside the app that holds them: the admin API (list them, end one, end
/// every session of a user). A session ends as `POST /revoke` ends it (``GrantEndings``): gone on
/// every instance, its tokens queued for revocation and delivered to the provider at once; a
/// user's end is a sign-out (``GrantEndings/signOut(_:)``), which also ends their sign-ins under
/// way.
struct SessionAdministration: Sendable {
    let store: any StateStore
    let sessions: SessionOperations

    /// How many sessions one page holds at most.
    static let pageLimit = 1000

    /// One page of the live sessions `filter` matches.
    func list(_ filter: SessionFilter, after: SHA256Digest?, limit: Int) async throws(StateReadError) -> SessionPage {
        try await store.findSessions(filter, after: after, limit: min(max(limit, 1), Self.pageLimit), now: sessions.now())
    }

    /// Ends the session `id` here, then at the provider; nil when there was none.
    func end(_ id: SHA256Digest) async throws(StateWriteError) -> (session: EndedGrant, revocation: ProviderRevocation)? {
        try await sessions.endings.endAndRevoke(id, .admin)
    }

    /// What ending a user did: their sessions and sign-ins under way ended, and what their
    /// providers said of each revocation.
    struct Ended: Sendable {
        let signedOut: GrantEndings.SignedOut
        let revocations: [ProviderRevocation: Int]
    }

    /// Ends every session and sign-in under way of `subject` at `provider`, here, then at the
    /// provider, waiting for it.
    /// Everything signed in up to and including this instant ends.
    func endSubject(_ subject: String, at provider: String) async throws(AdministrationError) -> Ended {
        let signedOut = try await sessions.endings.signOut(
            SignOut(provider: provider, subject: subject, providerSessionID: nil, signedInBefore: sessions.now().nextUp, reason: .admin),
            deliveredHere: true
        )
        var revocations: [ProviderRevocation: Int] = [:]
        for ended in signedOut.sessions + signedOut.signIns {
            revocations[await sessions.endings.revocations.deliverNow(ended.revocation), default: 0] += 1
        }
        return Ended(signedOut: signedOut, revocations: revocations)
    }
}
