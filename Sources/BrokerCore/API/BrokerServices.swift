import Foundation
import Logging

/// What the API handlers share: the configuration, the flow services they call, the rate limits
/// at the door, and the store, read to authenticate a bearer session token. A class: every
/// handler's closures capture it, and copying a struct of this size costs a retain per field on
/// every request (a quarter of a proxied request's time on its server thread, measured).
final class BrokerServices: Sendable {
    let config: BrokerConfig
    let providers: ProviderDirectory
    let login: LoginFlow
    let sessions: SessionOperations
    let devices: DeviceFlow
    let proxy: APIProxy
    let store: any StateStore
    let loginLimiter: RateLimiter
    let tokenLimiter: RateLimiter
    /// `POST /refresh`, and `GET /token` when it would refresh.
    let refreshLimiter: RateLimiter
    /// User codes entered at `/device`, per client.
    let deviceEntryLimiter: RateLimiter
    /// Wrong user codes entered at `/device`: per client, per network and for all clients.
    let userCodeGuard: UserCodeGuard
    /// Proxied API requests, per session.
    let proxyLimiter: RateLimiter
    /// Sign-ins under way, every client's together.
    let signInCeiling: SignInCeiling
    /// Tags that bind a browser to the device pages and to a device login.
    let binding: BrowserBinding
    /// Checks DPoP proofs, and remembers those accepted lately.
    let proofs: ProofChecker
    /// Where events go, when a webhook is configured.
    let webhooks: WebhookSender?
    let metrics: BrokerMetrics
    let logger: Logger
    /// Unix seconds now; replaceable in tests.
    let now: BrokerClock

    init(config: BrokerConfig, providers: ProviderDirectory, login: LoginFlow, sessions: SessionOperations, devices: DeviceFlow,
         proxy: APIProxy, store: any StateStore, loginLimiter: RateLimiter, tokenLimiter: RateLimiter, refreshLimiter: RateLimiter,
         deviceEntryLimiter: RateLimiter, userCodeGuard: UserCodeGuard, proxyLimiter: RateLimiter, signInCeiling: SignInCeiling,
         binding: BrowserBinding, proofs: ProofChecker,
         webhooks: WebhookSender?, metrics: BrokerMetrics, logger: Logger, now: @escaping BrokerClock) {
        self.config = config
        self.providers = providers
        self.login = login
        self.sessions = sessions
        self.devices = devices
        self.proxy = proxy
        self.store = store
        self.loginLimiter = loginLimiter
        self.tokenLimiter = tokenLimiter
        self.refreshLimiter = refreshLimiter
        self.deviceEntryLimiter = deviceEntryLimiter
        self.userCodeGuard = userCodeGuard
        self.proxyLimiter = proxyLimiter
        self.signInCeiling = signInCeiling
        self.binding = binding
        self.proofs = proofs
        self.webhooks = webhooks
        self.metrics = metrics
        self.logger = logger
        self.now = now
    }

    /// Refresh access tokens that expire within this many seconds (AppAuth's 60 s by default).
    var refreshSkew: Double { sessions.refreshSkew }

    /// The cookie that binds a device login to the browser that began it.
    var deviceLoginCookie: DeviceLoginCookie {
        DeviceLoginCookie(secure: config.server.publicURL.scheme == "https", binding: binding,
                          lifetimeSeconds: config.sessions.loginLifetimeSeconds)
    }
}
