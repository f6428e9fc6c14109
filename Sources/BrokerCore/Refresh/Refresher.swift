import BrokerCrypto
import Logging
import Synchronization

/// Refreshes access tokens with the provider, one upstream call per session at a time: callers
/// that arrive while a refresh of their session is running wait for its result instead of
/// starting their own (AppAuth's rule, and the only safe one with rotating refresh tokens).
///
/// And at most one per session in `minInterval` while its token has not expired: a client that
/// insists (`POST /refresh`, a `min_ttl` above the provider's lifetime) cannot make the broker
/// call the provider — under its one client id, which the provider throttles for every user —
/// and sync the journal on every request. Within the interval a caller that did not force the
/// refresh gets the current token; one that did gets 429 with `Retry-After`.
final class Refresher: Sendable {
    enum Outcome: Sendable {
        /// The session now (refreshed, or already fresh enough).
        case fresh(Session)
        /// The provider ended the grant, or there is nothing to refresh with: the session is gone.
        case loginRequired
        /// The session does not exist (any more).
        case gone
        /// A transient or provider-side failure; the session is kept.
        case failed(ProviderCallError)
        /// The outcome could not be saved.
        case unsaved
        /// Forced within `minInterval` of the session's last refresh: retry after this many seconds.
        case tooSoon(retryAfter: Int)
    }

    /// A refresh under way and what it was started for.
    private struct Running {
        let task: Task<Outcome, Never>
        let force: Bool
        let minimumValidity: Double

        /// Whether its result serves a caller who wants `force` and `minimumValidity`.
        func serves(force: Bool, minimumValidity: Double) -> Bool {
            (self.force || !force) && self.minimumValidity >= minimumValidity
        }
    }

    private let store: any StateStore
    private let providers: ProviderDirectory
    private let calls: ProviderCalls
    private let endings: GrantEndings
    private let logger: Logger
    private let metrics: BrokerMetrics
    private let webhooks: WebhookSender?
    /// Consecutive transient refresh failures per session, for `refresh.failing` events.
    private let failures = Mutex<[SHA256Digest: Int]>([:])
    private let now: @Sendable () -> Double
    private let inFlight = Mutex<[SHA256Digest: Running]>([:])
    /// Seconds between two refreshes of a session whose token has not expired; 0: no bound.
    private let minInterval: Double

    init(store: any StateStore, providers: ProviderDirectory, calls: ProviderCalls, endings: GrantEndings, logger: Logger,
         metrics: BrokerMetrics, webhooks: WebhookSender?, minInterval: Double, now: @escaping @Sendable () -> Double) {
        self.store = store
        self.providers = providers
        self.calls = calls
        self.endings = endings
        self.logger = logger
        self.metrics = metrics
        self.webhooks = webhooks
        self.minInterval = minInterval
        self.now = now
    }

    /// Refreshes session `id` unless (when `force` is false) its access token is still good for
    /// `minimumValidity` seconds — which it may be because a concurrent refresh just finished.
    /// A caller who finds a refresh under way waits for it; if that refresh was started for less
    /// than this caller wants (not forced, or a shorter validity), it then runs its own, once.
    /// A forced refresh that replaces a `refused` token (one the provider's API refused) is not
    /// made when the session holds another token already: that one is the answer.
    func refresh(_ id: SHA256Digest, force: Bool, minimumValidity: Double, refused: String? = nil) async -> Outcome {
        for _ in 0..<2 {
            let (running, joined) = inFlight.withLock { tasks in
                if let running = tasks[id] { return (running, true) }
                let started = Running(
                    task: Task { await self.perform(id, force: force, minimumValidity: minimumValidity, refused: refused) },
                    force: force, minimumValidity: minimumValidity
                )
                tasks[id] = started
                return (started, false)
            }
            let outcome = await running.task.value
            inFlight.withLock { tasks in
                if tasks[id]?.task == running.task { tasks[id] = nil }
            }
            // A forced refresh refused as too soon refuses only who forced it: a caller who
            // joined it without forcing gets the session as it is.
            if case .tooSoon = outcome, !force { return await perform(id, force: false, minimumValidity: minimumValidity) }
            guard joined, !running.serves(force: force, minimumValidity: minimumValidity), case .fresh = outcome else {
                return outcome
            }
        }
        return await perform(id, force: force, minimumValidity: minimumValidity, refused: refused)
    }

