/// Why an ID token was refused.
///
/// A struct around a private enum, so that new reasons do not break callers. Descriptions are
/// short sentences, safe for logs and metric labels: they never contain the token or a claim's
/// value; the only thing taken from the token is an algorithm name, reduced to its first 16
/// letters, digits, `-`, `_` and `+`.
public struct IDTokenError: Error, Sendable, Equatable, CustomStringConvertible {
    private enum Kind: Sendable, Equatable {
        case malformed
        case algorithmNotAllowed(String)
        case unknownKey
        case badSignature
        case wrongIssuer
        case wrongAudience
        case wrongAuthorizedParty
        case expired
        case issuedInTheFuture
        case notYetValid
        case nonceMismatch
        case jwksUnavailable(String)
    }

    private let kind: Kind

    private init(_ kind: Kind) {
        self.kind = kind
    }

    /// Not a compact JWS with a JSON header and payload, or a required claim has the wrong type.
    public static let malformed = IDTokenError(.malformed)
    /// The header's `alg` is not in the verifier's allowlist (`none` and `HS*` never are).
    public static func algorithmNotAllowed(_ algorithm: String) -> IDTokenError {
        IDTokenError(.algorithmNotAllowed(Self.sanitized(algorithm)))
    }
    /// No usable key in the provider's key set has the token's `kid` and fits its `alg`, even
    /// after the refetch the rate limit allows.
    public static let unknownKey = IDTokenError(.unknownKey)
    /// The signature does not verify with the provider's key.
    public static let badSignature = IDTokenError(.badSignature)
    /// `iss` is not exactly the provider's issuer.
    public static let wrongIssuer = IDTokenError(.wrongIssuer)
    /// `aud` does not contain the broker's client id.
    public static let wrongAudience = IDTokenError(.wrongAudience)
    /// `azp` is missing although `aud` names several parties, or it names another client.
    public static let wrongAuthorizedParty = IDTokenError(.wrongAuthorizedParty)
    /// `exp` has passed, beyond the allowed clock skew.
    public static let expired = IDTokenError(.expired)
    /// `iat` lies in the future, beyond the allowed clock skew.
    public static let issuedInTheFuture = IDTokenError(.issuedInTheFuture)
    /// `nbf` lies in the future, beyond the allowed clock skew.
    public static let notYetValid = IDTokenError(.notYetValid)
    /// `nonce` is missing or differs from the one the broker sent.
    public static let nonceMismatch = IDTokenError(.nonceMismatch)
    /// The provider's key set could not be fetched or read; `reason` names the host, never a body.
    public static func jwksUnavailable(_ reason: String) -> IDTokenError {
        IDTokenError(.jwksUnavailable(reason))
    }

    /// True when the provider's key set could not be had: a provider fault (502/503), where
    /// every other reason is a bad token.
    public var isKeySetUnavailable: Bool {
        if case .jwksUnavailable = kind { return true }
        return false
    }

    /// One short sentence naming the reason, without the token or its claims.
    public var description: String {
        switch kind {
        case .malformed: "the ID token is not a well-formed signed JWT"
        case .algorithmNotAllowed(let name): "the ID token's signing algorithm \(name) is not allowed"
        case .unknownKey: "no key in the provider's key set matches the ID token's key id and algorithm"
        case .badSignature: "the ID token's signature does not verify"
        case .wrongIssuer: "the ID token was issued by another issuer"
        case .wrongAudience: "the ID token is not meant for this client"
        case .wrongAuthorizedParty: "the ID token's authorized party is missing or is another client"
        case .expired: "the ID token has expired"
        case .issuedInTheFuture: "the ID token's issue time is in the future"
        case .notYetValid: "the ID token is not valid yet"
        case .nonceMismatch: "the ID token's nonce does not match the authorization request"
        case .jwksUnavailable(let reason): "the provider's key set is unavailable: \(reason)"
        }
    }

    /// An algorithm name as it may appear in a description: at most 16 characters from the
    /// alphabet of real JWS algorithm names, so a hostile header cannot smuggle text into logs.
    private static func sanitized(_ name: String) -> String {
        let allowed = name.unicodeScalars.lazy.filter {
            ("A"..."Z").contains($0) || ("a"..."z").contains($0) || ("0"..."9").contains($0)
                || $0 == "-" || $0 == "_" || $0 == "+"
        }
        let text = String(String.UnicodeScalarView(allowed.prefix(16)))
        return text.isEmpty ? "(unnamed)" : text
    }
}
