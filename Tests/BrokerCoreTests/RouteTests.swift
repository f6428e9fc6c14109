import BrokerCrypto
import Foundation
import HTTPServer
import Testing
import WireValues

@testable import BrokerCore

/// The routes' mapping from requests to the flow services and back, in process: requests made
/// with `Request(method:target:)` go through the router as the server would route them, over
/// the flow test bed (both stores, the scripted provider): no socket, no real authorization
/// server. The end-to-end tests (Tests/oauth) run the same against a real one.
struct RouteTests {
    private struct Routes {
        let bed: FlowTestBed
        let router: Router

        init(_ kind: StoreKind) async throws {
            bed = try await FlowTestBed(kind)
            let app = AppConfig(id: FlowTestBed.app, redirectURIs: [try RedirectURI(parsing: FlowTestBed.redirectURI)], deviceFlow: true)
            let config = BrokerConfig(
                server: ServerConfig(publicURL: URL(string: "https://broker.test")), providers: [ScriptedProvider.config()], apps: [app]
            )
            let services = bed.services(config)
            var router = Router()
            CallbackRoute(services: services).register(in: &router)
            TokenRoutes(services: services).register(in: &router)
            StandardOAuthRoutes(services: services).register(in: &router)
            StandardTokenRoutes(services: services).register(in: &router)
            DeviceRoutes(services: services).register(in: &router)
            self.router = router
        }

        /// The answer to `method target` with a form `body`, as the server would send it.
        func send(_ method: String, _ target: String, form: [(String, String)]? = nil) async -> Response {
            let body = form.map { Array(FormFields.encode($0).utf8) } ?? []
            let headers = form == nil ? [:] : ["Content-Type": "application/x-www-form-urlencoded"]
            switch router.route(Request(method: method, target: target, headers: headers, body: body)).reply {
            case .now(let response): return response
            case .deferred(let work): return await work()
            }
        }
    }

    private func json(_ response: Response) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
    }

    @Test(arguments: StoreKind.allCases)
    func aStandardClientSignsInAndRefreshesWithoutClientID(_ kind: StoreKind) async throws {
        let routes = try await Routes(kind)
        defer { Task { await routes.bed.close() } }
        let verifier = PKCE.makeVerifier()
        let query = FormFields.encode([
            ("client_id", FlowTestBed.app), ("redirect_uri", FlowTestBed.redirectURI), ("response_type", "code"), ("state", "s1"),
            ("code_challenge", PKCE.challenge(for: verifier)), ("code_challenge_method", "S256"),
        ])
        let started = await routes.send("GET", "/providers/idp/authorize?" + query)
        #expect(started.status == 302)
        let (code, state) = try routes.bed.provider.signIn(try #require(started.header("Location")), subject: "alice")
        let callback = await routes.send("GET", "/callback?" + FormFields.encode([("code", code), ("state", state)]))
        let back = try FormFields(parsing: try #require(callback.header("Location")?.split(separator: "?", maxSplits: 1).last))
        #expect(back["state"] == "s1" && back["iss"] == "https://broker.test/providers/idp")
        let token = await routes.send("POST", "/providers/idp/token", form: [
            ("grant_type", "authorization_code"), ("code", try #require(back["code"])), ("code_verifier", verifier),
            ("redirect_uri", FlowTestBed.redirectURI), ("client_id", FlowTestBed.app),
        ])
        #expect(token.status == 200)
        let refreshToken = try #require(try json(token)["refresh_token"] as? String)
        let refreshed = await routes.send("POST", "/providers/idp/token", form: [("grant_type", "refresh_token"), ("refresh_token", refreshToken)])
        #expect(refreshed.status == 200)
        #expect(try json(refreshed)["refresh_token"] as? String == refreshToken)
        let other = await routes.send("POST", "/providers/idp/token", form: [
            ("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", "another-app"),
        ])
        #expect(other.status == 401, "an unknown client is invalid_client")
    }

    @Test(arguments: StoreKind.allCases)
    func theStandardTokenEndpointsErrorsAreRFC6749s(_ kind: StoreKind) async throws {
        let routes = try await Routes(kind)
        defer { Task { await routes.bed.close() } }
        let cases: [([(String, String)], Int, String)] = [
            ([("grant_type", "password"), ("client_id", FlowTestBed.app)], 400, "unsupported_grant_type"),
            ([("grant_type", DeviceRoutes.grantType), ("device_code", "tbd_unknown"), ("client_id", FlowTestBed.app)], 400, "invalid_grant"),
            ([("grant_type", DeviceRoutes.grantType), ("device_code", "tbd_unknown")], 400, "invalid_request"),
            ([("grant_type", "refresh_token"), ("refresh_token", "tbs_unknown")], 400, "invalid_grant"),
            ([("grant_type", "authorization_code"), ("code", "tbh_x"), ("code_verifier", "short"), ("redirect_uri", FlowTestBed.redirectURI),
              ("client_id", FlowTestBed.app)], 400, "invalid_request"),
        ]
        for (form, status, error) in cases {
            let answer = await routes.send("POST", "/providers/idp/token", form: form)
            #expect(answer.status == status, "\(form)")
            #expect(try json(answer)["error"] as? String == error, "\(form)")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aDeviceGetsCodesAtBothEndpointsAndPollsAtTheStandardOne(_ kind: StoreKind) async throws {
        let routes = try await Routes(kind)
        defer { Task { await routes.bed.close() } }
        let own = await routes.send("POST", "/device/authorize", form: [("app", FlowTestBed.app), ("provider", "idp")])
        #expect(own.status == 200)
        #expect(try json(own)["verification_uri"] as? String == "https://broker.test/device")
        let standard = await routes.send("POST", "/providers/idp/device_authorization", form: [("client_id", FlowTestBed.app)])
        #expect(standard.status == 200)
        let deviceCode = try #require(try json(standard)["device_code"] as? String)
        let poll = await routes.send("POST", "/providers/idp/token", form: [
            ("grant_type", DeviceRoutes.grantType), ("device_code", deviceCode), ("client_id", FlowTestBed.app),
        ])
        #expect(poll.status == 400)
        #expect(try json(poll)["error"] as? String == "authorization_pending")
        let metadata = await routes.send("GET", "/.well-known/oauth-authorization-server/providers/idp")
        #expect(try json(metadata)["device_authorization_endpoint"] as? String == "https://broker.test/providers/idp/device_authorization")
    }
}
