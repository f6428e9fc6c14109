import Testing

@testable import BrokerCore

/// Sessions with equal scopes share one array, however they reach the store.
struct ScopeSharingTests {
    private func session(_ name: String, scopes: [String]) -> Session {
        Session(id: OpaqueToken.hash(name), provider: "dev", app: "demo", subject: name, scopes: scopes, accessToken: "at",
                accessTokenExpiresAt: nil, refreshToken: nil, idTokenClaims: nil, createdAt: 0, signedInAt: 0, usedAt: 0)
    }

    private func storage(_ scopes: [String]) -> UnsafeRawPointer? {
        scopes.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
    }

    @Test func sessionsPutOrUpdatedShareEqualScopeLists() {
        let store = SessionTable(log: NoChangeLog(), lifetimes: SessionLifetimes(idle: 100, absolute: 1000))
        // Built separately, as two logins would: equal, in two arrays.
        _ = store.put(session("tbs_a", scopes: "openid profile email".split(separator: " ").map(String.init)))
        _ = store.put(session("tbs_b", scopes: ["openid", "profile", "email"]))
        _ = store.put(session("tbs_c", scopes: ["openid"]))
        _ = store.put(session("tbs_d", scopes: ["email"]))
        _ = store.update(OpaqueToken.hash("tbs_d")) { $0.scopes = ["openid", "profile", "email"] }
        let stored = { (name: String) in store.read(OpaqueToken.hash(name), now: 1) { $0.scopes } ?? [] }
        #expect(stored("tbs_a") == ["openid", "profile", "email"])
        #expect(storage(stored("tbs_a")) == storage(stored("tbs_b")))
        #expect(storage(stored("tbs_a")) == storage(stored("tbs_d")), "an update shares too")
        #expect(stored("tbs_c") == ["openid"])
        #expect(storage(stored("tbs_a")) != storage(stored("tbs_c")))
    }
}
