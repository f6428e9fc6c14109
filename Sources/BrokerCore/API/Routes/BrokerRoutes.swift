import APIClient
import HTTPServer

/// The broker's API routes, registered in one place (the shape of Hummingbird's
/// `buildRouter`): `serve` registers them, and the route tests run against this same table, so
/// that a route added to the broker is a route the tests see. Each declares its
/// ``RoutePolicy`` where it is registered (``RouteTable``). The operations routes (`/healthz`,
/// `/readyz`, `/metrics`) and the admin API are the server's own and registered beside it
/// (``Broker``), as development mode's provider pages are.
enum BrokerRoutes {
    /// Registers every API route over `services` in `router`, each with its policy and the few
    /// services it uses, and returns them; `transfers` carries the API proxy's calls.
    @discardableResult
    static func register(_ services: BrokerServices, transfers: APITransfers, in router: inout Router) -> [RouteTable.Entry] {
        let (config, callers, admission) = (services.config, services.callers, services.admission)
        var routes = RouteTable(router: router) { request, limiter throws(HTTPError) in try admission.admit(request, to: limiter) }
        let keys = GrantKeys(callers: callers)
        let codes = AuthorizationCodeGrant(login: services.login, keys: keys)
        let devicePolls = DeviceCodeGrant(devices: services.devices, keys: keys)
        let signIns = SignInStart(config: config, providers: services.providers, login: services.login, ceiling: admission.signInCeiling,
                                  now: services.now)
        let devices = DeviceRoutes(config: config, providers: services.providers, devices: services.devices, admission: admission,
                                   binding: services.binding, metrics: services.metrics)
        let standardGrants = GrantTypes(offered: [codes, RefreshTokenGrant(sessions: services.sessions, keys: keys), devicePolls])
        AuthorizeRoutes(signIns: signIns, callers: callers, admission: admission).register(in: &routes)
        CallbackRoute(login: services.login, config: config, deviceLoginCookie: DeviceLoginCookie(config, binding: services.binding),
                      admission: admission, metrics: services.metrics).register(in: &routes)
        TokenRoutes(grants: GrantTypes(offered: [codes, devicePolls]), sessions: services.sessions, callers: callers, admission: admission,
                    config: config).register(in: &routes)
        SessionRoutes(callers: callers, sessions: services.sessions).register(in: &routes)
        StandardOAuthRoutes(config: config, signIns: signIns, grants: standardGrants, admission: admission).register(in: &routes)
        StandardTokenRoutes(grants: standardGrants, sessions: services.sessions, callers: callers, admission: admission, config: config,
                            devices: devices).register(in: &routes)
        IntrospectionRoute(config: config, callers: callers, logger: services.logger).register(in: &routes)
        devices.register(in: &routes)
        ProxyRoutes(config: config, proxy: services.proxy, callers: callers, admission: admission, logger: services.logger,
                    transfers: transfers).register(in: &routes)
        ClientKeysRoute(providers: config.providers).register(in: &routes)
        LandingPages(providers: config.providers.map { ($0.id, $0.shownName) }).register(in: &routes)
        BackChannelLogoutRoute(providers: config.backChannelLogoutURLs.map(\.provider), logout: BackChannelLogout(
            providers: services.providers, verifier: LogoutTokenVerifier(signatures: services.login.idTokens, clock: services.now),
            store: services.store, endings: services.endings, audit: services.endings.audit
        )).register(in: &routes)
        router = routes.router
        return routes.entries
    }
}