    /// Waits for every refresh under way (at shutdown, so that what they bring is saved).
    func drain() async {
        for running in inFlight.withLock({ Array($0.values) }) {
            _ = await running.task.value
        }
    }

    private func perform(_ id: SHA256Digest, force: Bool, minimumValidity: Double, refused: String? = nil) async -> Outcome {
        let seen: Session?
        do {
            seen = try await store.findSession(id, now: now())
        } catch {
            logger.warning("refresh not attempted: the state store is out of reach", metadata: ["reason": "\(error.description)"])
            return .unsaved
        }
        guard let seen else { return .gone }
        if !force && seen.accessTokenValid(for: minimumValidity, at: now()) { return .fresh(seen) }
        if let refused, seen.accessToken != refused { return .fresh(seen) }
        guard seen.refreshToken != nil else {
            if !force && seen.accessTokenValid(for: 0, at: now()) { return .fresh(seen) }
            return await end(seen, .noRefreshToken)
        }
        if let wait = secondsUntilRefreshAllowed(seen) {
            guard force else { return .fresh(seen) }
            // Refreshed moments ago, perhaps on another instance, whose token this one's memory
            // may not hold yet: the store has it.
            if let refused, !store.holdsEverySession, case .success(let stored?) = await reload(id), stored.accessToken != refused {
                return .fresh(stored)
            }
            return .tooSoon(retryAfter: wait)
        }
        do {
            return try await store.whileRefreshing(id) { lease in await refreshLocked(id, seen: seen, force: force, under: lease) }
        } catch {
            logger.warning("refresh not attempted: the state store is out of reach", metadata: ["reason": "\(error.description)"])
            return .unsaved
        }
    }


