import HTTPServer
import WireValues

/// The limits at the door: how often each client may start sign-ins, redeem codes, refresh early,
/// enter user codes and call the API proxy, how many sign-ins may be under way, and how wrong
/// user codes are slowed. A refusal is a 429 counted under the route it refused. A class: the
/// handlers' closures capture it, one reference rather than a retain per field.
final class Admission: Sendable {
    /// What starts a sign-in or takes one back (`login_requests_per_minute`).
    let loginLimiter: RateLimiter
    /// Codes redeemed and devices polling, charged per refusal (``GrantLimit``).
    let tokenLimiter: RateLimiter
    /// `POST /refresh`, and `GET /token` when it would refresh before the token is due.
    let refreshLimiter: RateLimiter
    /// User codes entered at `/device`, per client.
    let deviceEntryLimiter: RateLimiter
    /// Wrong user codes entered at `/device`: per client, per network and for all clients.
    let userCodeGuard: UserCodeGuard
    /// Proxied API requests, per session.
    let proxyLimiter: RateLimiter
    /// Sign-ins under way, every client's together.
    let signInCeiling: SignInCeiling
    let metrics: BrokerMetrics
    /// Unix seconds now; replaceable in tests.
    let now: BrokerClock

    init(_ limits: Limits, store: any StateStore, metrics: BrokerMetrics, now: @escaping BrokerClock) {
        // What starts a sign-in creates state: an IPv6 client counts by its site's /56.
        loginLimiter = RateLimiter(perMinute: limits.loginRequestsPerMinute, key: ClientKey.site)
        tokenLimiter = RateLimiter(perMinute: limits.tokenRequestsPerMinute)
        refreshLimiter = RateLimiter(perMinute: limits.refreshRequestsPerMinute)
        deviceEntryLimiter = RateLimiter(perMinute: limits.deviceCodeEntriesPerMinute)
        userCodeGuard = UserCodeGuard(missesPerMinute: limits.deviceCodeMissesPerMinute)
        proxyLimiter = RateLimiter(perMinute: limits.proxyRequestsPerMinute, key: { $0 }, counted: "of this session")
        signInCeiling = SignInCeiling(limit: limits.maxPendingSignIns, store: store, metrics: metrics)
        self.metrics = metrics
        self.now = now
    }

    /// The policy of a route that starts a sign-in or takes one back: the login limit per client,
    /// applied before the request is read (a sign-in stores state and may cost a provider call).
    func signInPolicy(_ caller: RoutePolicy.Caller, body: RoutePolicy.Body, page: (@Sendable (HTTPError) -> Response)? = nil) -> RoutePolicy {
        RoutePolicy(caller: caller, limit: .perClient(loginLimiter, name: "login_requests_per_minute"), body: body, refusalPage: page)
    }

    /// A table of routes over `router` that applies the per-client limits its routes declare.
    func routeTable(_ router: Router = Router()) -> RouteTable {
        RouteTable(router: router) { [self] request, limiter throws(HTTPError) in try admit(request, to: limiter) }
    }

    /// Applies a per-client rate limit, counting refusals under the request's route.
    func admit(_ request: Request, to limiter: RateLimiter) throws(HTTPError) {
        try admit(client: request.clientIP, to: limiter, route: request.route)
    }

    /// Applies a per-client rate limit to the client at address `client`, counting refusals
    /// under `route`, a route label (never text from the request).
    func admit(client: String, to limiter: RateLimiter, route: String) throws(HTTPError) {
        try counting(route) { () throws(HTTPError) in try limiter.admit(client, now: now()) }
    }

    /// Refuses (429, counted under the request's route) while the request's client has spent its
    /// budget in `limiter`, taking nothing: for a limit charged afterwards, by outcome.
    func refuseWhileSpent(_ request: Request, in limiter: RateLimiter) throws(HTTPError) {
        try counting(request.route) { () throws(HTTPError) in try limiter.refuseWhileSpent(request.clientIP, now: now()) }
    }

    private func counting(_ route: String, _ check: () throws(HTTPError) -> Void) throws(HTTPError) {
        do {
            try check()
        } catch {
            metrics.rejected(route: route, reason: "rate_limited")
            throw error
        }
    }

    /// Applies the per-address refresh limit to a refresh asked for before it is due (`early`:
    /// a `min_ttl` beyond the refresh skew while the token is still valid for the skew). A
    /// refresh that is due is never refused here: a backend reading tokens for many users from
    /// one address makes them all day, each session's are already bounded by the provider's
    /// token lifetime (and joined, one at a time, by the refresher), and refusing them would
    /// fail ordinary reads. `POST /refresh` is always early and counted (`admit`).
    func admitRefresh(early: Bool, client: String, route: String) throws(HTTPError) {
        guard early else { return }
        try admit(client: client, to: refreshLimiter, route: route)
    }
}
