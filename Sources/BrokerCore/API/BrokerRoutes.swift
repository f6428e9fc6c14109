import APIClient
import HTTPServer

/// The broker's API routes, registered in one place (the shape of Hummingbird's
/// `buildRouter`): `serve` registers them, and the route tests run against this same table, so
/// that a route added to the broker is a route the tests see. The operations routes (`/healthz`,
/// `/readyz`, `/metrics`) and the admin API are the server's own and registered beside it
/// (``Broker``), as development mode's provider pages are.
enum BrokerRoutes {
    /// Registers every API route over `services` in `router`; `transfers` carries the API
    /// proxy's calls.
    static func register(_ services: BrokerServices, transfers: APITransfers, in router: inout Router) {
        AuthorizeRoutes(services: services).register(in: &router)
        CallbackRoute(services: services).register(in: &router)
        TokenRoutes(services: services).register(in: &router)
        SessionRoutes(services: services).register(in: &router)
        StandardOAuthRoutes(services: services).register(in: &router)
        StandardTokenRoutes(services: services).register(in: &router)
        IntrospectionRoute(services: services).register(in: &router)
        DeviceRoutes(services: services).register(in: &router)
        ProxyRoutes(services: services, transfers: transfers).register(in: &router)
        ClientKeysRoute(providers: services.config.providers).register(in: &router)
        LandingPages(providers: services.config.providers.map { ($0.id, $0.shownName) }).register(in: &router)
        BackChannelLogoutRoute(services: services, logout: BackChannelLogout(
            providers: services.providers, verifier: LogoutTokenVerifier(signatures: services.login.idTokens, clock: services.now),
            store: services.store, endings: services.endings, audit: services.endings.audit
        )).register(in: &router)
    }
}
