import HTTPServer
import Synchronization

/// The bound on sign-ins under way (`server.limits.max_pending_sign_ins`): a login waiting at the
/// provider's page and a device code are state anyone can make without an account, held for their
/// lifetime (an expired device code for the replay memory more), so their total is bounded, every
/// instance's together, as well as their rate per client. The count is the store's
/// (``StateStore/countPendingSignIns()``: on PostgreSQL a `count(*)` of two small tables), taken
/// again at most every ``recountSeconds`` by one caller at a time, and only while sign-ins are
/// being started; between counts this instance adds the sign-ins it started. Other instances'
/// starts since the last count are unseen, so the ceiling can be passed by what they start within
/// one such interval. Past the ceiling a new one is a 503 with `Retry-After` until sign-ins finish
/// or expire. A count the store cannot give keeps the last one: a store out of reach fails the
/// sign-in anyway.
final class SignInCeiling: Sendable {
    private let limit: Int
    private let store: any StateStore
    private let metrics: BrokerMetrics
    private let state = Mutex(Count())

    private struct Count {
        var counted = 0
        var at = -Double.infinity
        /// Sign-ins this instance let through since the count.
        var startedSince = 0
        var counting = false
    }

    static let recountSeconds = 0.25
    /// What a refused client is told to wait: sign-ins end within their lifetime (minutes), many
    /// of them sooner.
    static let retryAfterSeconds = 60

    init(limit: Int, store: any StateStore, metrics: BrokerMetrics) {
        self.limit = limit
        self.store = store
        self.metrics = metrics
    }

    /// Lets one more sign-in start at `now`, or throws 503.
    func admit(now: Double, route: String) async throws(HTTPError) {
        let recount = state.withLock { count in
            guard !count.counting, now - count.at >= Self.recountSeconds else { return false }
            count.counting = true
            return true
        }
        if recount {
            let counted = try? await store.countPendingSignIns()
            state.withLock { count in
                count.counting = false
                count.at = now
                if let counted {
                    count.counted = counted
                    count.startedSince = 0
                }
            }
        }
        let (admitted, estimate) = state.withLock { count in
            guard count.counted + count.startedSince < limit else { return (false, count.counted + count.startedSince) }
            count.startedSince += 1
            return (true, count.counted + count.startedSince)
        }
        metrics.pendingSignIns(estimate)
        guard admitted else {
            metrics.rejected(route: route, reason: "pending_sign_ins")
            throw .serviceUnavailable("temporarily_unavailable", "Too many sign-ins are under way; try again in a minute.",
                                      retryAfterSeconds: Self.retryAfterSeconds)
        }
    }
}
