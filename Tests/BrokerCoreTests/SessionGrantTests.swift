import BrokerCrypto
import Testing

@testable import BrokerCore

/// How a session takes in a provider's token answer: created from a grant, refreshed (scopes
/// replaced only when the answer names them), or merged with an incremental grant (scopes added).
struct SessionGrantTests {
    private let now = 1_800_000_000.0

    private func answer(scopes: [String]?, refreshToken: String?) -> TokenResponse {
        TokenResponse(accessToken: "at-2", expiresIn: 600, refreshToken: refreshToken, scopes: scopes, idToken: nil)
    }

    private func session() -> Session {
        let first = Grant(answer(scopes: ["openid", "email"], refreshToken: "rt-1"), provider: "dev", subject: "alice",
                          requestedScopes: ["openid"], idTokenClaims: Array(#"{"sub":"alice"}"#.utf8), at: now)
        return Session(id: OpaqueToken.hash("tbs_x"), app: "demo", grant: first, at: now)
    }

    @Test func aNewSessionHoldsTheGrant() {
        let made = session()
        #expect(made.scopes == ["openid", "email"] && made.refreshToken == "rt-1" && made.accessTokenExpiresAt == now + 600)
        #expect(made.subject == "alice" && made.app == "demo" && made.createdAt == now && made.usedAt == now)
    }

    @Test func aRefreshReplacesScopesOnlyWhenTheAnswerNamesThem() {
        var refreshed = session()
        refreshed.take(Grant(answer(scopes: nil, refreshToken: nil), provider: "dev", subject: "alice",
                             requestedScopes: refreshed.scopes, idTokenClaims: nil, at: now + 100), scopes: .replace)
        #expect(refreshed.accessToken == "at-2" && refreshed.accessTokenExpiresAt == now + 700)
        #expect(refreshed.scopes == ["openid", "email"], "an answer without scopes keeps them")
        #expect(refreshed.refreshToken == "rt-1", "no refresh token in the answer keeps the old one")
        #expect(refreshed.idTokenClaims == Array(#"{"sub":"alice"}"#.utf8))
        refreshed.take(Grant(answer(scopes: ["openid"], refreshToken: "rt-2"), provider: "dev", subject: "alice",
                             requestedScopes: refreshed.scopes, idTokenClaims: nil, at: now), scopes: .replace)
        #expect(refreshed.scopes == ["openid"], "a narrower answer narrows them")
        #expect(refreshed.refreshToken == "rt-2", "a rotated refresh token replaces the old one")
    }

    @Test func anIncrementalGrantAddsScopes() {
        var merged = session()
        merged.take(Grant(answer(scopes: ["calendar", "email"], refreshToken: nil), provider: "dev", subject: "alice",
                          requestedScopes: [], idTokenClaims: Array(#"{"sub":"alice","n":2}"#.utf8), at: now), scopes: .add)
        #expect(merged.scopes == ["openid", "email", "calendar"])
        #expect(merged.idTokenClaims == Array(#"{"sub":"alice","n":2}"#.utf8))
    }
}
