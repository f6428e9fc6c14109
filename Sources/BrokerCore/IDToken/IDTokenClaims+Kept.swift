#if canImport(WireValues)
import WireValues
#endif

extension IDTokenClaims {
    /// Claims that only served the token's own checks (its issuer, audience, times, nonce and
    /// hashes): once it is verified they say nothing about the user, and no session keeps them.
    static let checkOnlyClaims: Set<String> = ["iss", "aud", "azp", "exp", "iat", "nbf", "auth_time", "nonce", "jti",
                                               "at_hash", "c_hash", "s_hash"]

    /// What a session keeps of the token, as JSON: the user's claims (`sub`, the profile, `sid`,
    /// `acr`, `amr` and the provider's own), without ``checkOnlyClaims`` — about half the bytes
    /// of a usual ID token, kept by every session.
    var kept: [UInt8] { Self.kept(raw) }

    static func kept(_ claims: JSONValue) -> [UInt8] {
        guard case .object(let members) = claims else { return claims.serialized() }
        return JSONValue.object(members.filter { !checkOnlyClaims.contains($0.0) }).serialized()
    }
}
