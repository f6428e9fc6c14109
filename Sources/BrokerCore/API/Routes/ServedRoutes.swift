import APIClient
import HTTPServer

/// Every route `serve` answers, in the tables of its two listeners: development mode's
/// provider, the API (``BrokerRoutes``), the admin API — on its own listener, or on the public
/// one behind its token — and the operations routes, with `/metrics` where `admin.metrics_only`
/// puts it. ``Broker`` serves these tables and the route tests walk them, so that a route
/// `serve` adds is a route whose policy the tests check.
struct ServedRoutes {
    /// The public listener's routes.
    private(set) var api: RouteTable
    /// The admin listener's routes (empty without `admin.listen`).
    private(set) var admin: RouteTable

    /// `development`: development mode's routes (``DevelopmentMode/setUp(_:upstream:now:)``),
    /// none outside it; `admin`: the admin API's routes, when it is configured, on their own
    /// listener with `adminListener`.
    init(_ services: BrokerServices, transfers: APITransfers, development: [@Sendable (inout RouteTable) -> Void],
         admin adminRoutes: AdminRoutes?, adminListener: Bool, operations: OperationsRoutes, metricsOnlyOnAdmin: Bool) {
        api = services.admission.routeTable()
        admin = services.admission.routeTable()
        for register in development { register(&api) }
        BrokerRoutes.register(services, transfers: transfers, in: &api)
        if let adminRoutes {
            if adminListener { adminRoutes.register(in: &admin) } else { adminRoutes.register(in: &api) }
        }
        operations.register(in: &api, metrics: !metricsOnlyOnAdmin)
        if adminListener { operations.registerMetrics(in: &admin) }
    }
}
