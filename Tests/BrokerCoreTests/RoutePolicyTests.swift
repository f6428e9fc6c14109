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

    @Test func everyRouteOfTheBrokersTableDeclaresAPolicyThatHoldsTogether() async throws {
        let bed = try await FlowTestBed(.embedded)
        try await bed.closing {
            var routes = bed.services.admission.routeTable()
            BrokerRoutes.register(bed.services, transfers: try #require(APITransfers(maxInFlight: 8)), in: &routes)
            let entries = routes.entries
            #expect(entries.count > 30, "the whole API, per provider routes included")
            Self.check(entries, login: bed.services.admission.loginLimiter)
        }
    }

    /// The routes `serve` registers beside the API's, as it registers them: the operations
    /// routes, the admin API, development mode's provider and its logout page.
    @Test func theOperationsAdminAndDevelopmentRoutesDeclareTheirsToo() async throws {
        let bed = try await FlowTestBed(.embedded)
        try await bed.closing {
            let services = bed.services
            var routes = RouteTable(router: Router())
            OperationsRoutes(
                readiness: Readiness(providers: [], discovery: DiscoveryCache(client: bed.provider), stateFailure: { nil }, stateShared: false,
                                     shuttingDown: ShutdownFlag()),
                metrics: services.metrics, liveSessions: { 0 }, requestsInFlight: { 0 }, connections: { [] }
            ).register(in: &routes, metrics: true)
            AdminRoutes(config: services.config, metrics: services.metrics,
                        administration: SessionAdministration(store: bed.store, sessions: bed.sessions), audit: bed.endings.audit,
                        token: Secret("admin-token", source: "test")).register(in: &routes)
            let signer = try DevelopmentSigner.make()
            DevelopmentProvider(issuer: "http://127.0.0.1:8080/dev", callbackURL: FlowTestBed.callbackURL, clientSecret: "secret",
                                signer: signer, now: bed.clock.closure).register(in: &routes)
            DevelopmentLogout(issuer: "http://127.0.0.1:8080/dev", backChannelLogoutURL: try #require(URL(string: "http://127.0.0.1:8080/x")),
                              signer: signer, client: try #require(UpstreamClient(limits: Limits().upstream)), now: bed.clock.closure)
                .register(in: &routes)
            let paths = Set(routes.entries.map(\.path))
            #expect(paths.isSuperset(of: ["/healthz", "/readyz", "/metrics", "/admin/sessions", "/admin/subjects/end", "/dev/token", "/dev/logout"]))
            Self.check(routes.entries, login: services.admission.loginLimiter)
            #expect(routes.entries.allSatisfy { [.monitor, .operator, .developer].contains($0.policy.caller) })
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
