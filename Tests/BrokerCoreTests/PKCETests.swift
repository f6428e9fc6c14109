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
            createdAt: 0, signedInAt: 0, usedAt: 0
        )
        var dumped = ""
        dump(StateRecord.session(session), to: &dumped)
        for text in [String(describing: session), String(reflecting: session), "\(StateRecord.session(session))", dumped] {
            #expect(!text.contains("at-secret-1") && !text.contains("rt-secret-2"), "\(text)")
        }
        #expect(String(describing: session) == "Session(<redacted>)")
    }
}
