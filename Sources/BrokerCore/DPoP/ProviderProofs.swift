import BrokerCrypto
import Foundation
import Synchronization
import WireValues

/// The DPoP proofs (RFC 9449 §4) the broker makes for its calls to providers whose tokens are
/// bound to a grant's key, and the nonces (§8, §9) those providers gave it: one per origin and
/// role — as an authorization server (PAR, token, revocation), as a resource (userinfo, the API)
/// —, the last one it sent, used in every proof to it until it sends another. A call a provider
/// refused for want of a nonce is made once more with it.
final class ProviderProofs: Sendable {
    /// Origins (per role) with a nonce kept; more are not learnt (providers' origins are the configuration's).
    static let maxOrigins = 256
    private let nonces = Mutex<[String: String]>([:])
    private let now: BrokerClock

    init(now: @escaping BrokerClock) {
        self.now = now
    }

    /// The `DPoP` header for `method` on `url` signed with `key`: `htu` is the URL without its
    /// query and fragment (§4.2), `ath` the hash of `accessToken` when the call carries one (a
    /// resource's, §7), `nonce` the one `url`'s origin gave last in that role.
    func proof(_ key: ProofSigningKey, method: String, url: String, accessToken: String? = nil) throws(CryptoError) -> String {
        var claims: [(String, JSONValue)] = [
            ("jti", .string(Base64URL.encode(SecureRandom.bytes(count: 16)))),
            ("htm", .string(method)),
            ("htu", .string(Self.target(of: url))),
            ("iat", .int(Int(now()))),
        ]
        if let accessToken { claims.append(("ath", .string(SHA256.hash(accessToken).withUnsafeBytes { Base64URL.encode($0) }))) }
        if let nonce = Self.slot(url, resource: accessToken != nil).flatMap({ slot in nonces.withLock { $0[slot] } }) {
            claims.append(("nonce", .string(nonce)))
        }
        let jwk = JSONValue.object([("crv", .string("P-256")), ("kty", .string("EC")), ("x", .string(key.x)), ("y", .string(key.y))])
        let header = JSONValue.object([("typ", .string("dpop+jwt")), ("alg", .string("ES256")), ("jwk", jwk)])
        return try CompactJWS.make(header: header, claims: .object(claims)) { input throws(CryptoError) in try key.sign(input) }
    }

    /// Keeps the nonce an answer from `url` carried (its `DPoP-Nonce` header, on any answer), if
    /// it is one (§8.1: visible ASCII but `"` and `\`). Returns whether the answer gave one the
    /// next proof to that origin carries: a call refused for want of it is then worth making
    /// again, even when a call beside it learnt the same nonce first.
    @discardableResult
    func learn(_ nonce: String?, from url: String, resource: Bool) -> Bool {
        guard let nonce, !nonce.isEmpty, nonce.utf8.count <= 512,
              nonce.utf8.allSatisfy({ (0x21...0x7E).contains($0) && $0 != 0x22 && $0 != 0x5C }),
              let slot = Self.slot(url, resource: resource)
        else { return false }
        return nonces.withLock { nonces in
            if nonces[slot] == nil, nonces.count >= Self.maxOrigins { return false }
            nonces[slot] = nonce
            return true
        }
    }

    /// `url` without its query and fragment.
    static func target(of url: String) -> String {
        String(url.prefix { $0 != "?" && $0 != "#" })
    }

    /// Where a nonce of `url`'s origin is kept: a resource's apart from an authorization server's
    /// at the same origin.
    private static func slot(_ url: String, resource: Bool) -> String? {
        URL(string: url).flatMap(UpstreamClient.origin).map { (resource ? "resource " : "server ") + $0 }
    }

    /// Whether an answer asks for a nonce (§8: a token endpoint's 400 `use_dpop_nonce`; §9: a
    /// resource's 401 whose `WWW-Authenticate` says it).
    static func asksForNonce(status: Int, body: [UInt8], authenticate: String?) -> Bool {
        switch status {
        case 400: (try? JSONValue.parse(body))?["error"]?.stringValue == "use_dpop_nonce"
        case 401: authenticate.map { $0.contains("use_dpop_nonce") } ?? false
        default: false
        }
    }
}
