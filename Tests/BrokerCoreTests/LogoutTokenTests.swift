import BrokerCrypto
import Foundation
import Testing
import WireValues

@testable import BrokerCore

/// OpenID Connect Back-Channel Logout 1.0 §2.6, rule by rule: a valid logout token passes (with
/// only `sub`, only `sid`, or both), and each way of breaking one rule is refused for that rule.
struct LogoutTokenTests {
    static let issuer = "https://idp.test"
    static let clientID = "broker-client"
    static let jwksURI = URL(string: "https://idp.test/jwks")!
    static let now = 1_800_000_000

    private struct Signing {
        let signer: DevelopmentSigner
        let verifier: LogoutTokenVerifier

        init() throws {
            signer = try DevelopmentSigner.make()
            let clock: BrokerClock = { Double(LogoutTokenTests.now) }
            verifier = LogoutTokenVerifier(signatures: IDTokenVerifier(jwks: JWKSCache(staticJWKS: signer.jwks), clock: clock), clock: clock)
        }

        func verify(_ token: String) async -> Result<LogoutTokenVerifier.Logout, LogoutTokenError> {
            do throws(LogoutTokenError) {
                return .success(try await verifier.verify(token, jwksURI: LogoutTokenTests.jwksURI, issuer: LogoutTokenTests.issuer,
                                                          clientID: LogoutTokenTests.clientID))
            } catch {
                return .failure(error)
            }
        }

        func verify(_ claims: [(String, JSONValue)]) async throws -> Result<LogoutTokenVerifier.Logout, LogoutTokenError> {
            await verify(try signer.sign(claims: .object(claims)))
        }
    }

    static let event: JSONValue = .object([(LogoutTokenVerifier.event, .object([]))])

    /// A valid token's claims with `changes` applied: a value replaces the claim, nil removes it.
    static func claims(_ changes: [String: JSONValue?] = [:]) -> [(String, JSONValue)] {
        var claims: [(String, JSONValue)] = [
            ("iss", .string(issuer)), ("aud", .array([.string(clientID)])), ("iat", .int(now)), ("exp", .int(now + 120)),
            ("jti", .string("jti-1")), ("events", event), ("sub", .string("alice")), ("sid", .string("sid-1")),
        ]
        for (name, value) in changes {
            claims.removeAll { $0.0 == name }
            if let value { claims.append((name, value)) }
        }
        return claims
    }

    /// §4.1: a `typ` header, when there is one, says it is a logout token (or a plain JWT).
    @Test func aTokenOfAnotherTypeIsRefused() async throws {
        let signing = try Signing()
        for type in ["logout+jwt", "application/logout+jwt", "JWT"] {
            let token = try signing.signer.sign(claims: .object(Self.claims()), type: type)
            #expect((try? await signing.verify(token).get())?.tokenID == "jti-1", "typ \(type)")
        }
        for type in ["at+jwt", "secevent+jwt", "JOSE"] {
            let token = try signing.signer.sign(claims: .object(Self.claims()), type: type)
            guard case .failure(let error) = await signing.verify(token) else { Issue.record("typ \(type) accepted"); continue }
            #expect(error == .wrongType, "typ \(type)")
        }
    }

