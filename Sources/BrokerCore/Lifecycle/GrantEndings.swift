import BrokerCrypto
import Logging
import WireValues

/// The one way a grant leaves the broker (docs/lifecycle.md). The store ends it — its state gone
/// on every instance and its tokens queued for revocation, in one change — and this announces
/// each ending once: the cached profile dropped, one `session.ended` audit event (and with it one
/// webhook), one count by reason; then the revocation queue delivers. Every route, flow and sweep
/// that ends a grant ends it here.
final class GrantEndings: Sendable {
    let store: any StateStore
    let profiles: ProfileCache
    let audit: AuditTrail
    let revocations: RevocationQueue
    let metrics: BrokerMetrics
    let logger: Logger
    /// How long a sign-out is remembered for sign-ins under way
    /// (``SignOut/memory(loginLifetime:)``).
    let signOutMemory: Double
    let now: BrokerClock

    init(store: any StateStore, profiles: ProfileCache, audit: AuditTrail, revocations: RevocationQueue, metrics: BrokerMetrics,
         logger: Logger, loginLifetime: Double, now: @escaping BrokerClock) {
        self.store = store
        self.profiles = profiles
        self.audit = audit
        self.revocations = revocations
        self.metrics = metrics
        self.logger = logger
        signOutMemory = SignOut.memory(loginLifetime: loginLifetime)
        self.now = now
    }

    /// Ends the session `id` for `reason`; what ended, nil when there was no such session. Its
    /// revocation is left to the queue.
    func endSession(_ id: SHA256Digest, _ reason: EndReason) async throws(StateWriteError) -> EndedGrant? {
        let ended = try await store.endSession(id, reason, now: now())
        announce(ended.map { [$0] } ?? [])
        return ended
    }

    /// Ends the session `id` for `reason`, then delivers its revocation at once, for a client
    /// waiting to hear what the provider said (`POST /revoke`, the admin API): that, or nil when
    /// there was no such session.
    func endAndRevoke(_ id: SHA256Digest, _ reason: EndReason) async throws(StateWriteError) -> (EndedGrant, ProviderRevocation)? {
        guard let ended = try await store.endSession(id, reason, now: now()) else { return nil }
        announce([ended], deliveredHere: true)
        return (ended, await revocations.deliverNow(ended.revocation))
    }

    /// Ends a grant that reached no holder (``EndReason/notHeld``): its tokens go to the
    /// revocation queue. When the store cannot take them (it is out of reach — often why the grant
    /// reached no holder), the provider, which may well be reachable, is asked at once; what it
    /// does not confirm is queued as soon as the store takes it (``RevocationQueue``).
    func drop(_ grant: Grant, app: String) async {
        do {
            announce([try await store.queueRevocation(grant, app: app, .notHeld, now: now())])
        } catch {
            announce([EndedGrant.of(grant, held: .none, app: app, reason: .notHeld, at: now()).0], deliveredHere: true)
            let outcome = await revocations.deliverUnqueued(grant, app: app, reason: .notHeld)
            logger.warning("a grant that reached no session could not be queued for revocation; its provider was asked at once", metadata: [
                "provider": "\(grant.provider)", "provider_revocation": "\(outcome.rawValue)", "reason": "\(error.description)",
            ])
        }
    }

    /// What a sign-out ended.
    struct SignedOut: Sendable {
        var sessions: [EndedGrant] = []
        /// Grants behind handoff and device codes not yet used.
        var signIns: [EndedGrant] = []
    }

    /// Signs a user out (`signOut`): remembered for the sign-ins under way (which end when they
    /// land), then every grant of theirs that it covers ends, on every instance — those behind
    /// codes first, then the sessions, so that a code redeemed meanwhile has made its session
    /// before the sessions are looked for. Throws when the store fails on the way; what had
    /// ended stays ended and is announced. With `deliveredHere`, the caller delivers the
    /// revocations itself (``RevocationQueue/deliverNow(_:)``).
    func signOut(_ signOut: SignOut, deliveredHere: Bool = false) async throws(AdministrationError) -> SignedOut {
        let at = now()
        var signedOut = SignedOut()
        do {
            try await store.rememberSignOut(signOut, until: at + signOutMemory)
            signedOut.signIns = try await store.endSignIns(signOut, now: at)
        } catch {
            throw .write(error, ended: signedOut)
        }
        announce(signedOut.signIns, deliveredHere: deliveredHere)
        var after: SHA256Digest?
        repeat {
            let page: SessionPage
            do {
                page = try await store.findSessions(signOut.filter, after: after, limit: 100, now: at)
            } catch {
                throw .read(error, ended: signedOut)
            }
            for found in page.sessions {
                do {
                    guard let ended = try await store.endSession(found.id, signOut.reason, now: at) else { continue }
                    announce([ended], deliveredHere: deliveredHere)
                    signedOut.sessions.append(ended)
                } catch {
                    throw .write(error, ended: signedOut)
                }
            }
            after = page.next
        } while after != nil
        return signedOut
    }

    /// A grant just put behind a code or into a session (`landed`): when a remembered sign-out
    /// covers it (its user signed out while the sign-in was under way), the sign-out is carried
    /// out again — it ends this grant with the rest — and that sign-out is returned. Nil when the
    /// grant stands. Checked after the grant landed: a sign-out that came before is remembered,
    /// and one that comes after finds the grant.
    func signedOut(_ landed: Grant) async throws(AdministrationError) -> SignOut? {
        let covering: SignOut?
        do {
            covering = try await store.signOut(covering: landed, now: now())
        } catch {
            throw .read(error, ended: SignedOut())
        }
        guard let covering else { return nil }
        _ = try await signOut(covering)
        return covering
    }

    /// Announces grants the store ended, each once, and delivers their revocations before the
    /// caller answers (a replayed code's session: its first redeemer holds its access token).
    func announceAndRevoke(_ ended: [EndedGrant]) async {
        announce(ended, deliveredHere: true)
        for grant in ended { _ = await revocations.deliverNow(grant.revocation) }
    }

    /// Announces grants the store ended, each once, and wakes the revocation queue for them —
    /// unless the caller delivers their revocations itself (`deliveredHere`).
    func announce(_ ended: [EndedGrant], deliveredHere: Bool = false) {
        guard !ended.isEmpty else { return }
        for grant in ended {
            if case .session(let id) = grant.holder { profiles.remove(id) }
            metrics.grantEnded(reason: grant.reason.rawValue, heldBy: grant.holder.name)
            audit.record("session.ended", grant.fields)
        }
        if !deliveredHere { revocations.wake() }
    }
}

/// Why sessions could not all be ended: the store could not be read or written now. `ended` is
/// what had been ended by then (and stays ended).
enum AdministrationError: Error, Sendable {
    case read(StateReadError, ended: GrantEndings.SignedOut)
    case write(StateWriteError, ended: GrantEndings.SignedOut)
}
