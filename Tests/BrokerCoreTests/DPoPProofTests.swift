import BrokerCrypto
import Foundation
import Testing
import WireValues

@testable import BrokerCore

/// DPoP proofs (RFC 9449 §4.3) as the broker checks them, with proofs jwskate made
/// (Resources/dpop, see make_vectors.py there): one per algorithm, for `GET
/// https://broker.example/token?x=1`, made at 1,700,000,000 for the token in the file.
struct DPoPProofTests {
    struct Vector {
        let algorithm: String
        let proof: String
        let thumbprint: String
    }

    static let vectors: (token: String, proofs: [Vector]) = {
        let url = Bundle.module.url(forResource: "proofs", withExtension: "json", subdirectory: "Resources/dpop")
            ?? Bundle.module.url(forResource: "proofs", withExtension: "json", subdirectory: "dpop")
        guard let url, let data = try? Data(contentsOf: url), let file = try? JSONValue.parse([UInt8](data)),
              let token = file["token"]?.stringValue, case .array(let entries)? = file["proofs"] else { return ("", []) }
        return (token, entries.compactMap { entry in
            guard let algorithm = entry["alg"]?.stringValue, let proof = entry["proof"]?.stringValue,
                  let thumbprint = entry["thumbprint"]?.stringValue else { return nil }
            return Vector(algorithm: algorithm, proof: proof, thumbprint: thumbprint)
        })
    }()

    static let issuedAt = 1_700_000_000.0
    static let url = ProofURL("https://broker.example/token")

    static func check(_ proof: String, method: String = "GET", url: ProofURL = url, token: String? = vectors.token,
                      now: Double = issuedAt + 30) throws(DPoPProofError) -> DPoPProof {
        try DPoPProof(proof, method: method, url: url, tokenHash: token.map { SHA256.hash($0) }, now: now, keys: ProofKeys())
    }

    static func refusal(_ body: () throws(DPoPProofError) -> DPoPProof) -> DPoPProofError? {
        do {
            _ = try body()
            return nil
        } catch {
            return error
        }
    }

    @Test
    func everyAcceptedAlgorithmHasAVector() {
        #expect(Self.vectors.proofs.map(\.algorithm) == DPoPProof.algorithms)
    }

    @Test
    func aProofOfEachAlgorithmChecksOutWithItsKeysThumbprint() throws {
        for vector in Self.vectors.proofs {
            let proof = try Self.check(vector.proof)
            #expect(proof.thumbprint == vector.thumbprint, "\(vector.algorithm)")
            #expect(proof.rememberUntil == Self.issuedAt + DPoPProof.acceptedAge + DPoPProof.clockSkew)
        }
    }

    @Test
    func theThumbprintIsRFC7638s() throws {
        // RFC 7638 §3.1's example key and thumbprint.
        let n = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
        let jwk = JSONValue.object([("kty", .string("RSA")), ("n", .string(n)), ("e", .string("AQAB")), ("alg", .string("RS256")),
                                    ("kid", .string("2011-04-29"))])
        #expect(try ProofKey(jwk, algorithm: .rs256).thumbprint == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs")
    }

    @Test
    func aProofIsForItsMethodItsURLItsTokenAndItsMinute() throws {
        let proof = try #require(Self.vectors.proofs.first).proof
        #expect(Self.refusal { () throws(DPoPProofError) in try Self.check(proof, method: "POST") } == .wrongMethod)
        #expect(Self.refusal { () throws(DPoPProofError) in try Self.check(proof, url: ProofURL("https://broker.example/session")) } == .wrongURL)
        #expect(Self.refusal { () throws(DPoPProofError) in try Self.check(proof, url: ProofURL("http://broker.example/token")) } == .wrongURL)
        #expect(Self.refusal { () throws(DPoPProofError) in try Self.check(proof, token: "tbs_another") } == .wrongTokenHash)
        #expect(Self.refusal { () throws(DPoPProofError) in try Self.check(proof, now: Self.issuedAt + DPoPProof.acceptedAge + 1) } == .stale)
        #expect(Self.refusal { () throws(DPoPProofError) in try Self.check(proof, now: Self.issuedAt - DPoPProof.clockSkew - 1) } == .stale)
        // Scheme and host are compared in lowercase, a default port left out; the query is not compared.
        _ = try Self.check(proof, url: ProofURL("HTTPS://Broker.Example:443/token"))
        _ = try Self.check(proof, url: ProofURL(base: ProofURL("https://broker.example"), path: "/token"))
        // ... and escapes as RFC 3986 §6.2.2 normalizes them: an unreserved character's decoded.
        _ = try Self.check(proof, url: ProofURL(base: ProofURL("https://broker.example"), path: "/t%6Fken"))
        // At a token endpoint, no token is presented: `ath` is not asked for.
        _ = try Self.check(proof, token: nil)
    }

