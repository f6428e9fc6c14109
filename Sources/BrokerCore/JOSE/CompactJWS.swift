import BrokerCrypto
import WireValues

/// A JWS the broker signs, in compact serialisation (RFC 7515 §7.1): the protected header and
/// the claims, each compact JSON in base64url, then the signature of the two joined by a dot.
/// Client assertions, the development provider's tokens and DPoP proofs are made so.
enum CompactJWS {
    static func make(header: JSONValue, claims: JSONValue, sign: (String) throws(CryptoError) -> [UInt8]) throws(CryptoError) -> String {
        let signingInput = Base64URL.encode(header.serialized()) + "." + Base64URL.encode(claims.serialized())
        return signingInput + "." + Base64URL.encode(try sign(signingInput))
    }
}
