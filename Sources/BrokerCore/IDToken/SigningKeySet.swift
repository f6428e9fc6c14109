import Foundation
import JWTKit
#if canImport(WireValues)
import WireValues  // JSONValue lives there in the broker; in a package without it, BrokerCore has it
#endif

/// The keys of one provider's JWKS document that can check an ID token's signature.
///
/// Keys the verifier cannot use are left out when the document is read, not refused one token
/// at a time: symmetric keys (`kty: oct`), encryption keys (`use: enc`, or `key_ops` without
/// `verify`), keys declaring a non-signature or unknown `alg`, unknown types and curves, and
/// key material jwt-kit cannot build.
struct SigningKeySet: Sendable {
    let keys: [SigningKey]

    /// Reads a JWKS document (RFC 7517 §5). `host` only names the source in an error.
    static func parse(_ body: [UInt8], host: String) async throws(IDTokenError) -> SigningKeySet {
        guard let document = try? JSONValue.parse(body), case .array(let entries)? = document["keys"] else {
            throw .jwksUnavailable("the key set from \(host) is not a JSON object with a keys array")
        }
        var keys: [SigningKey] = []
        for entry in entries {
            if let key = await usableKey(entry) { keys.append(key) }
        }
        return SigningKeySet(keys: keys)
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

    private static func usableKey(_ entry: JSONValue) async -> SigningKey? {
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
        let keyID = entry["kid"]?.stringValue

        // Public members only: a set that publishes private parts by mistake must not become a
        // set of signing keys here. jwt-kit wants a kid on every key it stores; a key without
        // one gets a placeholder that no token's kid is ever compared with (see `key(for:)`).
        var members = ["kty", "crv", "n", "e", "x", "y"].compactMap { name in entry[name].map { (name, $0) } }
        members.append(("kid", .string(keyID ?? "(no kid)")))
        guard let jwk = try? JSONDecoder().decode(JWK.self, from: Data(JSONValue.object(members).serialized()))
        else { return nil }
        let key = SigningKey(keyID: keyID, family: family, declaredAlgorithm: declared, jwk: jwk)

        // Build the key once now, so broken material (a point off the curve, a bad modulus)
        // drops that key here instead of failing every token signed with it later.
        guard let probe = declared ?? SignatureAlgorithm.representative(of: family),
              (try? await key.keyCollection(for: probe)) != nil
        else { return nil }
        return key
    }
}

/// One usable public key from a provider's key set.
struct SigningKey: Sendable {
    /// The key's `kid`; nil when the set gave it none.
    let keyID: String?
    let family: KeyFamily
    /// The key's own `alg`, when the set states one: then only that algorithm may use it.
    let declaredAlgorithm: SignatureAlgorithm?
    /// The key's public members as jwt-kit reads them.
    let jwk: JWK

    /// Whether a token signed with `algorithm` may be checked with this key.
    func fits(_ algorithm: SignatureAlgorithm) -> Bool {
        algorithm.keyFamily == family && (declaredAlgorithm == nil || declaredAlgorithm == algorithm)
    }

    /// Checks `token`'s signature with this key under `algorithm`, and returns its payload.
    ///
    /// The key collection holds this one key, bound to the token's algorithm, so jwt-kit can
    /// neither fall back to another key nor reuse a signer made for another algorithm.
    func verifiedPayload(of token: String, algorithm: SignatureAlgorithm) async throws(IDTokenError) -> JSONValue {
        do {
            let keys = try await keyCollection(for: algorithm)
            return try await keys.verify(token, as: SignedPayload.self).claims
        } catch let error as JWTError where error.errorType == .malformedToken {
            throw .malformed
        } catch {
            throw .badSignature
        }
    }

    /// A jwt-kit key collection holding this key alone, for `algorithm`.
    func keyCollection(for algorithm: SignatureAlgorithm) async throws -> JWTKeyCollection {
        var bound = jwk
        bound.algorithm = JWK.Algorithm(rawValue: algorithm.rawValue)
        let keys = JWTKeyCollection()
        try await keys.add(jwk: bound)
        return keys
    }
}
