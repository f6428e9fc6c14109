import BrokerCrypto
import Foundation
import HTTPServer
import Logging
import Testing
import WireValues

@testable import BrokerCore

/// The admin routes in process over the flow test bed (both stores; on PostgreSQL three
/// instances taking calls in turn): the credential, listings that never carry a token, ending
/// one session and a subject's, each revoked at the provider.
struct AdminRouteTests {
    private static let token = "an-admin-token-of-enough-characters-0123456789"

    private struct Admin {
        let bed: FlowTestBed
        let router: Router

        init(_ kind: StoreKind, token: String? = AdminRouteTests.token) async throws {
            bed = try await FlowTestBed(kind)
            var routes = RouteTable(router: Router())
            AdminRoutes(config: bed.services.config, metrics: bed.services.metrics, administration: SessionAdministration(store: bed.store, sessions: bed.sessions),
                        audit: bed.endings.audit, token: token.map { Secret($0, source: "test") }).register(in: &routes)
            router = routes.router
        }

        func send(_ method: String, _ target: String, bearer: String? = AdminRouteTests.token, form: [(String, String)]? = nil,
                  extra: [String: String] = ["Host": "127.0.0.1:9091"]) async -> Response {
            await router.answer(method, target, form: form, bearer: bearer, headers: extra)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func withoutTheRightTokenEveryRouteIs401AndNothingChanges(_ kind: StoreKind) async throws {
        let admin = try await Admin(kind)
        let alice = try await admin.bed.newSession(subject: "alice")
        let id = alice.session.id.hex
        let sessionToken = try #require(alice.token)
        for bearer in [nil, "wrong", String(Self.token.dropLast()), Self.token + "x", sessionToken] as [String?] {
            for (method, target, form) in [("GET", "/admin/sessions", nil), ("POST", "/admin/sessions/end", [("session", id)]),
                                           ("POST", "/admin/subjects/end", [("provider", "idp"), ("subject", "alice")])] as [(String, String, [(String, String)]?)] {
                let answer = await admin.send(method, target, bearer: bearer, form: form)
                #expect(answer.status == 401, "\(target) with \(bearer == nil ? "no token" : "a wrong token")")
                #expect(answer.headers.contains { $0.name == "WWW-Authenticate" })
                #expect(!String(decoding: answer.body, as: UTF8.self).contains("alice"))
            }
        }
        #expect(try await admin.bed.stored(alice.session.id) != nil, "nothing was ended")
        #expect(admin.bed.provider.revoked.isEmpty, "nothing was revoked")
        #expect(await admin.send("GET", "/admin/sessions").status == 200, "the right token, as a negative control")
        await admin.bed.close()
    }

    @Test(arguments: StoreKind.allCases)
    func listingsCarryMetadataAndNeverAToken(_ kind: StoreKind) async throws {
        let admin = try await Admin(kind)
        let alice = try await admin.bed.newSession(subject: "alice")
        _ = try await admin.bed.newSession(subject: "bob")
        let answer = await admin.send("GET", "/admin/sessions?provider=idp&subject=alice")
        #expect(answer.status == 200)
        let text = String(decoding: answer.body, as: UTF8.self)
        for secret in [try #require(alice.token), alice.session.accessToken, try #require(alice.session.refreshToken)] {
            #expect(!text.contains(secret))
        }
        let sessions = try #require(try answer.jsonObject()["sessions"] as? [[String: Any]])
        #expect(sessions.count == 1)
        #expect(Set(sessions[0].keys) == ["id", "app", "provider", "subject", "sid", "scopes", "created_at", "used_at"])
        #expect(sessions[0]["id"] as? String == alice.session.id.hex && sessions[0]["subject"] as? String == "alice")
        #expect((try await admin.send("GET", "/admin/sessions?app=\(FlowTestBed.app)").jsonObject()["sessions"] as? [Any])?.count == 2)
        for bad in ["subject=alice", "provider=nope", "app=nope", "limit=0", "limit=1001", "after=zz", "provider=idp&provider=idp", "user=alice"] {
            #expect(await admin.send("GET", "/admin/sessions?\(bad)").status == 400, "\(bad)")
        }
        await admin.bed.close()
    }

    @Test(arguments: StoreKind.allCases)
    func endingOneSessionOrASubjectsEndsThemHereAndAtTheProvider(_ kind: StoreKind) async throws {
        let admin = try await Admin(kind)
        let first = try await admin.bed.newSession(subject: "alice")
        let second = try await admin.bed.newSession(subject: "alice")
        let third = try await admin.bed.newSession(subject: "alice")
        let bob = try await admin.bed.newSession(subject: "bob")
        // A parameter the call does not take narrows nothing: refused before anything ends.
        let narrowed = await admin.send("POST", "/admin/subjects/end", form: [("provider", "idp"), ("subject", "alice"), ("app", "other")])
        #expect(narrowed.status == 400 && String(decoding: narrowed.body, as: UTF8.self).contains("no parameter app"))
        #expect(await admin.send("POST", "/admin/sessions/end", form: [("session", first.session.id.hex), ("reason", "x")]).status == 400)
        // ... nor in the query, which a call that takes a form reads nowhere (curl -d ... URL?app=).
        let inQuery = await admin.send("POST", "/admin/subjects/end?app=other", form: [("provider", "idp"), ("subject", "alice")])
        #expect(inQuery.status == 400 && String(decoding: inQuery.body, as: UTF8.self).contains("not in the query"))
        #expect(await admin.send("POST", "/admin/sessions/end?session=00", form: [("session", first.session.id.hex)]).status == 400)
        #expect(await admin.send("GET", "/admin/sessions", form: [("provider", "idp")]).status == 400, "a listing's filter is in its query")
        #expect(try await admin.bed.stored(first.session.id) != nil && admin.bed.provider.revoked.isEmpty, "nothing ended")
        let one = await admin.send("POST", "/admin/sessions/end", form: [("session", first.session.id.hex)])
        #expect(try one.jsonObject()["ended"] as? Bool == true && one.jsonObject()["provider_revocation"] as? String == "succeeded")
        #expect(try await admin.bed.stored(first.session.id) == nil)
        #expect(!admin.bed.provider.accepts(first.session.accessToken))
        #expect(try await admin.send("POST", "/admin/sessions/end", form: [("session", first.session.id.hex)]).jsonObject()["ended"] as? Bool == false)
        #expect(await admin.send("POST", "/admin/sessions/end", form: [("session", "not-an-id")]).status == 400)

        let all = await admin.send("POST", "/admin/subjects/end", form: [("provider", "idp"), ("subject", "alice")])
        #expect(all.status == 200)
        #expect(try all.jsonObject()["ended"] as? Int == 2)
        #expect((try all.jsonObject()["provider_revocation"] as? [String: Int])?["succeeded"] == 2)
        for ended in [second, third] {
            #expect(try await admin.bed.stored(ended.session.id) == nil)
            #expect(!admin.bed.provider.accepts(ended.session.accessToken))
        }
        #expect(try await admin.bed.stored(bob.session.id) != nil)
        #expect(admin.bed.provider.accepts(bob.session.accessToken))
        #expect(await admin.send("POST", "/admin/subjects/end", form: [("subject", "alice")]).status == 400)
        await admin.bed.close()
    }

    @Test func onALoopbackListenerOfItsOwnNoTokenIsAsked() async throws {
        let admin = try await Admin(.embedded, token: nil)
        #expect(await admin.send("GET", "/admin/sessions", bearer: nil).status == 200)
        #expect(await admin.send("GET", "/admin/sessions", bearer: nil, extra: ["Host": "localhost:9091", "Sec-Fetch-Site": "none"]).status == 200)
        await admin.bed.close()
    }

    /// Without a token, what a web page could send — a form posted from another site, a script
    /// on an app's origin, a name rebound to 127.0.0.1 — is refused, and ends nothing.
    @Test func onALoopbackListenerOfItsOwnWebPagesAreRefused() async throws {
        let admin = try await Admin(.embedded, token: nil)
        let alice = try await admin.bed.newSession(subject: "alice")
        let browserLike: [[String: String]] = [
            ["Host": "127.0.0.1:9091", "Origin": "https://evil.example"],
            ["Host": "127.0.0.1:9091", "Sec-Fetch-Site": "cross-site"],
            ["Host": "127.0.0.1:9091", "Sec-Fetch-Site": "same-site"],
            ["Host": "rebound.example:9091"],
            [:],
        ]
        for headers in browserLike {
            #expect(await admin.send("POST", "/admin/subjects/end", bearer: nil, form: [("provider", "idp"), ("subject", "alice")], extra: headers).status == 403,
                    "\(headers)")
            #expect(await admin.send("GET", "/admin/sessions", bearer: nil, extra: headers).status == 403, "\(headers)")
        }
        // Each refusal is an admin.refused line, as a wrong token's is: these are the probes the
        // check is for.
        #expect(admin.bed.audit.events("admin.refused").count == browserLike.count * 2)
        #expect(try await admin.bed.stored(alice.session.id) != nil)
        await admin.bed.close()
    }
}
