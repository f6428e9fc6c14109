import HTTPServer

/// The broker's API routes with what each declares (``RoutePolicy``), registered into a
/// ``Router``: a per-client limit declared here is applied here, before the handler, so that a
/// route cannot declare one and forget to apply it.
struct RouteTable {
    /// One registered route, as the route tests walk them.
    struct Entry: Sendable {
        let method: String
        let path: String
        /// The label it is counted and logged under.
        let label: String
        let policy: RoutePolicy
    }

    private(set) var router: Router
    private(set) var entries: [Entry] = []
    /// Applies a per-client limit (``Admission/admit(_:to:)``); nil in a table of routes that
    /// declare none (the operations routes, the admin API, development mode's provider).
    private let admit: (@Sendable (Request, RateLimiter) throws(HTTPError) -> Void)?

    init(router: Router, admit: (@Sendable (Request, RateLimiter) throws(HTTPError) -> Void)? = nil) {
        self.router = router
        self.admit = admit
    }

    mutating func add(_ method: String, _ path: String, _ policy: RoutePolicy, _ handler: @escaping Handler) {
        router.add(method, path, limited(policy, handler))
        entries.append(Entry(method: method, path: path, label: path, policy: policy))
    }

    /// A route for every path under `prefix`, counted under `label`.
    mutating func addPrefix(_ method: String, _ prefix: String, label: String, _ policy: RoutePolicy, _ handler: @escaping Handler) {
        router.addPrefix(method, prefix, label: label, limited(policy, handler))
        entries.append(Entry(method: method, path: prefix + "…", label: label, policy: policy))
    }

    /// What answers the paths no route takes.
    mutating func setUnmatched(_ handler: @escaping Handler) {
        router.unmatched = handler
    }

    private func limited(_ policy: RoutePolicy, _ handler: @escaping Handler) -> Handler {
        guard case .perClient(let limiter, _) = policy.limit else { return handler }
        guard let admit else { preconditionFailure("a route declares a per-client limit in a table that cannot apply it") }
        return { request throws(HTTPError) in
            do throws(HTTPError) {
                try admit(request, limiter)
            } catch {
                guard let page = policy.refusalPage, request.wantsHTML else { throw error }
                return .now(page(error))
            }
            return try handler(request)
        }
    }
}