    @Test func aValidTokenPassesWithSubSidOrBoth() async throws {
        let signing = try Signing()
        let both = try await signing.verify(Self.claims()).get()
        #expect(both == LogoutTokenVerifier.Logout(issuer: Self.issuer, tokenID: "jti-1", subject: "alice", providerSessionID: "sid-1",
                                                   signedInBefore: Double(Self.now) + 1,
                                                   rememberUntil: Double(Self.now) + LogoutTokenVerifier.maximumAge + 120))
        #expect(try await signing.verify(Self.claims(["sid": nil])).get().providerSessionID == nil)
        #expect(try await signing.verify(Self.claims(["sub": nil])).get().subject == nil)
        #expect(try await signing.verify(Self.claims(["aud": .string(Self.clientID), "exp": nil])).get().subject == "alice",
                "a single audience as a string, no exp")
        #expect(try await signing.verify(Self.claims(["iat": .int(Self.now - 300 - 59)])).get().tokenID == "jti-1", "at the edge of the age")
        #expect(try await signing.verify(Self.claims(["iat": .int(Self.now + 59)])).get().tokenID == "jti-1", "within the clock skew")
    }

    @Test(arguments: [
        ("another issuer", ["iss": .string("https://other.test")], LogoutTokenError.wrongIssuer),
        ("no issuer", ["iss": nil], .wrongIssuer),
        ("another audience", ["aud": .array([.string("someone-else")])], .wrongAudience),
        ("no audience", ["aud": nil], .wrongAudience),
        ("no iat", ["iat": nil], .missingIssueTime),
        ("iat in the future", ["iat": .int(now + 61)], .issuedInTheFuture),
        ("too old", ["iat": .int(now - 361), "exp": .int(now + 120)], .tooOld),
        ("expired", ["exp": .int(now - 61)], .expired),
        ("no jti", ["jti": nil], .missingTokenID),
        ("an empty jti", ["jti": .string("")], .missingTokenID),
        ("no events", ["events": nil], .notALogoutEvent),
        ("another event", ["events": .object([("http://schemas.openid.net/event/other", .object([]))])], .notALogoutEvent),
        ("the event not an object", ["events": .object([(LogoutTokenVerifier.event, .string("yes"))])], .notALogoutEvent),
        ("events not an object", ["events": .array([.string(LogoutTokenVerifier.event)])], .notALogoutEvent),
        ("neither sub nor sid", ["sub": nil, "sid": nil], .noSubjectOrSession),
        ("empty sub and sid", ["sub": .string(""), "sid": .string("")], .noSubjectOrSession),
        ("a nonce", ["nonce": .string("n-1")], .nonceForbidden),
        ("a null nonce", ["nonce": .null], .nonceForbidden),
        ("iss not a string", ["iss": .int(1)], .malformed),
        ("iat not a number", ["iat": .string("now")], .malformed),
    ] as [(String, [String: JSONValue?], LogoutTokenError)])
    func eachBrokenRuleIsRefusedForItsReason(_ name: String, _ changes: [String: JSONValue?], _ expected: LogoutTokenError) async throws {
        let result = try await (try Signing()).verify(Self.claims(changes))
        guard case .failure(let error) = result else {
            Issue.record("\(name): accepted")
            return
        }
        #expect(error == expected, "\(name): \(error)")
    }

    @Test func signaturesAreAnIDTokensSignatures() async throws {
        let signing = try Signing()
        let token = try signing.signer.sign(claims: .object(Self.claims()))
        let parts = token.split(separator: ".").map(String.init)
        let forged = parts[0] + "." + Base64URL.encode(Array(JSONValue.object(Self.claims(["sub": .string("mallory")])).serialized())) + "." + parts[2]
        #expect(try #require(await signing.verify(forged).failure).description.contains("signature does not verify"))
        let stranger = try DevelopmentSigner.make().sign(claims: .object(Self.claims()))
        #expect(try #require(await signing.verify(stranger).failure).description.contains("no key"))
        let unsigned = Base64URL.encode(Array(#"{"alg":"none"}"#.utf8)) + "." + parts[1] + "."
        #expect(try #require(await signing.verify(unsigned).failure).description.contains("algorithm is not allowed"))
        #expect(await signing.verify("not-a-jwt").failure == .malformed)
    }

    @Test func anIDTokenIsNeverALogoutToken() async throws {
        let signing = try Signing()
        let idToken = try signing.signer.sign(DevelopmentIDToken(
            iss: Self.issuer, sub: "alice", aud: Self.clientID, exp: Self.now + 600, iat: Self.now, authTime: Self.now, nonce: "n-1",
            name: "Alice", email: "alice@example.test", emailVerified: true
        ))
        #expect(await signing.verify(idToken).failure == .missingTokenID)
        let withJTI = try await signing.verify(Self.claims(["events": nil, "nonce": .string("n-1")]))
        #expect(withJTI.failure == .notALogoutEvent)
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
