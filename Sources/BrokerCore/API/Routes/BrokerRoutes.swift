import APIClient
import HTTPServer

/// The broker's API routes, registered in one place (the shape of Hummingbird's
/// `buildRouter`): `serve` registers them, and the route tests run against this same table, so
/// that a route added to the broker is a route the tests see. Each declares its
/// ``RoutePolicy`` where it is registered (``RouteTable``). The operations routes (`/healthz`,
/// `/readyz`, `/metrics`), the admin API and development mode's provider are the server's own
/// and registered beside them in the same table (``ServedRoutes``).
enum BrokerRoutes {
    /// Registers every API route over `services` in `routes` (a table that applies the
    /// services' per-client limits: ``Admission/routeTable(_:)``), each with its policy and the
    /// few services it uses; `transfers` carries the API proxy's calls.
    static func register(_ services: BrokerServices, transfers: APITransfers, in routes: inout RouteTable) {
        let (config, callers, admission, metrics) = (services.config, services.callers, services.admission, services.metrics)
        let grants = GrantHandlers(services)
        let signIns = SignInStart(config: config, providers: services.providers, login: services.login, ceiling: admission.signInCeiling,
                                  now: services.now)
        let devices = DeviceRoutes(config: config, providers: services.providers, devices: services.devices, admission: admission,
                                   binding: services.binding, metrics: metrics)
        AuthorizeRoutes(signIns: signIns, callers: callers, admission: admission).register(in: &routes)
        CallbackRoute(login: services.login, config: config, deviceLoginCookie: DeviceLoginCookie(config, binding: services.binding),
                      admission: admission, metrics: metrics).register(in: &routes)
        TokenRoutes(grants: grants.brokers, sessions: services.sessions, callers: callers, admission: admission, config: config,
                    metrics: metrics).register(in: &routes)
        SessionRoutes(callers: callers, sessions: services.sessions).register(in: &routes)
        StandardOAuthRoutes(config: config, signIns: signIns, grants: grants.standard, admission: admission).register(in: &routes)
        StandardTokenRoutes(grants: grants.standard, sessions: services.sessions, callers: callers, admission: admission, config: config,
                            devices: devices, rules: grants.code.rules).register(in: &routes)
        IntrospectionRoute(config: config, callers: callers, metrics: metrics, logger: services.logger).register(in: &routes)
        devices.register(in: &routes)
        ProxyRoutes(config: config, proxy: services.proxy, callers: callers, admission: admission, metrics: metrics, logger: services.logger,
                    transfers: transfers).register(in: &routes)
        ClientKeysRoute(providers: config.providers).register(in: &routes)
        LandingPages(providers: config.providers.map { ($0.id, $0.shownName) }, base: config.server.publicPath)
            .register(in: &routes)
        BackChannelLogoutRoute(providers: config.backChannelLogoutURLs.map(\.provider), logout: BackChannelLogout(
            providers: services.providers, verifier: LogoutTokenVerifier(signatures: services.login.idTokens, clock: services.now),
            store: services.store, endings: services.endings, audit: services.endings.audit
        )).register(in: &routes)
    }
}
