import BrokerCrypto

/// Ending sessions from outside the app that holds them: the admin API (list them, end one, end
/// every session of a user) and back-channel logout (the provider ends the user's sessions).
/// A session is ended as `POST /revoke` ends it (``SessionOperations/revoke(_:)``): removed
/// from the store — durably, and on a shared store for every instance, whose caches drop it on
/// the store's notification — then its tokens revoked at the provider.
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
    func end(_ id: SHA256Digest) async throws(StateWriteError) -> (session: Session, revocation: ProviderRevocation)? {
        guard let removed = try await store.removeSession(id) else { return nil }
        sessions.profiles.remove(id)
        return (removed, await sessions.revoker.revoke(removed))
    }

    /// What ending many sessions did.
    struct Ended: Sendable {
        var sessions: [Session] = []
        var revocations: [ProviderRevocation: Int] = [:]
    }

    /// Ends every live session `filter` matches, here, then — unless `revokeLater` — at the
    /// provider, waiting for it. With `revokeLater` the provider is asked in the background
    /// (back-channel logout: the provider is the caller, and may not answer its own revocation
    /// endpoint while it waits for this answer).
    func endAll(_ filter: SessionFilter, revokeLater: Bool = false) async throws(AdministrationError) -> Ended {
        var ended = Ended()
        var after: SHA256Digest?
        repeat {
            let page: SessionPage
            do {
                page = try await store.findSessions(filter, after: after, limit: 100, now: sessions.now())
            } catch {
                throw .read(error)
            }
            for found in page.sessions {
                let removed: Session?
                do {
                    removed = try await store.removeSession(found.id)
                } catch {
                    revokeInBackground(ended.sessions)
                    throw .write(error, endedBefore: ended.sessions.count)
                }
                guard let removed else { continue }
                sessions.profiles.remove(found.id)
                ended.sessions.append(removed)
            }
            after = page.next
        } while after != nil
        if revokeLater {
            revokeInBackground(ended.sessions)
        } else {
            for session in ended.sessions { ended.revocations[await sessions.revoker.revoke(session), default: 0] += 1 }
        }
        return ended
    }

    private func revokeInBackground(_ ended: [Session]) {
        let revoker = sessions.revoker
        Task { for session in ended { _ = await revoker.revoke(session) } }
    }
}

/// Why sessions could not all be ended: the store could not be read or written now.
enum AdministrationError: Error, Sendable {
    case read(StateReadError)
    /// `endedBefore` sessions had been ended (and stay ended) when a removal failed.
    case write(StateWriteError, endedBefore: Int)
}
