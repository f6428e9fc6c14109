import BrokerCrypto
import Logging
import Synchronization
import WireValues

/// What became of a grant's tokens at the provider once it ended here: the `provider_revocation`
/// of `POST /revoke` and the admin API.
enum ProviderRevocation: String, Sendable, CaseIterable {
    /// The provider confirmed the revocation of every token (RFC 7009: 200).
    case succeeded
    /// Not confirmed yet (the provider could not be reached, or did not confirm, or another
    /// instance is delivering it): the queue tries again until it does.
    case queued
    /// The provider has no revocation endpoint.
    case notSupported = "not_supported"
}

/// Delivers the revocations owed to providers (docs/lifecycle.md): every grant that ends leaves
/// its tokens in the store's queue, in the change that ended it, and a worker on each instance
/// takes what is due (one instance each: ``StateStore/dueRevocations(now:limit:claim:id:)``),
/// asks the provider (RFC 7009, the refresh token first), and keeps what it did not confirm for a
/// later try — 10 s after the first failure, tripling up to an hour — across restarts. One still
/// refused after `give_up` seconds is an audit event (`revocation.abandoned`), then dropped.
final class RevocationQueue: Sendable {
    private let store: any StateStore
    private let providers: ProviderDirectory
    private let calls: ProviderCalls
    private let audit: AuditTrail
    private let metrics: BrokerMetrics
    private let logger: Logger
    private let giveUpAfter: Double
    private let now: BrokerClock
    private let wakeups = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    /// Grants whose revocation the store could not queue (it was out of reach) and the provider
    /// did not confirm when asked at once: queued at the first round the store takes them. In
    /// memory meanwhile (``deliverUnqueued(_:app:reason:)``).
    private let unqueued = Mutex<[(grant: Grant, app: String, reason: EndReason)]>([])

    /// How long a delivery holds its claim on an entry: longer than a provider call may take.
    static let claimSeconds = 120.0
    /// How many entries a round takes.
    static let batch = 50
    /// How many grants the store could not queue wait in memory at most; past it, one is let go
    /// (logged): an outage that long is the operator's to see.
    static let unqueuedLimit = 10_000

    init(store: any StateStore, providers: ProviderDirectory, calls: ProviderCalls, audit: AuditTrail, metrics: BrokerMetrics,
         logger: Logger, giveUpAfter: Double, now: @escaping BrokerClock) {
        self.store = store
        self.providers = providers
        self.calls = calls
        self.audit = audit
        self.metrics = metrics
        self.logger = logger
        self.giveUpAfter = giveUpAfter
        self.now = now
    }

    /// Something was queued: deliver without waiting for the next round.
    func wake() {
        wakeups.continuation.yield()
    }

