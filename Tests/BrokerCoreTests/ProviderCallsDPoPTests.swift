import BrokerCrypto
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
import WireValues

@testable import BrokerCore

/// DPoP towards providers (RFC 9449): the proofs each call for a bound grant carries, and the
/// provider's nonces, as the requests a provider receives show them, recorded without a network.
struct ProviderCallsDPoPTests {
    /// Answers from a script, in order, and records each request.
    final class Script: UpstreamTransport, Sendable {
        let requests = Mutex<[URLRequest]>([])
        let answers: Mutex<[UpstreamResponse]>

        init(_ answers: [UpstreamResponse]) {
            self.answers = Mutex(answers)
        }

        func send(_ request: URLRequest) async throws(UpstreamError) -> UpstreamResponse {
            requests.withLock { $0.append(request) }
            return answers.withLock { $0.isEmpty ? UpstreamResponse(status: 500, contentType: nil, body: []) : $0.removeFirst() }
        }

        var sent: [URLRequest] { requests.withLock { $0 } }
    }

    static let now = 1_800_000_000.0
    static let tokens = UpstreamResponse(status: 200, contentType: "application/json",
                                         body: Array(#"{"access_token":"at-1","token_type":"DPoP","expires_in":300,"refresh_token":"rt-1"}"#.utf8))

    static func nonceRefusal(_ nonce: String) -> UpstreamResponse {
        UpstreamResponse(status: 400, contentType: "application/json", body: Array(#"{"error":"use_dpop_nonce"}"#.utf8),
                         headers: [("DPoP-Nonce", nonce)])
    }

    /// A proof's header and claims, checked to be signed by `key`.
    static func proof(_ request: URLRequest, by key: ProofSigningKey) throws -> (header: JSONValue, claims: JSONValue) {
        let text = try #require(request.value(forHTTPHeaderField: "DPoP"))
        let parts = text.split(separator: ".").map(String.init)
        try #require(parts.count == 3)
        let verifier = try #require(VerificationKey(.es256, first: Base64URL.decode(key.x)!, second: Base64URL.decode(key.y)!))
        #expect(verifier.isValid(try #require(Base64URL.decode(parts[2])), of: parts[0] + "." + parts[1]))
        return (try JSONValue.parse(try #require(Base64URL.decode(parts[0]))), try JSONValue.parse(try #require(Base64URL.decode(parts[1]))))
    }

    static func calls(_ script: Script) -> ProviderCalls {
        ProviderCalls(client: script, metrics: BrokerMetrics(), now: { now })
    }

    @Test func theCodeExchangeCarriesAProofOfTheGrantsKeyAndTakesABoundToken() async throws {
        let key = try ProofSigningKey.generate()
        let script = Script([Self.tokens])
        let provider = try ProviderCallsAuthenticationTests.provider(.clientSecretBasic(Secret("s3cret", source: "test")))
        let answer = try await Self.calls(script).exchange(code: "c", verifier: "v", callbackURL: "https://broker.example/callback",
                                                            provider: provider, key: key)
        #expect(answer.boundToKey && answer.accessToken == "at-1")
        let (header, claims) = try Self.proof(try #require(script.sent.first), by: key)
        #expect(header["typ"] == .string("dpop+jwt") && header["alg"] == .string("ES256"))
        #expect(header["jwk"] == .object([("crv", .string("P-256")), ("kty", .string("EC")), ("x", .string(key.x)), ("y", .string(key.y))]))
        #expect(claims["htm"] == .string("POST") && claims["htu"] == .string("https://idp.example/tenant/token"))
        #expect(claims["iat"] == .int(Int(Self.now)) && claims["jti"]?.stringValue?.count == 22)
        #expect(claims["ath"] == nil && claims["nonce"] == nil)
    }

    @Test func aNonceTheProviderAsksForIsLearntAndTheCallMadeOnceMoreWithANewAssertion() async throws {
        let key = try ProofSigningKey.generate()
        let script = Script([Self.nonceRefusal("n-1"), Self.tokens, Self.tokens])
        let signer = try ClientAssertionSigner.make(signingKey: try ClientAssertionTests.key("ec-pkcs8.pem"), algorithm: nil, secondKey: nil,
                                                    audience: .issuer).get()
        let provider = try ProviderCallsAuthenticationTests.provider(.privateKeyJWT(signer))
        let calls = Self.calls(script)
        _ = try await calls.refresh("rt-0", provider: provider, key: key)
        let sent = script.sent
        try #require(sent.count == 2)
        let first = try Self.proof(sent[0], by: key).claims, second = try Self.proof(sent[1], by: key).claims
        #expect(first["nonce"] == nil && second["nonce"] == .string("n-1") && first["jti"] != second["jti"])
        let assertions = sent.map { (try? FormFields(parsing: String(decoding: $0.httpBody ?? Data(), as: UTF8.self)))?["client_assertion"] }
        #expect(assertions[0] != nil && assertions[0] != assertions[1])
        // Kept for the provider's next call.
        _ = try await calls.refresh("rt-0", provider: provider, key: key)
        #expect(try Self.proof(try #require(script.sent.last), by: key).claims["nonce"] == .string("n-1"))
    }

    @Test func aCallRefusedWithANonceAnotherCallLearntFirstIsMadeAgainToo() async throws {
        let key = try ProofSigningKey.generate()
        let script = Script([Self.nonceRefusal("n-1"), Self.tokens])
        let provider = try ProviderCallsAuthenticationTests.provider(.clientSecretBasic(Secret("s3cret", source: "test")))
        let calls = Self.calls(script)
        // A call beside this one was refused first and learnt n-1; this one's proof went without.
        calls.proofs.learn("n-1", from: "https://idp.example/tenant/token", resource: false)
        _ = try await calls.refresh("rt-0", provider: provider, key: key)
        #expect(script.sent.count == 2)
    }

    @Test func aSecondRefusalIsTheAnswerNotALoop() async throws {
        let key = try ProofSigningKey.generate()
        let script = Script([Self.nonceRefusal("n-1"), Self.nonceRefusal("n-2"), Self.tokens])
        let provider = try ProviderCallsAuthenticationTests.provider(.clientSecretBasic(Secret("s3cret", source: "test")))
        await #expect(throws: ProviderCallError.self) { _ = try await Self.calls(script).refresh("rt-0", provider: provider, key: key) }
        #expect(script.sent.count == 2)
    }

    @Test func aTokenBoundToAKeyTheBrokerDidNotSendIsRefused() async throws {
        let script = Script([Self.tokens])
        let provider = try ProviderCallsAuthenticationTests.provider(.clientSecretBasic(Secret("s3cret", source: "test")))
        do {
            _ = try await Self.calls(script).refresh("rt-0", provider: provider)
            Issue.record("a bound token without a proof was taken")
        } catch {
            // Refused, and handed back to be revoked.
            guard case .unusableTokens(_, let tokens) = error, tokens.boundToKey else { throw error }
        }
        #expect(script.sent.first?.value(forHTTPHeaderField: "DPoP") == nil)
    }

    @Test func userinfoSendsTheBoundTokenWithItsHashAndAnswersTheResourcesNonceChallenge() async throws {
        let key = try ProofSigningKey.generate()
        let challenge = UpstreamResponse(status: 401, contentType: "application/json", body: [],
                                         headers: [("WWW-Authenticate", #"DPoP error="use_dpop_nonce", error_description="nonce""#), ("DPoP-Nonce", "r-1")])
        let profile = UpstreamResponse(status: 200, contentType: "application/json", body: Array(#"{"sub":"alice"}"#.utf8))
        let script = Script([challenge, profile])
        let endpoint = URL(string: "https://api.idp.example/userinfo?schema=openid")!
        let raw = try await Self.calls(script).userinfo(accessToken: "at-1", endpoint: endpoint, method: "GET", provider: "idp", key: key)
        #expect(raw["sub"] == .string("alice"))
        let sent = script.sent
        try #require(sent.count == 2)
        #expect(sent.allSatisfy { $0.value(forHTTPHeaderField: "Authorization") == "DPoP at-1" })
        let claims = try Self.proof(sent[1], by: key).claims
        #expect(claims["ath"] == .string(SHA256.hash("at-1").withUnsafeBytes { Base64URL.encode($0) }))
        #expect(claims["htm"] == .string("GET") && claims["htu"] == .string("https://api.idp.example/userinfo"))
        #expect(claims["nonce"] == .string("r-1"))
    }

    @Test func noncesAreKeptPerOriginAndOnlyPrintableOnesAreLearnt() throws {
        let proofs = ProviderProofs(now: { Self.now })
        #expect(proofs.learn("n-1", from: "https://idp.example/token", resource: false))
        #expect(proofs.learn("n-1", from: "https://idp.example/par", resource: false), "a nonce given again is still one to retry with")
        #expect(!proofs.learn("bad\"nonce", from: "https://api.example/x", resource: true))
        #expect(!proofs.learn(nil, from: "https://api.example/x", resource: true))
        let key = try ProofSigningKey.generate()
        let claims = { (url: String) throws -> JSONValue in
            let text = try proofs.proof(key, method: "GET", url: url)
            return try JSONValue.parse(Base64URL.decode(text.split(separator: ".")[1])!)
        }
        #expect(try claims("https://idp.example/anything")["nonce"] == .string("n-1"))
        let resourceProof = try proofs.proof(key, method: "GET", url: "https://idp.example/userinfo", accessToken: "at")
        #expect(try JSONValue.parse(Base64URL.decode(resourceProof.split(separator: ".")[1])!)["nonce"] == nil,
                "the same origin as a resource has nonces of its own")
        #expect(try claims("https://api.example/x")["nonce"] == nil)
        #expect(try claims("https://idp.example/a?b=c#d")["htu"] == .string("https://idp.example/a"))
    }
}
