/// How a request presents a session token: as a bearer token, or with the DPoP scheme, claiming
/// to hold the key the session is bound to (its proof is checked once the session is found:
/// ``Callers/admit(_:to:route:)``, so that a token naming no session costs no signature
/// check).
enum SessionHolder: Sendable, Equatable {
    case bearer
    case proofOfKey
}

/// Why a session does not answer a request's holder.
enum HolderMismatch: Error, Sendable, Equatable {
    /// The session is bound to a key and the token came as a bearer token.
    case proofRequired
    /// The token came with a proof, and the session is bound to no key.
    case notBound
    /// The proof was signed with another key than the session's.
    case otherKey

    /// The metrics reason of the refusal.
    var reason: String {
        self == .otherKey ? DPoPProofError.otherKey.reason : "dpop_binding_mismatch"
    }
}

extension Session {
    /// Whether the scheme a token came in fits the session: a bound session answers only the
    /// DPoP scheme (its proof still to be checked), an unbound one only bearers.
    func mismatch(_ holder: SessionHolder) -> HolderMismatch? {
        switch (keyThumbprint, holder) {
        case (nil, .bearer), (.some, .proofOfKey): nil
        case (nil, .proofOfKey): .notBound
        case (.some, .bearer): .proofRequired
        }
    }

    /// Whether a token request's checked `proof` (or none) fits the session: a bound refresh
    /// token needs a proof of its key (RFC 9449 §5), an unbound one none.
    func mismatch(proof: DPoPProof?) -> HolderMismatch? {
        switch (keyThumbprint, proof) {
        case (nil, nil): nil
        case (nil, .some): .notBound
        case (.some, nil): .proofRequired
        case (let bound?, let proof?): bound == proof.thumbprint ? nil : .otherKey
        }
    }
}