    /// Delivers what is due until the calling task is cancelled: a round when woken, and every
    /// `interval` seconds (other instances' entries, retries coming due). Counts what waits.
    func run(interval: Duration = .seconds(5)) async {
        let ticker = Task { [wakeups] in
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                wakeups.continuation.yield()
            }
        }
        defer { ticker.cancel() }
        for await _ in wakeups.stream {
            guard !Task.isCancelled else { return }
            await deliverDue()
            if let pending = try? await store.countRevocations() { metrics.revocationsPending(pending) }
        }
    }

    /// Stops ``run(interval:)`` once its round ends. Grants still waiting in memory for the store
    /// are let go, and logged.
    func stop() {
        wakeups.continuation.finish()
        for waiting in unqueued.withLock({ waiting in defer { waiting.removeAll() }; return waiting }) {
            logger.error("a grant's revocation was never queued: the store stayed out of reach until the broker stopped",
                         metadata: ["provider": "\(waiting.grant.provider)"])
        }
    }

    /// One round: what is due, a batch at a time, until the calling task is cancelled (a
    /// shutdown: what it did not deliver stays claimed until its claim lapses, then any instance
    /// takes it).
    func deliverDue() async {
        await queueUnqueued()
        while !Task.isCancelled {
            let due: [QueuedRevocation]
            do {
                due = try await store.dueRevocations(now: now(), limit: Self.batch, claim: Self.claimSeconds, id: nil)
            } catch {
                logger.warning("queued revocations could not be read; they wait for the next round", metadata: ["reason": "\(error.description)"])
                return
            }
            for revocation in due where !Task.isCancelled { _ = await deliver(revocation) }
            guard due.count == Self.batch else { return }
        }
    }

    /// Delivers the revocation `id` now, for a client that waits for what the provider says
    /// (`POST /revoke`): `.queued` when it failed, to be retried. Taken even while another
    /// delivery has it (revoking twice is harmless, RFC 7009 §2.2), so that the answer is the
    /// provider's.
    func deliverNow(_ id: SHA256Digest) async -> ProviderRevocation {
        guard let revocation = try? await store.dueRevocations(now: now(), limit: 1, claim: Self.claimSeconds, id: id).first else {
            return .queued
        }
        return await deliver(revocation)
    }

    /// Asks the provider at once to revoke the tokens of `grant`, whose revocation the store could
    /// not queue (it is out of reach; the provider may not be): what the provider said. One it
    /// did not confirm waits in memory, and is queued at the first round the store takes it.
    func deliverUnqueued(_ grant: Grant, app: String, reason: EndReason) async -> ProviderRevocation {
        let (outcome, next) = await ask(QueuedRevocation(grant, app: app, reason: reason, at: now()))
        metrics.revocationDelivered(provider: grant.provider, outcome: outcome.rawValue)
        guard next != nil else { return outcome }
        let full = unqueued.withLock { waiting in
            guard waiting.count < Self.unqueuedLimit else { return true }
            waiting.append((grant, app, reason))
            return false
        }
        if full {
            logger.error("a grant's revocation could not be kept for the store: too many wait for it already",
                         metadata: ["provider": "\(grant.provider)"])
        }
        return outcome
    }

    /// Puts in the store's queue what ``deliverUnqueued(_:app:reason:)`` kept in memory, where
    /// the store takes it (asking the provider again is harmless: RFC 7009 §2.2).
    /// Stops at the first the store refuses (it is still out of reach): the rest wait for the next
    /// round, as they do when the round is cancelled.
    private func queueUnqueued() async {
        while !Task.isCancelled, let waiting = unqueued.withLock({ $0.first }) {
            do {
                _ = try await store.queueRevocation(waiting.grant, app: waiting.app, waiting.reason, now: now())
            } catch {
                return
            }
            unqueued.withLock { _ = $0.removeFirst() }
        }
    }

    /// Asks the provider to revoke what `revocation` still holds, then settles it: removed when
    /// done (or given up), kept with the rest for a later try.
    private func deliver(_ revocation: QueuedRevocation) async -> ProviderRevocation {
        var (outcome, next) = await ask(revocation)
        // Cut short by a shutdown: not a failure of the provider's. Its claim lapses, and the
        // next instance to take it asks again.
        if Task.isCancelled, outcome == .queued { return outcome }
        metrics.revocationDelivered(provider: revocation.provider, outcome: outcome.rawValue)
        if let retry = next, now() - revocation.queuedAt >= giveUpAfter {
            next = nil
            metrics.revocationAbandoned(provider: revocation.provider)
            audit.record("revocation.abandoned", [
                ("provider", .string(revocation.provider)), ("app", .string(revocation.app)), ("subject", .string(revocation.subject)),
                ("reason", .string(revocation.reason.rawValue)), ("attempts", .int(retry.attempts)),
            ])
        }
        do {
            try await store.settleRevocation(revocation.id, next: next)
        } catch {
            // Still claimed: it comes due again when the claim runs out.
            logger.warning("a revocation's delivery could not be recorded; it is tried again", metadata: ["reason": "\(error.description)"])
        }
        return outcome
    }

    /// Asks the provider to revoke what `revocation` still holds: what it said, and what is left
    /// for a later try (nil when nothing is).
    private func ask(_ revocation: QueuedRevocation) async -> (ProviderRevocation, next: QueuedRevocation?) {
        let outcome: ProviderRevocation
        var next: QueuedRevocation?
        if let provider = try? await providers.resolve(revocation.provider) {
            if provider.revocationEndpoint == nil {
                outcome = .notSupported
            } else {
                var refreshToken = revocation.refreshToken
                var accessToken = revocation.accessToken
                if let token = refreshToken, await calls.revoke(token, hint: "refresh_token", provider: provider, key: revocation.proofKey) != .failed { refreshToken = nil }
                if let token = accessToken, await calls.revoke(token, hint: "access_token", provider: provider, key: revocation.proofKey) != .failed { accessToken = nil }
                outcome = refreshToken == nil && accessToken == nil ? .succeeded : .queued
                if outcome == .queued { next = revocation.retried(refreshToken: refreshToken, accessToken: accessToken, at: now()) }
            }
        } else {
            // The provider's endpoints cannot be learnt now (its discovery document): later.
            outcome = .queued
            next = revocation.retried(refreshToken: revocation.refreshToken, accessToken: revocation.accessToken, at: now())
        }
        return (outcome, next)
    }
}