    /// The refresh at the provider, under the session's refresh `lease`.
    private func refreshLocked(_ id: SHA256Digest, seen: Session, force: Bool, under lease: RefreshLease) async -> Outcome {
        var session = seen
        if !store.holdsEverySession {
            // Another instance may have refreshed the session while this one waited for the lock:
            // its new token serves every caller, forced or not.
            // Out of reach is not gone: the client keeps its session and retries.
            guard case .success(let found) = await reload(id) else { return .unsaved }
            guard let stored = found else { return .gone }
            if stored.accessToken != seen.accessToken { return .fresh(stored) }
            session = stored
        }
        guard let refreshToken = session.refreshToken else { return .fresh(session) }
        let refreshedFrom = session.accessToken
        let provider: Provider
        do {
            provider = try await providers.resolve(session.provider)
        } catch {
            return .failed(.badResponse("the provider's endpoints are unknown"))
        }
        // The key this refresh proves, which its answer's token is bound to: an incremental
        // sign-in may give the session another before the answer is stored.
        let provenKey = session.providerProofKey
        let response: TokenResponse
        do throws(ProviderCallError) {
            response = try await calls.refresh(refreshToken, provider: provider, key: provenKey)
            // `dpop: required`: the new tokens of a bound grant's refresh the provider answered
            // with a bearer token are revoked, never handed out; the grant keeps its own.
            if provenKey != nil, provider.config.dpop == .required, !response.boundToKey {
                await endings.drop(Grant(response, provider: session.provider, subject: session.subject, requestedScopes: session.scopes,
                                         idTokenClaims: nil, at: now()), app: session.app)
                throw .badResponse("dpop is required, and the provider answered the refresh with a bearer token")
            }
            metrics.refreshFinished(provider: session.provider, outcome: "refreshed")
            failures.withLock { $0[id] = nil }
        } catch {
            if case .unusableTokens(_, let tokens) = error {
                // Tokens the broker cannot use are live at the provider all the same: revoked.
                await endings.drop(Grant(tokens, provider: session.provider, subject: session.subject, requestedScopes: session.scopes,
                                         idTokenClaims: nil, at: now()), app: session.app)
            }
            metrics.refreshFinished(provider: session.provider, outcome: error.endsGrant ? "login_required" : "failed")
            if error.endsGrant {
                // Only the refresh token this refresh used is dead: a sign-in adding scopes, or
                // another instance's refresh, may have replaced it meanwhile.
                guard case .success(let stored) = await reload(id) else { return .unsaved } // not ended on a guess
                if let stored, stored.refreshToken != refreshToken { return .fresh(stored) }
                return await end(session, .invalidGrant)
            }
            logger.warning("refresh failed", metadata: ["provider": "\(session.provider)", "reason": "\(error.description)"])
            let streak = failures.withLock { failures in
                failures[id, default: 0] += 1
                return failures[id, default: 0]
            }
            if let webhooks, streak == webhooks.failuresBeforeEvent {
                webhooks.refreshFailing(session, consecutiveFailures: streak, reason: error.code)
            }
            // A token that has not actually expired is still the best answer to a caller who
            // did not insist on a new one.
            if !force && session.accessTokenValid(for: 0, at: now()) { return .fresh(session) }
            return .failed(error)
        }
        let refreshedAt = now()
        do {
            // Durable before any caller sees the new token: a rotated refresh token is never lost.
            // Applied only to the grant it refreshed. A sign-in adding scopes may have replaced the
            // session's tokens meanwhile, or — past this refresh's lease, the database away —
            // another instance's refresh: theirs stand, and what this refresh brought is a
            // replaced grant's, not revoked (docs/lifecycle.md: at Google that would revoke the
            // whole grant, theirs with it). A sign-in that brought no refresh token of its own
            // keeps the one this refresh rotated, the only one that still works.
            var applied = false
            let updated = try await store.updateSession(id, under: lease) { session in
                applied = false // run again when another change came first
                guard session.refreshToken == refreshToken else { return }
                guard session.accessToken == refreshedFrom else {
                    if let rotated = response.refreshToken { session.refreshToken = rotated }
                    return
                }
                applied = true
                // Scopes the answer does not name stay as they are; so does the refresh token.
                session.take(Grant(response, provider: session.provider, subject: session.subject, requestedScopes: session.scopes,
                                   idTokenClaims: nil, proofKey: provenKey, at: refreshedAt), scopes: .replace)
                session.refreshedAt = refreshedAt
            }
            guard let updated else {
                // Ended while the refresh ran: what it brought has no session to keep it.
                await endings.drop(Grant(response, provider: session.provider, subject: session.subject, requestedScopes: session.scopes,
                                         idTokenClaims: nil, proofKey: provenKey, at: refreshedAt), app: session.app)
                return .gone
            }
            if !applied { logger.notice("a refresh's tokens were replaced while it ran; the session keeps the replacing ones") }
            return .fresh(updated)
        } catch {
            logger.error("a refreshed token could not be saved; the client was told to retry", metadata: ["reason": "\(error.description)"])
            return .unsaved
        }
    }

    /// Seconds until `session` may be refreshed at the provider again; nil when it may be now:
    /// its token has expired, or its last refresh is `minInterval` old (or unknown).
    private func secondsUntilRefreshAllowed(_ session: Session) -> Int? {
        guard minInterval > 0, session.accessTokenValid(for: 0, at: now()), let last = session.refreshedAt else { return nil }
        let wait = last + minInterval - now()
        return wait > 0 ? max(1, Int(wait.rounded(.up))) : nil
    }

    /// Session `id` as the shared store holds it now (another instance's refresh may have changed
    /// it); a store out of reach is a failure, logged, never taken for a session gone.
    private func reload(_ id: SHA256Digest) async -> Result<Session?, StateReadError> {
        do {
            return .success(try await store.loadSession(id, now: now()))
        } catch {
            logger.warning("the state store is out of reach while a refresh re-reads the session", metadata: ["reason": "\(error.description)"])
            return .failure(error)
        }
    }

    /// Ends `session` for `reason` (``GrantEndings``: its event when this call ended it, not when
    /// it had ended already, signed out meanwhile): "sign in again"; 503 when that could not be
    /// saved.
    private func end(_ session: Session, _ reason: EndReason) async -> Outcome {
        failures.withLock { $0[session.id] = nil }
        do {
            _ = try await endings.endSession(session.id, reason)
        } catch {
            return .unsaved
        }
        return .loginRequired
    }
}
