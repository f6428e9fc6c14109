import BrokerCrypto
public import Foundation
#if canImport(WireValues)
import WireValues
#endif

/// Verifies OpenID Connect ID tokens (Core §3.1.3.7) against a provider's published keys.
///
/// Checks, in this order, each failure with its own `IDTokenError`: the compact JWS shape; the
/// header's `alg` in the allowlist; its `kid` in the provider's key set (refetched once on a miss,
/// within the cache's rate limit); the signature (libcrypto, through BrokerCrypto); `iss`; `aud`; `azp`; `exp`; `iat`
/// and `nbf`; `nonce`. Safe for concurrent use.
public struct IDTokenVerifier: Sendable {
    /// The algorithms accepted when none are given: every asymmetric JWS algorithm.
    public static let defaultAlgorithms: Set<String> = Set(SignatureAlgorithm.allCases.map(\.rawValue))

    private let jwks: JWKSCache
    private let allowedAlgorithms: Set<SignatureAlgorithm>
    private let clockSkew: TimeInterval
    private let clock: BrokerClock

    /// A verifier that takes keys from `jwks`.
    ///
    /// - Parameters:
    ///   - allowedAlgorithms: JWS `alg` names to accept. Names other than the asymmetric ones
    ///     in `defaultAlgorithms` are dropped: `none` and the `HS*` family are never accepted,
    ///     whatever this set says.
    ///   - clockSkew: how far the provider's clock may differ from ours, for `exp`, `iat`, `nbf`.
    ///   - clock: the current time; tests move it.
    public init(
        jwks: JWKSCache,
        allowedAlgorithms: Set<String> = IDTokenVerifier.defaultAlgorithms,
        clockSkew: Duration = .seconds(60),
        clock: @escaping BrokerClock = systemClock
    ) {
        self.jwks = jwks
        self.allowedAlgorithms = Set(allowedAlgorithms.compactMap(SignatureAlgorithm.init(rawValue:)))
        self.clockSkew = clockSkew.seconds
        self.clock = clock
    }

    /// Verifies `token` as an ID token that `issuer` issued to `clientID`, and returns its claims.
    ///
    /// - Parameters:
    ///   - jwksURI: where `issuer` publishes its keys (`jwks_uri`).
    ///   - issuer: the issuer identifier the token's `iss` must equal exactly.
    ///   - clientID: the broker's client id at the provider, which `aud` must contain.
    ///   - nonce: the nonce sent with the authorization request; when given, the token must
    ///     carry the same. The broker's flows always send one.
    public func verify(
        _ token: String,
        jwksURI: URL,
        issuer: String,
        clientID: String,
        nonce: String?
    ) async throws(IDTokenError) -> IDTokenClaims {
        let claims = try IDTokenClaims(payload: try await verifiedPayload(token, jwksURI: jwksURI))
        try check(claims, issuer: issuer, clientID: clientID, nonce: nonce)
        return claims
    }

    /// The payload of `token` once its signature verifies with the key its header names in the
    /// key set at `jwksURI`, under an allowed algorithm: the compact JWS shape, the `alg`
    /// allowlist, the `kid` (refetched once on a miss), the signature. Nothing about the claims:
    /// also the first half of a logout token's verification (``LogoutTokenVerifier``).
    func verifiedPayload(_ token: String, jwksURI: URL) async throws(IDTokenError) -> JSONValue {
        let header = try CompactJWSHeader(of: token)
        guard let algorithm = SignatureAlgorithm(rawValue: header.algorithm), allowedAlgorithms.contains(algorithm)
        else { throw .algorithmNotAllowed(header.algorithm) }
        let key = try await jwks.key(for: header.keyID, algorithm: algorithm, at: jwksURI)
        return try key.verifiedPayload(of: token, algorithm: algorithm)
    }

    private func check(_ claims: IDTokenClaims, issuer: String, clientID: String, nonce: String?) throws(IDTokenError) {
        guard claims.issuer == issuer else { throw .wrongIssuer }
        guard claims.audience.contains(clientID) else { throw .wrongAudience }
        // Core §3.1.3.7 items 4 and 5: with several audiences `azp` must name us; when present at
        // all, it should name us too, and a token issued to another client is not ours to use.
        if claims.audience.count > 1, claims.authorizedParty == nil { throw .wrongAuthorizedParty }
        if let party = claims.authorizedParty, party != clientID { throw .wrongAuthorizedParty }

        let now = Date(timeIntervalSince1970: clock())
        guard now < claims.expiresAt.addingTimeInterval(clockSkew) else { throw .expired }
        if let issuedAt = claims.issuedAt, issuedAt > now.addingTimeInterval(clockSkew) {
            throw .issuedInTheFuture
        }
        if let notBefore = try claims.raw.optionalDate("nbf"), notBefore > now.addingTimeInterval(clockSkew) {
            throw .notYetValid
        }

        if let nonce, claims.nonce.map({ Self.constantTimeEqual($0, nonce) }) != true {
            throw .nonceMismatch
        }
    }

    /// Compares without an early exit, so the time taken does not tell how much matched.
    private static func constantTimeEqual(_ lhs: String, _ rhs: String) -> Bool {
        let left = Array(lhs.utf8)
        let right = Array(rhs.utf8)
        guard left.count == right.count else { return false }
        var difference: UInt8 = 0
        for index in left.indices { difference |= left[index] ^ right[index] }
        return difference == 0
    }
}