    /// RFC 9449 §4.3 compares `htu` after syntax-based normalization (RFC 3986 §6.2.2): escapes
    /// of unreserved characters decoded, others' hexadecimal in capitals.
    @Test func escapesAreComparedNormalized() {
        let request = ProofURL(base: ProofURL("https://broker.example"), path: "/proxy/dev/user%69nfo/a%2fb")
        #expect(request.matches("https://broker.example/proxy/dev/userinfo/a%2Fb"))
        #expect(request.matches("https://broker.example/proxy/dev/user%69nfo/a%2fb"))
        #expect(!request.matches("https://broker.example/proxy/dev/userinfo/a/b"), "an escaped slash is not a slash")
        #expect(ProofURL.normalizedEscapes("/%7e%41%2f%zz%4") == "/~A%2F%zz%4")
    }

    @Test
    func aTamperedProofOrAKeyFromAnotherProofIsRefused() throws {
        let proofs = Self.vectors.proofs.map(\.proof)
        try #require(proofs.count >= 2)
        let parts = proofs[0].split(separator: ".").map(String.init)
        var signature = try #require(Base64URL.decode(parts[2]))
        signature[0] ^= 1
        let tampered = "\(parts[0]).\(parts[1]).\(Base64URL.encode(signature))"
        #expect(Self.refusal { () throws(DPoPProofError) in try Self.check(tampered) } == .badSignature)
        // The claims of one proof under the header and signature of another.
        let other = proofs[1].split(separator: ".").map(String.init)
        #expect(Self.refusal { () throws(DPoPProofError) in try Self.check("\(parts[0]).\(other[1]).\(parts[2])") } == .badSignature)
        #expect(Self.refusal { () throws(DPoPProofError) in try Self.check("\(parts[0]).\(parts[1])") } != nil)
        #expect(Self.refusal { () throws(DPoPProofError) in try Self.check(String(repeating: "a", count: DPoPProof.maximumBytes + 1)) } != nil)
    }

    @Test
    func aProofIsAcceptedOnceWithinItsWindow() throws {
        let proof = try Self.check(try #require(Self.vectors.proofs.first).proof)
        let span = DPoPProof.acceptedAge + DPoPProof.clockSkew
        let seen = ReplayMemory(now: Self.issuedAt, span: span)
        #expect(seen.firstHere(proof.replayID, now: Self.issuedAt + 1))
        #expect(!seen.firstHere(proof.replayID, now: Self.issuedAt + 2), "the same proof again")
        #expect(!seen.firstHere(proof.replayID, now: Self.issuedAt + span + 1), "remembered in the previous generation")
        #expect(seen.firstHere(proof.replayID, now: Self.issuedAt + 3 * span), "forgotten once outside every window")
    }

    @Test
    func aNonceLastsItsSlotAndTheNextOnEveryInstanceSharingTheStateKeys() throws {
        let keys = try StateKeys.parse(Data(repeating: 7, count: 32).base64EncodedString()).get()
        let nonces = DPoPNonces(binding: BrowserBinding(stateKeys: keys))
        let another = DPoPNonces(binding: BrowserBinding(stateKeys: keys))
        let start = 1_700_000_100.0
        let given = nonces.current(at: start)
        #expect(another.accepts(given, at: start), "another instance with the same keys")
        #expect(nonces.accepts(given, at: start + DPoPNonces.slotSeconds), "the next slot")
        #expect(!nonces.accepts(given, at: start + 2 * DPoPNonces.slotSeconds + 1), "two slots later")
        #expect(nonces.current(at: start + DPoPNonces.slotSeconds) != given, "a new nonce each slot")
        #expect(!nonces.accepts(nil, at: start) && !nonces.accepts("made-up", at: start))
        #expect(!DPoPNonces(binding: BrowserBinding(stateKeys: nil)).accepts(given, at: start), "other keys, other nonces")
    }

    @Test
    func aBoundSessionAnswersOnlyItsKey() throws {
        var session = Session(id: SHA256.hash("s"), provider: "idp", app: "web", subject: "alice", scopes: [], accessToken: "a",
                              accessTokenExpiresAt: nil, refreshToken: nil, idTokenClaims: nil, createdAt: 0, signedInAt: 0, usedAt: 0)
        let proofs = try Self.vectors.proofs.prefix(2).map { vector in try Self.check(vector.proof, token: nil) }
        try #require(proofs.count == 2)
        #expect(session.mismatch(.bearer) == nil && session.mismatch(proof: nil) == nil)
        #expect(session.mismatch(.proofOfKey) == .notBound && session.mismatch(proof: proofs[0]) == .notBound)
        session.keyThumbprint = proofs[0].thumbprint
        #expect(session.mismatch(.bearer) == .proofRequired && session.mismatch(proof: nil) == .proofRequired)
        #expect(session.mismatch(.proofOfKey) == nil, "the scheme fits; the proof is checked against the key next")
        #expect(session.mismatch(proof: proofs[1]) == .otherKey)
        #expect(session.mismatch(proof: proofs[0]) == nil)
    }
}
