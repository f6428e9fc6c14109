import HTTPServer

/// What a route declares where it is registered (``RouteTable``): who calls it and how they
/// prove it, how often a client may, and what body it reads. Every route the broker serves
/// declares one: the API's (``BrokerRoutes``), the admin API's, the operations routes and
/// development mode's provider. The route's metrics label is its path (or its prefix's label).
/// A route cannot be registered without one; `RoutePolicyTests` walks the tables for routes
/// whose declarations do not hold together, and `LayeringTests` fails on a route added to a
/// router around a table.
struct RoutePolicy: Sendable {
    /// Who calls the route, and how the route knows them.
    enum Caller: String, Sendable {
        /// Anyone: public metadata, key sets, the sign-in start; nothing it answers is a secret.
        case anyone
        /// An app, by its id, its registered redirect URI and its PKCE verifier or device code.
        case app
        /// An app holding a session token (and, for a bound one, a proof of its key).
        case session
        /// A person at a browser, by the cookies and forms of the broker's own pages.
        case person
        /// A provider, by a logout token signed with one of its keys.
        case provider
        /// A resource server, by its credentials (`resource_servers`).
        case resourceServer
        /// An operator's tool, by the admin token, or without one from this machine and not from a
        /// web page (``AdminRoutes``).
        case `operator`
        /// An orchestrator's probe or a metrics scraper: nothing it answers is a secret.
        case monitor
        /// Development mode's built-in provider (`serve --dev` only): the broker itself, and the
        /// developer signing in at its page.
        case developer
    }

    /// How often a client may call the route.
    enum Limit: Sendable {
        /// Per client address, applied by the table before the handler runs: a 429 counted under
        /// the route (`name` is the limit's setting).
        case perClient(RateLimiter, name: String)
        /// Applied by the handler, which has what the limit is keyed by or charged for once it
        /// has read the request (a session, an outcome); `name` says which.
        case inHandler(String)
        /// None, and why none is needed.
        case none(because: String)
    }

    /// What body the route reads.
    enum Body: String, Sendable {
        /// None (a `GET`).
        case none
        /// A form, read whole within `server.limits.max_body_bytes`.
        case form
        /// Anything, passed on to an API within `server.limits.max_body_bytes`.
        case forwarded
    }

    let caller: Caller
    let limit: Limit
    let body: Body
    /// The page a browser (it asks for HTML) gets when the per-client limit refuses it, on a
    /// route people reach by following a link; nil: the API's JSON error.
    var refusalPage: (@Sendable (HTTPError) -> Response)? = nil
}
