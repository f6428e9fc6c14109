import APIClient
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

        /// The broker's own route table (``BrokerRoutes``) over the test bed.
        init(_ kind: StoreKind) async throws {
            bed = try await FlowTestBed(kind)
            var routes = bed.services.admission.routeTable()
            BrokerRoutes.register(bed.services, transfers: try #require(APITransfers(maxInFlight: 8)), in: &routes)
            router = routes.router
        }

        /// The answer to `method target` with a form `body`, as the server would send it.
        func send(_ method: String, _ target: String, form: [(String, String)]? = nil, bearer: String? = nil) async -> Response {
            await router.answer(method, target, form: form, bearer: bearer)
        }
    }

    /// The routes `serve` has and the tests once left out are in this table too: the API proxy,
    /// introspection, back-channel logout — each answers itself, not with the router's 404.
    @Test func theRouteTableIsTheBrokers() async throws {
        let routes = try await Routes(.embedded)
        try await routes.bed.closing {
            for (method, target) in [("GET", "/proxy/idp/anything"), ("POST", "/introspect"), ("POST", "/providers/idp/backchannel_logout")] {
                let answer = await routes.send(method, target, form: method == "POST" ? [] : nil)
                let description = try answer.jsonObject()["error_description"] as? String
                #expect(answer.status != 404 || description != HTTPError.notFound.description, "\(method) \(target): \(description ?? "")")
            }
            let unrouted = await routes.send("GET", "/no-such-route")
            #expect(try unrouted.jsonObject()["error_description"] as? String == HTTPError.notFound.description, "what the router's 404 says")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aStandardClientSignsInAndRefreshesWithoutClientID(_ kind: StoreKind) async throws {
        let routes = try await Routes(kind)
        try await routes.bed.closing {
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
            let refreshToken = try #require(try token.jsonObject()["refresh_token"] as? String)
            let refreshed = await routes.send("POST", "/providers/idp/token", form: [("grant_type", "refresh_token"), ("refresh_token", refreshToken)])
            #expect(refreshed.status == 200)
            #expect(try refreshed.jsonObject()["refresh_token"] as? String == refreshToken)
            let other = await routes.send("POST", "/providers/idp/token", form: [
                ("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", "another-app"),
            ])
            #expect(other.status == 401, "an unknown client is invalid_client")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func theStandardTokenEndpointsErrorsAreRFC6749s(_ kind: StoreKind) async throws {
        let routes = try await Routes(kind)
        try await routes.bed.closing { () async throws in
            let cases: [([(String, String)], Int, String)] = [
                ([("grant_type", "password"), ("client_id", FlowTestBed.app)], 400, "unsupported_grant_type"),
                ([("grant_type", DeviceCodeGrant.type), ("device_code", "tbd_unknown"), ("client_id", FlowTestBed.app)], 400, "invalid_grant"),
                ([("grant_type", DeviceCodeGrant.type), ("device_code", "tbd_unknown")], 400, "invalid_request"),
                ([("grant_type", "refresh_token"), ("refresh_token", "tbs_unknown")], 400, "invalid_grant"),
                ([("grant_type", "authorization_code"), ("code", "tbh_x"), ("code_verifier", "short"), ("redirect_uri", FlowTestBed.redirectURI),
                  ("client_id", FlowTestBed.app)], 400, "invalid_request"),
            ]
            for (form, status, error) in cases {
                let answer = await routes.send("POST", "/providers/idp/token", form: form)
                #expect(answer.status == status, "\(form)")
                #expect(try answer.jsonObject()["error"] as? String == error, "\(form)")
            }
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aDeviceGetsCodesAtBothEndpointsAndPollsAtTheStandardOne(_ kind: StoreKind) async throws {
        let routes = try await Routes(kind)
        try await routes.bed.closing {
            let own = await routes.send("POST", "/device/authorize", form: [("app", FlowTestBed.app), ("provider", "idp")])
            #expect(own.status == 200)
            #expect(try own.jsonObject()["verification_uri"] as? String == "https://broker.test/device")
            let standard = await routes.send("POST", "/providers/idp/device_authorization", form: [("client_id", FlowTestBed.app)])
            #expect(standard.status == 200)
            let deviceCode = try #require(try standard.jsonObject()["device_code"] as? String)
            let poll = await routes.send("POST", "/providers/idp/token", form: [
                ("grant_type", DeviceCodeGrant.type), ("device_code", deviceCode), ("client_id", FlowTestBed.app),
            ])
            #expect(poll.status == 400)
            #expect(try poll.jsonObject()["error"] as? String == "authorization_pending")
            let metadata = await routes.send("GET", "/.well-known/oauth-authorization-server/providers/idp")
            #expect(try metadata.jsonObject()["device_authorization_endpoint"] as? String == "https://broker.test/providers/idp/device_authorization")
        }
    }

    /// `read` until `done` holds: on a store several instances share, for as long as an instance's
    /// memory may show another's change late (the notification delay, under 2 s in the docs);
    /// once on the embedded store. The last value read.
    private func eventually<T>(_ kind: StoreKind, _ read: () async throws -> T, until done: (T) -> Bool) async throws -> T {
        let deadline = ContinuousClock.now + .seconds(StoreKind.sharedByInstances.contains(kind) ? 2 : 0)
        while true {
            let value = try await read()
            if done(value) || ContinuousClock.now >= deadline { return value }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// The provider's sign-in for `location` (an authorization URL), then `/callback`: the app's
    /// redirect URI's parameters.
    private func signIn(_ routes: Routes, at location: String) async throws -> FormFields {
        let (code, state) = try routes.bed.provider.signIn(location, subject: "alice")
        let callback = await routes.send("GET", "/callback?" + FormFields.encode([("code", code), ("state", state)]))
        return try FormFields(parsing: try #require(callback.header("Location")?.split(separator: "?", maxSplits: 1).last))
    }

    /// A login past its lifetime (`login_lifetime_seconds`, on the bed's clock): its callback is a
    /// 400 that goes back to no app, and the provider's code is never exchanged.
    @Test(arguments: StoreKind.allCases)
    func aCallbackPastTheLoginsLifetimeIsA400ThatRedirectsNowhere(_ kind: StoreKind) async throws {
        let routes = try await Routes(kind)
        try await routes.bed.closing {
            let app = [("app", FlowTestBed.app), ("provider", "idp"), ("redirect_uri", FlowTestBed.redirectURI),
                       ("code_challenge", PKCE.challenge(for: PKCE.makeVerifier())), ("code_challenge_method", "S256")]
            let started = await routes.send("GET", "/authorize?" + FormFields.encode(app))
            let (code, state) = try routes.bed.provider.signIn(try #require(started.header("Location")), subject: "alice")
            routes.bed.clock.advance(by: routes.bed.settings.loginLifetimeSeconds + 1)
            let callback = await routes.send("GET", "/callback?" + FormFields.encode([("code", code), ("state", state)]))
            #expect(callback.status == 400 && callback.header("Location") == nil)
            #expect(try callback.jsonObject()["error"] as? String == "invalid_request")
            #expect(routes.bed.provider.accessTokensIssued == 0, "the code is not exchanged")
            #expect(routes.bed.store.sessionCount == 0)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func theBrokersOwnRoutesSignInAddScopesAndEndASession(_ kind: StoreKind) async throws {
        let routes = try await Routes(kind)
        try await routes.bed.closing {
            let verifier = PKCE.makeVerifier()
            let app = [("redirect_uri", FlowTestBed.redirectURI), ("code_challenge", PKCE.challenge(for: verifier)), ("code_challenge_method", "S256")]
            let started = await routes.send("GET", "/authorize?" + FormFields.encode([("app", FlowTestBed.app), ("provider", "idp")] + app))
            #expect(started.status == 302)
            let back = try await signIn(routes, at: try #require(started.header("Location")))
            let redeemed = await routes.send("POST", "/token", form: [
                ("grant_type", "authorization_code"), ("code", try #require(back["code"])), ("code_verifier", verifier),
                ("redirect_uri", FlowTestBed.redirectURI), ("app", FlowTestBed.app),
            ])
            #expect(redeemed.status == 200)
            let token = try #require(try redeemed.jsonObject()["session_token"] as? String)

            let current = await routes.send("GET", "/token", bearer: token)
            #expect(current.status == 200)
            let before = try #require(try current.jsonObject()["access_token"] as? String)
            #expect(routes.bed.provider.accepts(before))
            #expect(await routes.send("GET", "/token?min_ttl=soon", bearer: token).status == 400)
            #expect(await routes.send("GET", "/token", bearer: "tbs_unknown").status == 401)
            let session = await routes.send("GET", "/session", bearer: token)
            let described = try session.jsonObject()
            #expect(described["subject"] as? String == "alice")
            #expect(described["scopes"] as? [String] == ["openid", "email"])

            // Incremental authorization: the code stands for the same session, now with the new scope.
            let more = await routes.send("POST", "/authorize", form: [("scope", "calendar")] + app, bearer: token)
            #expect(more.status == 200)
            let moreBack = try await signIn(routes, at: try #require(try more.jsonObject()["authorization_url"] as? String))
            let merged = await routes.send("POST", "/token", form: [
                ("grant_type", "authorization_code"), ("code", try #require(moreBack["code"])), ("code_verifier", verifier),
                ("redirect_uri", FlowTestBed.redirectURI), ("app", FlowTestBed.app),
            ])
            #expect(merged.status == 200)
            #expect(try merged.jsonObject()["session_token"] == nil)
            let scopes = try await eventually(kind) { () async throws -> [String]? in
                try await routes.send("GET", "/session", bearer: token).jsonObject()["scopes"] as? [String]
            } until: { $0 == ["openid", "email", "calendar"] }
            #expect(scopes == ["openid", "email", "calendar"])

            let refreshed = await routes.send("POST", "/refresh", bearer: token)
            #expect(refreshed.status == 200)
            #expect(try refreshed.jsonObject()["access_token"] as? String != before)
            let revoked = await routes.send("POST", "/revoke", bearer: token)
            #expect(revoked.status == 200)
            #expect(try revoked.jsonObject()["revoked"] as? Bool == true)
            // Every instance's memory drops the session within the notification delay.
            let statuses = try await eventually(kind) {
                [await routes.send("GET", "/token", bearer: token).status, await routes.send("GET", "/session", bearer: token).status]
            } until: { $0 == [401, 401] }
            #expect(statuses == [401, 401])
        }
    }

    /// A request refused for its holder (here a bearer session's token sent in the DPoP scheme,
    /// as a copied bound token without its key is) keeps the session no longer alive: only an
    /// admitted one marks it used.
    @Test func onlyAnAdmittedRequestMarksTheSessionUsed() async throws {
        let routes = try await Routes(.embedded)
        try await routes.bed.closing {
            let signedIn = try await routes.bed.newSession(subject: "alice")
            let token = try #require(signedIn.token)
            let before = try #require(try await routes.bed.stored(signedIn.session.id)).usedAt
            routes.bed.clock.advance(by: 120)
            for path in ["/token", "/session"] {
                let refused = await routes.router.answer("GET", path, headers: ["Authorization": "DPoP \(token)"])
                #expect(refused.status == 401, "\(path)")
            }
            #expect(try await routes.bed.stored(signedIn.session.id)?.usedAt == before, "refused: not used")
            #expect(await routes.send("GET", "/session", bearer: token).status == 200)
            #expect(try await routes.bed.stored(signedIn.session.id)?.usedAt == routes.bed.clock.seconds)
            routes.bed.clock.advance(by: 120)
            #expect(await routes.send("GET", "/token", bearer: token).status == 200)
            #expect(try await routes.bed.stored(signedIn.session.id)?.usedAt == routes.bed.clock.seconds)
        }
    }
}
