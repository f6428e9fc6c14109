import Foundation
import APIClient
import HTTPServer
import Synchronization
import Testing
import WireValues

@testable import BrokerCore

/// What each route declares where it is registered (``RoutePolicy``), walked over the broker's
/// own table, and the table applying the per-client limits routes declare.
struct RoutePolicyTests {
    /// The declarations of `entries` hold together; a sign-in start's limit is `login`.
    private static func check(_ entries: [RouteTable.Entry], login: RateLimiter) {
        // (A route cannot be registered without a policy: RouteTable.add takes one.)
        for entry in entries {
            let route = "\(entry.method) \(entry.path)"
            let policy = entry.policy
            // A GET reads no form (the proxy passes on whatever a request carries).
            if entry.method == "GET" { #expect(policy.body != .form, "\(route)") }
            if entry.method == "POST", policy.body == .none { #expect(policy.caller == .session, "\(route): only a session's POST reads nothing") }
            switch policy.limit {
            case .none(let because):
                #expect(because.count > 20, "\(route): why no limit")
                // Who starts sign-ins or proves a code is limited: they make state or cost the provider a call.
                #expect(policy.caller != .app || entry.path.hasSuffix("/revoke"), "\(route): an app's sign-in or code goes unlimited")
            case .inHandler(let name), .perClient(_, let name):
                #expect(!name.isEmpty, "\(route)")
            }
            // Starting a sign-in at the broker is limited per client before anything is read.
            let signIn = entry.path.hasSuffix("/authorize") || entry.path.hasSuffix("/device_authorization") || entry.path == "/callback"
            if signIn, policy.caller != .developer {
                guard case .perClient(let limiter, _) = policy.limit else {
                    Issue.record("\(route): a sign-in start without its per-client limit")
                    continue
                }
                #expect(limiter === login, "\(route)")
            }
        }
    }

    /// The tables `serve` builds (``ServedRoutes``), development mode and the admin API
    /// included, with the admin API on the public listener (behind its token) or on its own.
    private static func served(_ bed: FlowTestBed, adminListener: Bool, metricsOnlyOnAdmin: Bool) throws -> ServedRoutes {
        let services = bed.services
        let upstream = try #require(UpstreamClient(limits: Limits().upstream))
        let development = try DevelopmentMode.setUp(services.config, upstream: upstream, now: bed.clock.closure)
        let operations = OperationsRoutes(
            readiness: Readiness(providers: [], discovery: DiscoveryCache(client: bed.provider), stateFailure: { nil }, stateShared: false,
                                 shuttingDown: ShutdownFlag()),
            metrics: services.metrics, liveSessions: { 0 }, requestsInFlight: { 0 }, connections: { [] },
            droppedLogLines: { _ in 0 }
        )
        let admin = AdminRoutes(config: services.config, metrics: services.metrics,
                                administration: SessionAdministration(store: bed.store, sessions: bed.sessions), audit: bed.endings.audit,
                                token: Secret("admin-token", source: "test"))
        return ServedRoutes(services, transfers: try #require(APITransfers(maxInFlight: 8)), development: development.routes,
                            admin: admin, adminListener: adminListener, operations: operations, metricsOnlyOnAdmin: metricsOnlyOnAdmin)
    }

    @Test func everyRouteServeServesDeclaresAPolicyThatHoldsTogether() async throws {
        let bed = try await FlowTestBed(.embedded)
        try await bed.closing {
            let routes = try Self.served(bed, adminListener: false, metricsOnlyOnAdmin: false)
            let entries = routes.api.entries
            #expect(entries.count > 30, "the whole API, per provider routes included")
            #expect(Set(entries.map(\.path)).isSuperset(of: ["/authorize", "/token", "/healthz", "/readyz", "/metrics", "/admin/sessions",
                                                             "/admin/subjects/end", "/dev/token", "/dev/logout"]))
            #expect(routes.admin.entries.isEmpty)
            Self.check(entries, login: bed.services.admission.loginLimiter)
            // Probes, operators and the development provider: nothing an app or a session calls.
            let own = entries.filter { $0.path.hasPrefix("/admin/") || $0.path.hasPrefix("/dev/") || ["/healthz", "/readyz", "/metrics"].contains($0.path) }
            #expect(own.allSatisfy { [.monitor, .operator, .developer].contains($0.policy.caller) })
        }
    }

    /// With `admin.listen`, the admin API and `/metrics` are the admin listener's; with
    /// `admin.metrics_only`, `/metrics` is not on the public one.
    @Test(arguments: [false, true]) func theAdminListenerHasTheAdminAPIAndTheMetrics(metricsOnly: Bool) async throws {
        let bed = try await FlowTestBed(.embedded)
        try await bed.closing {
            let routes = try Self.served(bed, adminListener: true, metricsOnlyOnAdmin: metricsOnly)
            let api = Set(routes.api.entries.map(\.path)), admin = Set(routes.admin.entries.map(\.path))
            #expect(admin.isSuperset(of: ["/admin/sessions", "/admin/subjects/end", "/metrics"]))
            #expect(admin.allSatisfy { $0.hasPrefix("/admin/") || $0 == "/metrics" })
            #expect(!api.contains { $0.hasPrefix("/admin/") })
            #expect(api.contains("/metrics") == !metricsOnly)
            Self.check(routes.admin.entries, login: bed.services.admission.loginLimiter)
            #expect(routes.admin.entries.allSatisfy { [.monitor, .operator].contains($0.policy.caller) })
        }
    }

    @Test func aDeclaredPerClientLimitIsAppliedBeforeTheHandler() async throws {
        let limiter = RateLimiter(perMinute: 2)
        let handled = Atomic<Int>(0)
        var routes = RouteTable(router: Router()) { request, limiter throws(HTTPError) in
            try limiter.admit(request.clientIP, now: 1_800_000_000)
        }
        routes.add("GET", "/limited", RoutePolicy(caller: .anyone, limit: .perClient(limiter, name: "test"), body: .none)) { _ in
            handled.wrappingAdd(1, ordering: .relaxed)
            return .now(.json(.object([])))
        }
        routes.add("GET", "/declared", RoutePolicy(caller: .anyone, limit: .inHandler("the handler's own"), body: .none)) { _ in
            .now(.json(.object([])))
        }
        var statuses: [Int] = []
        for _ in 0..<3 { statuses.append(await routes.router.answer("GET", "/limited").status) }
        #expect(statuses == [200, 200, 429])
        #expect(handled.load(ordering: .relaxed) == 2, "the refused request never reached the handler")
        for _ in 0..<3 { #expect(await routes.router.answer("GET", "/declared").status == 200, "a limit the handler applies is its own") }
    }
}
