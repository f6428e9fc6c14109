import BrokerCrypto
import WireValues

/// A resource server's client assertion (`private_key_jwt`: RFC 7523 §2.2 and §3, RFC 7521 §4.2),
/// checked: a compact JWS signed by one of the server's configured keys (`kid` names it when the
/// set has several), whose `iss` and `sub` are the server's id, whose `aud` names the broker
/// (its introspection endpoint or its public URL), which expires within five minutes and has not
/// expired, and which carries a `jti` (single use: the caller records ``replayID`` until
/// ``rememberUntil``).
struct ClientAssertionCheck: Sendable {
    /// The resource server it authenticates.
    let client: String
    /// What its `jti` is remembered by, so that it is accepted once.
    let replayID: SHA256Digest
    let rememberUntil: Double

    /// The longest lifetime accepted (`exp` from now): what the replay memory must cover.
    static let maximumLifetime = 300.0
    static let clockSkew = 10.0
    static let assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

    /// Why an assertion was refused, for the log (the client gets one sentence for them all).
    struct Refusal: Error, Sendable {
        let reason: String
    }

    init(_ assertion: String, keys: (String) -> [ResourceServerKey]?, audiences: Set<String>, now: Double) throws(Refusal) {
        guard assertion.utf8.count <= 8192 else { throw Refusal(reason: "longer than 8 KiB") }
        let segments = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count == 3, let headerBytes = Base64URL.decode(segments[0]), let claimBytes = Base64URL.decode(segments[1]),
              let signature = Base64URL.decode(segments[2]),
              let header = try? JSONValue.parse(headerBytes), case .object = header,
              let claims = try? JSONValue.parse(claimBytes), case .object = claims
        else { throw Refusal(reason: "not a compact JWS") }
        guard let issuer = claims["iss"]?.stringValue, claims["sub"]?.stringValue == issuer, let candidates = keys(issuer) else {
            throw Refusal(reason: "iss and sub do not name a resource server with keys")
        }
        guard header["crit"] == nil else { throw Refusal(reason: "crit names an extension the broker does not know") }
        let keyID = header["kid"]?.stringValue
        guard let alg = header["alg"]?.stringValue,
              let key = candidates.first(where: { $0.key.algorithm.rawValue == alg && (keyID == nil ? candidates.count == 1 : $0.keyID == keyID) })
        else { throw Refusal(reason: "no configured key of \(issuer) for its alg and kid") }
        guard key.key.isValid(signature, of: assertion[..<segments[2].startIndex].dropLast()) else {
            throw Refusal(reason: "the signature does not verify")
        }
        let named: [String] = switch claims["aud"] {
        case .string(let one)?: [one]
        case .array(let many)?: many.compactMap(\.stringValue)
        default: []
        }
        guard named.contains(where: audiences.contains) else { throw Refusal(reason: "aud does not name the broker's introspection endpoint") }
        guard let expiry = Self.seconds(claims["exp"]), expiry > now - Self.clockSkew, expiry <= now + Self.maximumLifetime else {
            throw Refusal(reason: "exp is missing, past, or more than five minutes ahead")
        }
        if let notBefore = Self.seconds(claims["nbf"]), notBefore > now + Self.clockSkew { throw Refusal(reason: "nbf is ahead") }
        guard let jti = claims["jti"]?.stringValue, !jti.isEmpty, jti.utf8.count <= 256 else { throw Refusal(reason: "jti is missing") }
        client = issuer
        replayID = SHA256.hash("client-assertion:\(issuer):\(jti)")
        rememberUntil = expiry + Self.clockSkew
    }

    private static func seconds(_ value: JSONValue?) -> Double? {
        switch value {
        case .int(let seconds)?: Double(seconds)
        case .double(let seconds)?: seconds
        default: nil
        }
    }
}
