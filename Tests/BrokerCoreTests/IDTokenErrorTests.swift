import BrokerCore
import Foundation
import Testing

/// Error descriptions are safe to log: no token, no claim value, nothing a header smuggles in.
struct IDTokenErrorTests {
    private static let failing = [
        "tampered", "alg-none", "hs256-public-key", "unknown-kid", "wrong-iss", "wrong-aud",
        "multi-aud-no-azp", "multi-aud-wrong-azp", "iat-future", "nbf-future", "no-nonce", "no-sub",
    ]

    @Test(arguments: failing)
    func descriptionCarriesNoTokenOrClaimValue(name: String) async throws {
        let token = try IDTokenVectors.token(name)
        let verifier = IDTokenVerifier(jwks: JWKSCache(staticJWKS: try IDTokenVectors.text("jwks.json")))
        let error = try #require(await verificationError(verifier, token))
        let description = error.description
        #expect(!description.isEmpty)
        for secret in [
            "user-123", "admin", IDTokenVectors.nonce, "ada@example.test", "Ada Lovelace", "evil.example.test",
            "someone-else", "other-client", "no-such-key", String(token.prefix(20)), String(token.suffix(20)),
        ] {
            #expect(!description.contains(secret), "\(name): the description repeats \(secret)")
        }
    }

    @Test func hostileAlgorithmNameIsCutDownInTheDescription() async throws {
        let header = #"{"alg":"RS256\n<script>alert(1)</script> and much more text"}"#
        let encoded = Data(header.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        let verifier = IDTokenVerifier(jwks: JWKSCache(staticJWKS: #"{"keys": []}"#))
        let error = try #require(await verificationError(verifier, encoded + ".eyJzdWIiOiJ4In0.c2ln"))
        #expect(error == .algorithmNotAllowed("RS256scriptalert"))
        #expect(error.description == "the ID token's signing algorithm RS256scriptalert is not allowed")
    }

    @Test func everyReasonHasItsOwnDescription() {
        let errors: [IDTokenError] = [
            .malformed, .algorithmNotAllowed("HS256"), .unknownKey, .badSignature, .wrongIssuer,
            .wrongAudience, .wrongAuthorizedParty, .expired, .issuedInTheFuture, .notYetValid,
            .nonceMismatch, .jwksUnavailable("idp.example.test answered HTTP 503"),
        ]
        #expect(Set(errors.map(\.description)).count == errors.count)
        #expect(errors.filter(\.isKeySetUnavailable).count == 1)
        #expect(IDTokenError.algorithmNotAllowed("").description.contains("(unnamed)"))
    }
}
