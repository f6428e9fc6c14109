import BrokerCore
import Foundation
import Testing
#if canImport(WireValues)
import WireValues
#endif

struct IDTokenVerifierTests {
    /// A verifier over the vectors' key set, at the real time (the valid tokens expire in 2100).
    private func verifier(jwks: String = "jwks.json", clock: TestClock? = nil) throws -> IDTokenVerifier {
        let cache = JWKSCache(staticJWKS: try IDTokenVectors.text(jwks))
        guard let clock else { return IDTokenVerifier(jwks: cache) }
        return IDTokenVerifier(jwks: cache, clock: clock.closure)
    }

    @Test func validRS256TokenPassesWithEveryClaimMapped() async throws {
        let result = await verification(try verifier(), try IDTokenVectors.token("valid-rs256"))
        let claims = try result.get()
        #expect(claims.subject == "user-123")
        #expect(claims.issuer == IDTokenVectors.issuer)
        #expect(claims.audience == [IDTokenVectors.clientID])
        #expect(claims.authorizedParty == nil)
        #expect(claims.expiresAt == IDTokenVectors.farFuture)
        #expect(claims.issuedAt == IDTokenVectors.issuedAt)
        #expect(claims.nonce == IDTokenVectors.nonce)
        #expect(claims.email == "ada@example.test")
        #expect(claims.emailVerified == true)
        #expect(claims.name == "Ada Lovelace")
        #expect(claims.picture == "https://idp.example.test/ada.png")
        #expect(claims.raw["sub"] == .string("user-123"))
        #expect(claims.raw["exp"] == .int(4_102_444_800))
        #expect(claims.raw["email_verified"] == .bool(true))
    }

    @Test func validES256TokenWithArrayAudiencePasses() async throws {
        let claims = try await verification(try verifier(), try IDTokenVectors.token("valid-es256")).get()
        #expect(claims.subject == "user-123")
        #expect(claims.audience == [IDTokenVectors.clientID])
        #expect(claims.raw["aud"] == .array([.string(IDTokenVectors.clientID)]))
        #expect(claims.email == "ada@example.test")
        #expect(claims.expiresAt == IDTokenVectors.farFuture)
    }

    @Test(arguments: ["valid-eddsa", "multi-aud-azp"])
    func otherValidTokensPass(name: String) async throws {
        let claims = try await verification(try verifier(), try IDTokenVectors.token(name)).get()
        #expect(claims.subject == "user-123")
    }

    @Test func keyWithoutAlgAcceptsAnyAlgorithmOfItsFamily() async throws {
        // rsa-2 states no alg; the token is PS256.
        let token = try IDTokenVectors.token("rotated-ps256")
        let claims = try await verification(try verifier(jwks: "jwks-rotated.json"), token).get()
        #expect(claims.subject == "user-123")
    }

    @Test func payloadChangedAfterSigningIsABadSignature() async throws {
        #expect(await verificationError(try verifier(), try IDTokenVectors.token("tampered")) == .badSignature)
    }

    @Test func algNoneIsRefused() async throws {
        let error = await verificationError(try verifier(), try IDTokenVectors.token("alg-none"))
        #expect(error == .algorithmNotAllowed("none"))
        #expect(error?.description == "the ID token's signing algorithm none is not allowed")
    }

    @Test func hmacKeyedWithThePublicKeyIsRefusedBeforeAnyKeyIsFetched() async throws {
        let source = CountingJWKSSource(document: try IDTokenVectors.text("jwks.json"))
        let cache = JWKSCache(fetch: source.fetch)
        let verifier = IDTokenVerifier(jwks: cache)
        #expect(await verificationError(verifier, try IDTokenVectors.token("hs256-public-key")) == .algorithmNotAllowed("HS256"))
        #expect(await verificationError(verifier, try IDTokenVectors.token("hs256-oct")) == .algorithmNotAllowed("HS256"))
        #expect(source.fetches == 0)
    }

