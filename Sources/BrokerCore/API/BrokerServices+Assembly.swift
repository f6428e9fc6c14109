import Foundation
import Logging
import WireValues

extension BrokerServices {
    /// The broker's services over `store`, assembled from `config` in one place: for `serve`
    /// (``Broker``) and for the tests, which pass their own transport (`upstream`: a scripted
    /// provider) and clock, so that what they test is what the broker runs.
    static func assemble(
        _ config: BrokerConfig, store: any StateStore, providers: ProviderDirectory, upstream: any UpstreamTransport, trust: ProviderTrust,
        logger: Logger, metrics: BrokerMetrics, now: @escaping BrokerClock
    ) throws(BrokerStartError) -> BrokerServices {
        let calls = ProviderCalls(client: upstream, metrics: metrics, now: now)
        let profiles = ProfileCache(lifetime: config.sessions.profileCacheSeconds)
        let webhooks = try config.webhooks.map { settings throws(BrokerStartError) in
            guard let sender = WebhookSender(settings: settings, logger: logger, metrics: metrics) else {
                throw BrokerStartError("libcurl could not set up the webhook's HTTP client")
            }
            return sender
        }
        let audit = AuditTrail(logger: logger, webhooks: webhooks, metrics: metrics)
        let revocations = RevocationQueue(store: store, providers: providers, calls: calls, audit: audit, metrics: metrics, logger: logger,
                                          giveUpAfter: config.sessions.revocationRetrySeconds, now: now)
        let endings = GrantEndings(store: store, profiles: profiles, audit: audit, revocations: revocations, metrics: metrics, logger: logger,
                                   loginLifetime: config.sessions.loginLifetimeSeconds, now: now)
        let refresher = Refresher(
            store: store, providers: providers, calls: calls, endings: endings, logger: logger, metrics: metrics, webhooks: webhooks,
            minInterval: config.sessions.minRefreshIntervalSeconds, now: now
        )
        let limits = config.server.limits
        let binding = BrowserBinding(stateKeys: config.state.keys)
        let sessions = SessionOperations(
            store: store, refresher: refresher, providers: providers, calls: calls, profiles: profiles, endings: endings,
            refreshSkew: config.sessions.refreshSkewSeconds, now: now
        )
        let login = LoginFlow(
            settings: config.sessions, callbackURL: config.server.callbackURL.absoluteString, providers: providers, calls: calls,
            store: store, idTokens: IDTokenVerifier(jwks: JWKSCache(client: upstream, clock: now, logger: logger), clock: now),
            profiles: profiles, endings: endings, metrics: metrics, logger: logger, now: now
        )
        return BrokerServices(
            config: config,
            providers: providers,
            login: login,
            sessions: sessions,
            devices: DeviceFlow(settings: config.sessions, login: login, store: store, metrics: metrics, now: now),
            proxy: APIProxy(sessions: sessions, settings: ProxySettings(
                timeoutSeconds: Double(limits.upstreamTimeoutSeconds), maxResponseBytes: limits.proxyMaxResponseBytes,
                retryMaxBodyBytes: limits.proxyRetryMaxBodyBytes, trust: trust
            ), proofs: calls.proofs),
            store: store,
            callers: Callers(store: store, proofs: ProofChecker(publicURL: config.server.publicURL, binding: binding, now: now()),
                             apps: config.apps, metrics: metrics, now: now),
            admission: Admission(limits, store: store, metrics: metrics, now: now),
            binding: binding,
            metrics: metrics,
            logger: logger,
            now: now
        )
    }
}
