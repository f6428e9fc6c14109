import APIClient
import HTTPServer

/// The broker's API routes, registered in one place (the shape of Hummingbird's
/// `buildRouter`): `serve` registers them, and the route tests run against this same table, so
/// that a route added to the broker is a route the tests see. Each declares its
/// ``RoutePolicy`` where it is registered (``RouteTable``). The operations routes (`/healthz`,
/// `/readyz`, `/metrics`) and the admin API are the server's own and registered beside it
/// (``Broker``), as development mode's provider pages are.
enum BrokerRoutes {
    /// Registers every API route over `services` in `router`, each with its policy, and returns
    /// them; `transfers` carries the API proxy's calls.
    @discardableResult
    static func register(_ services: BrokerServices, transfers: APITransfers, in router: inout Router) -> [RouteTable.Entry] {
        var routes = RouteTable(router: router) { request, limiter throws(HTTPError) in try services.admit(request, to: limiter) }
        AuthorizeRoutes(services: services).register(in: &routes)
        CallbackRoute(services: services).register(in: &routes)
        TokenRoutes(services: services).register(in: &routes)
        SessionRoutes(services: services).register(in: &routes)
        StandardOAuthRoutes(services: services).register(in: &routes)
        StandardTokenRoutes(services: services).register(in: &routes)
        IntrospectionRoute(services: services).register(in: &routes)
        DeviceRoutes(services: services).register(in: &routes)
        ProxyRoutes(services: services, transfers: transfers).register(in: &routes)
        ClientKeysRoute(providers: services.config.providers).register(in: &routes)
        LandingPages(providers: services.config.providers.map { ($0.id, $0.shownName) }).register(in: &routes)
        BackChannelLogoutRoute(services: services, logout: BackChannelLogout(
            providers: services.providers, verifier: LogoutTokenVerifier(signatures: services.login.idTokens, clock: services.now),
            store: services.store, endings: services.endings, audit: services.endings.audit
        )).register(in: &routes)
        router = routes.router
        return routes.entries
    }
}
