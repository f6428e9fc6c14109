import APIClient
import HTTPServer
import Synchronization
import Testing
import WireValues

@testable import BrokerCore

/// What each route declares where it is registered (``RoutePolicy``), walked over the broker's
/// own table, and the table applying the per-client limits routes declare.
struct RoutePolicyTests {
    @Test func everyRouteOfTheBrokersTableDeclaresAPolicyThatHoldsTogether() async throws {
        let bed = try await FlowTestBed(.embedded)
        try await bed.closing {
            var router = Router()
            let entries = BrokerRoutes.register(bed.services, transfers: try #require(APITransfers(maxInFlight: 8)), in: &router)
            // (A route cannot be registered without a policy: RouteTable.add takes one.)
            #expect(entries.count > 30, "the whole API, per provider routes included")
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
                // Starting a sign-in is limited per client before anything is read.
                if entry.path.hasSuffix("/authorize") || entry.path.hasSuffix("/device_authorization") || entry.path == "/callback" {
                    guard case .perClient(let limiter, _) = policy.limit else {
                        Issue.record("\(route): a sign-in start without its per-client limit")
                        continue
                    }
                    #expect(limiter === bed.services.admission.loginLimiter, "\(route)")
                }
            }
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
