import Testing

@testable import BrokerCore

struct PKCETests {
    /// RFC 7636 Appendix B.
    @Test func rfc7636AppendixB() {
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
        #expect(PKCE.challenge(for: verifier) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        #expect(PKCE.verify(verifier: verifier, challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"))
        #expect(!PKCE.verify(verifier: verifier, challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cN"))
    }

    @Test func verifiersAreWellFormedAndFresh() {
        let first = PKCE.makeVerifier()
        #expect(PKCE.isWellFormed(first))
        #expect(first.utf8.count == 43)
        #expect(first != PKCE.makeVerifier())
    }

    @Test(arguments: ["short", String(repeating: "a", count: 129), String(repeating: "a", count: 42) + "+", String(repeating: "é", count: 43)])
    func rejectsMalformedValues(_ value: String) {
        #expect(!PKCE.isWellFormed(value))
        #expect(!PKCE.verify(verifier: value, challenge: PKCE.challenge(for: value)))
    }

    @Test func opaqueTokensHavePrefixAnd256Bits() {
        let token = OpaqueToken.make(prefix: OpaqueToken.sessionPrefix)
        #expect(token.hasPrefix("tbs_"))
        #expect(token.utf8.count == 4 + 43)
        #expect(OpaqueToken.hash(token) == OpaqueToken.hash(String(token)))
        #expect(OpaqueToken.hash(token) != OpaqueToken.hash(OpaqueToken.make(prefix: OpaqueToken.sessionPrefix)))
    }
}

struct RedactionTests {
    @Test func tokenBearingValuesPrintNoTokens() {
        let session = Session(
            id: OpaqueToken.hash("tbs_x"), provider: "dev", app: "demo", subject: "s", scopes: ["openid"],
            accessToken: "at-secret-1", accessTokenExpiresAt: nil, refreshToken: "rt-secret-2", idTokenClaims: nil,
            createdAt: 0, usedAt: 0
        )
        var dumped = ""
        dump(StateRecord.session(session), to: &dumped)
        for text in [String(describing: session), String(reflecting: session), "\(StateRecord.session(session))", dumped] {
            #expect(!text.contains("at-secret-1") && !text.contains("rt-secret-2"), "\(text)")
        }
        #expect(String(describing: session) == "Session(<redacted>)")
    }
}

struct SessionLifetimeTests {
    private func session(_ name: String, created: Double, used: Double) -> Session {
        Session(id: OpaqueToken.hash(name), provider: "dev", app: "demo", subject: name, scopes: [], accessToken: "at",
                accessTokenExpiresAt: nil, refreshToken: nil, idTokenClaims: nil, createdAt: created, usedAt: used)
    }

    @Test func idleAndAbsoluteLifetimesEndSessions() {
        let store = SessionStore(log: MemoryOnly(), lifetimes: SessionLifetimes(idle: 100, absolute: 1000))
        _ = store.put(session("tbs_idle", created: 0, used: 0))
        _ = store.put(session("tbs_old", created: 0, used: 950))
        _ = store.put(session("tbs_live", created: 500, used: 990))
        #expect(store.read(OpaqueToken.hash("tbs_idle"), now: 1001) { $0.id } == nil, "unused for longer than the idle lifetime")
        #expect(store.read(OpaqueToken.hash("tbs_old"), now: 1001) { $0.id } == nil, "older than the absolute lifetime")
        #expect(store.read(OpaqueToken.hash("tbs_live"), now: 1001) { $0.id } != nil)
        #expect(store.sweep(now: 1001) == 2)
        #expect(store.count == 1)
    }
}
