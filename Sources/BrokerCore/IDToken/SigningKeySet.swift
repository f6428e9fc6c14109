import BrokerCrypto
#if canImport(WireValues)
import WireValues  // JSONValue lives there in the broker; in a package without it, BrokerCore has it
#endif

/// The keys of one provider's JWKS document that can check an ID token's signature.
///
/// Keys the verifier cannot use are left out when the document is read, not refused one token
/// at a time: symmetric keys (`kty: oct`), encryption keys (`use: enc`, or `key_ops` without
/// `verify`), keys declaring a non-signature or unknown `alg`, unknown types and curves, and
/// key material libcrypto cannot build.
struct SigningKeySet: Sendable {
    let keys: [SigningKey]

    /// Reads a JWKS document (RFC 7517 §5). `host` only names the source in an error.
    static func parse(_ body: [UInt8], host: String) throws(IDTokenError) -> SigningKeySet {
        guard let document = try? JSONValue.parse(body), case .array(let entries)? = document["keys"] else {
            throw .jwksUnavailable("the key set from \(host) is not a JSON object with a keys array")
        }
        return SigningKeySet(keys: entries.compactMap(usableKey))
    }

    /// The key that checks a token with this `kid` and `alg`, or nil when there is none.
    ///
    /// A token without `kid` is accepted only against a set of exactly one key (OpenID Connect
    /// Core §10.1 requires `kid` once there are several). Two keys may share a `kid` when their
    /// types differ (RFC 7517 §4.5), so the algorithm picks among them.
    func key(for keyID: String?, algorithm: SignatureAlgorithm) -> SigningKey? {
        guard let keyID else {
            return keys.count == 1 && keys[0].fits(algorithm) ? keys[0] : nil
        }
        return keys.first { $0.keyID == keyID && $0.fits(algorithm) }
    }

    private static func usableKey(_ entry: JSONValue) -> SigningKey? {
        guard let kty = entry["kty"]?.stringValue,
              let family = KeyFamily(kty: kty, crv: entry["crv"]?.stringValue)
        else { return nil }
        if let use = entry["use"], use.stringValue != "sig" { return nil }
        if let operations = entry["key_ops"] {
            guard case .array(let list) = operations, list.contains(.string("verify")) else { return nil }
        }
        var declared: SignatureAlgorithm?
        if let alg = entry["alg"] {
            guard let name = alg.stringValue, let algorithm = SignatureAlgorithm(rawValue: name),
                  algorithm.keyFamily == family
            else { return nil }
            declared = algorithm
        }
        if let kid = entry["kid"], kid.stringValue == nil { return nil }

        // Public members only: a set that publishes private parts by mistake must not become a
        // set of signing keys here. Base64url padding, which some providers write, is dropped.
        let members = JSONValue.object(["kty", "crv", "n", "e", "x", "y"].compactMap { name in
            entry[name].map { value in (name, value.stringValue.map { JSONValue.string(String($0.prefix { $0 != "=" })) } ?? value) }
        })
        // Built once now, so broken material (a point off the curve, a bad modulus) drops that
        // key here instead of failing every token signed with it later.
        guard let probe = declared ?? SignatureAlgorithm.representative(of: family),
              let built = SigningKey.verificationKey(members, probe)
        else { return nil }
        return SigningKey(keyID: entry["kid"]?.stringValue, family: family, declaredAlgorithm: declared, members: members, built: built)
    }
}

/// One usable public key from a provider's key set.
struct SigningKey: Sendable {
    /// The key's `kid`; nil when the set gave it none.
    let keyID: String?
    let family: KeyFamily
    /// The key's own `alg`, when the set states one: then only that algorithm may use it.
    let declaredAlgorithm: SignatureAlgorithm?
    /// The key's public JWK members.
    let members: JSONValue
    /// The key built for its declared algorithm (else its family's first): used for tokens of
    /// that algorithm; another algorithm of the family builds its own.
    let built: VerificationKey

    /// Whether a token signed with `algorithm` may be checked with this key.
    func fits(_ algorithm: SignatureAlgorithm) -> Bool {
        algorithm.keyFamily == family && (declaredAlgorithm == nil || declaredAlgorithm == algorithm)
    }

    /// Checks `token`'s signature with this key under `algorithm`, and returns its payload: a
    /// JSON object. The key checks that one algorithm alone (its digest and padding), whatever
    /// else the token says.
    func verifiedPayload(of token: String, algorithm: SignatureAlgorithm) throws(IDTokenError) -> JSONValue {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let signature = Base64URL.decode(parts[2]) else { throw .malformed }
        guard fits(algorithm),
              let key = built.algorithm == algorithm ? built : Self.verificationKey(members, algorithm),
              key.isValid(signature, of: token[token.startIndex..<parts[1].endIndex])
        else { throw .badSignature }
        guard let payload = Base64URL.decode(parts[1]), let claims = try? JSONValue.parse(payload), case .object = claims else {
            throw .malformed
        }
        return claims
    }

    /// The libcrypto key of `members` for `algorithm`, or nil when they make none.
    static func verificationKey(_ members: JSONValue, _ algorithm: SignatureAlgorithm) -> VerificationKey? {
        try? PublicJWK(members, algorithm: algorithm).key
    }
}
