import BrokerCrypto
import HTTPServer
import Logging
import Synchronization

/// Refreshes access tokens with the provider, one upstream call per session at a time: callers
/// that arrive while a refresh of their session is running wait for its result instead of
/// starting their own (AppAuth's rule, and the only safe one with rotating refresh tokens).
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
        case unsaved(StateWriteError)
    }

    private let state: any StateStore
    private let providers: ProviderDirectory
    private let calls: ProviderCalls
    private let logger: Logger
    private let metrics: BrokerMetrics
    private let webhooks: WebhookSender?
    /// Consecutive transient refresh failures per session, for `refresh.failing` events.
    private let failures = Mutex<[SHA256Digest: Int]>([:])
    private let now: @Sendable () -> Double
    private let inFlight = Mutex<[SHA256Digest: Task<Outcome, Never>]>([:])

    init(state: any StateStore, providers: ProviderDirectory, calls: ProviderCalls, logger: Logger, metrics: BrokerMetrics, webhooks: WebhookSender?, now: @escaping @Sendable () -> Double) {
        self.state = state
        self.providers = providers
        self.calls = calls
        self.logger = logger
        self.metrics = metrics
        self.webhooks = webhooks
        self.now = now
    }

    /// Refreshes session `id` unless (when `force` is false) its access token is still good for
    /// `minimumValidity` seconds — which it may be because a concurrent refresh just finished.
    func refresh(_ id: SHA256Digest, force: Bool, minimumValidity: Double) async -> Outcome {
        let task = inFlight.withLock { tasks in
            if let running = tasks[id] { return running }
            let started = Task { await self.perform(id, force: force, minimumValidity: minimumValidity) }
            tasks[id] = started
            return started
        }
        let outcome = await task.value
        inFlight.withLock { tasks in
            if tasks[id] == task { tasks[id] = nil }
        }
        return outcome
    }

    private func perform(_ id: SHA256Digest, force: Bool, minimumValidity: Double) async -> Outcome {
        guard let session = state.session(id, now: now()) else { return .gone }
        if !force && session.accessTokenValid(for: minimumValidity, at: now()) { return .fresh(session) }
        guard let refreshToken = session.refreshToken else {
            if !force && session.accessTokenValid(for: 0, at: now()) { return .fresh(session) }
            if case .failure(let error) = await remove(id) { return .unsaved(error) }
            webhooks?.sessionEnded(session, reason: "no_refresh_token")
            logger.info("session ended: nothing to refresh with", metadata: ["provider": "\(session.provider)"])
            return .loginRequired
        }
        let provider: Provider
        do {
            provider = try await providers.resolve(session.provider)
        } catch {
            return .failed(.badResponse("the provider's endpoints are unknown"))
        }
        let response: TokenResponse
        do {
            response = try await calls.refresh(refreshToken, provider: provider)
            metrics.refreshFinished(provider: session.provider, outcome: "refreshed")
            failures.withLock { $0[id] = nil }
        } catch {
            metrics.refreshFinished(provider: session.provider, outcome: error.endsGrant ? "login_required" : "failed")
            if error.endsGrant {
                if case .failure(let failure) = await remove(id) { return .unsaved(failure) }
                failures.withLock { $0[id] = nil }
                webhooks?.sessionEnded(session, reason: "invalid_grant")
                logger.info("session ended: the provider refused the refresh token", metadata: ["provider": "\(session.provider)"])
                return .loginRequired
            }
            logger.warning("refresh failed", metadata: ["provider": "\(session.provider)", "reason": "\(error.httpError.description)"])
            let streak = failures.withLock { failures in
                failures[id, default: 0] += 1
                return failures[id, default: 0]
            }
            if let webhooks, streak == webhooks.failuresBeforeEvent {
                webhooks.refreshFailing(session, consecutiveFailures: streak, reason: error.httpError.code)
            }
            return .failed(error)
        }
        let refreshedAt = now()
        do {
            // Durable before any caller sees the new token: a rotated refresh token is never lost.
            let updated = try await state.updateSession(id) { session in
                session.accessToken = response.accessToken
                session.accessTokenExpiresAt = response.expiresIn.map { refreshedAt + Double($0) }
                // A rotated refresh token replaces the old one; none in the answer keeps it.
                if let rotated = response.refreshToken { session.refreshToken = rotated }
                if let scopes = response.scopes { session.scopes = scopes }
            }
            return updated.map(Outcome.fresh) ?? .gone
        } catch {
            return .unsaved(error)
        }
    }

    private func remove(_ id: SHA256Digest) async -> Result<Void, StateWriteError> {
        do {
            _ = try await state.removeSession(id)
            return .success(())
        } catch {
            return .failure(error)
        }
    }
}