    @Test func hmacAndNoneStayRefusedEvenWhenAllowedExplicitly() async throws {
        let cache = JWKSCache(staticJWKS: try IDTokenVectors.text("jwks.json"))
        let verifier = IDTokenVerifier(jwks: cache, allowedAlgorithms: ["HS256", "none", "RS256"])
        #expect(await verificationError(verifier, try IDTokenVectors.token("hs256-public-key")) == .algorithmNotAllowed("HS256"))
        #expect(await verificationError(verifier, try IDTokenVectors.token("alg-none")) == .algorithmNotAllowed("none"))
        #expect(await verificationError(verifier, try IDTokenVectors.token("valid-rs256")) == nil)
    }

    @Test func algorithmOutsideANarrowAllowlistIsRefused() async throws {
        let cache = JWKSCache(staticJWKS: try IDTokenVectors.text("jwks.json"))
        let verifier = IDTokenVerifier(jwks: cache, allowedAlgorithms: ["RS256"])
        #expect(await verificationError(verifier, try IDTokenVectors.token("valid-es256")) == .algorithmNotAllowed("ES256"))
        #expect(await verificationError(verifier, try IDTokenVectors.token("valid-rs256")) == nil)
    }

    @Test(arguments: [
        "rs256-kid-oct",  // the oct key is not a signing key here
        "rs256-kid-enc",  // use: enc
        "rs256-kid-ops",  // key_ops without verify
        "unknown-kid",
        "ps256-on-rs256-key",  // the key declares RS256
        "no-kid",  // several keys in the set, so a kid is required
    ])
    func tokensWithoutAMatchingUsableKeyAreUnknownKey(name: String) async throws {
        #expect(await verificationError(try verifier(), try IDTokenVectors.token(name)) == .unknownKey)
    }

    @Test func tokenWithoutKidPassesAgainstASingleKeySet() async throws {
        let claims = try await verification(try verifier(jwks: "jwks-single.json"), try IDTokenVectors.token("no-kid")).get()
        #expect(claims.subject == "user-123")
    }

    @Test(arguments: [
        "", "abc", "a.b", "a.b.c.d", "..", "eyJhbGciOiJSUzI1NiJ9..sig", "!!!.eyJ9.sig",
        "bm90IGpzb24.eyJzdWIiOiJ4In0.c2ln",  // header is not JSON
        "eyJraWQiOiJyc2EtMSJ9.eyJzdWIiOiJ4In0.c2ln",  // header without alg
        "eyJhbGciOiJSUzI1NiIsImNyaXQiOlsiZXhwIl19.eyJzdWIiOiJ4In0.c2ln",  // crit
    ])
    func malformedTokensAreMalformed(token: String) async throws {
        #expect(await verificationError(try verifier(), token) == .malformed)
    }

    @Test func oversizedTokenIsMalformed() async throws {
        let token = try IDTokenVectors.token("valid-rs256") + String(repeating: "A", count: 70_000)
        #expect(await verificationError(try verifier(), token) == .malformed)
    }

    @Test func tokenWithoutSubjectIsMalformed() async throws {
        #expect(await verificationError(try verifier(), try IDTokenVectors.token("no-sub")) == .malformed)
    }

    @Test func wrongIssuerIsRefused() async throws {
        #expect(await verificationError(try verifier(), try IDTokenVectors.token("wrong-iss")) == .wrongIssuer)
    }

    @Test func issuerMustMatchExactly() async throws {
        let token = try IDTokenVectors.token("valid-rs256")
        #expect(await verificationError(try verifier(), token, issuer: IDTokenVectors.issuer + "/") == .wrongIssuer)
        #expect(await verificationError(try verifier(), token, issuer: "HTTPS://idp.example.test") == .wrongIssuer)
    }

    @Test func audienceWithoutTheClientIsRefused() async throws {
        #expect(await verificationError(try verifier(), try IDTokenVectors.token("wrong-aud")) == .wrongAudience)
        let valid = try IDTokenVectors.token("valid-rs256")
        #expect(await verificationError(try verifier(), valid, clientID: "another-client") == .wrongAudience)
    }

    @Test(arguments: ["multi-aud-no-azp", "multi-aud-wrong-azp"])
    func severalAudiencesNeedOurAuthorizedParty(name: String) async throws {
        #expect(await verificationError(try verifier(), try IDTokenVectors.token(name)) == .wrongAuthorizedParty)
    }
}
