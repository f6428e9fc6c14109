/// How a request shows that it holds a session: its token alone (a bearer), or its token with a
/// DPoP proof signed by the key whose thumbprint is given (already checked against the request).
enum SessionHolder: Sendable, Equatable {
    case bearer
    case key(thumbprint: String)

    /// The holder of a request with `proof`, or without one.
    init(_ proof: DPoPProof?) {
        self = proof.map { .key(thumbprint: $0.thumbprint) } ?? .bearer
    }
}

/// Why a session does not answer a request's holder.
enum HolderMismatch: Error, Sendable, Equatable {
    /// The session is bound to a key and the token came as a bearer token.
    case proofRequired
    /// The token came with a proof, and the session is bound to no key.
    case notBound
    /// The proof was signed with another key than the session's.
    case otherKey
}

extension Session {
    /// Whether `holder` may use this session: a bound session answers only proofs of its key, an
    /// unbound one only bearers.
    func mismatch(_ holder: SessionHolder) -> HolderMismatch? {
        switch (keyThumbprint, holder) {
        case (nil, .bearer): nil
        case (nil, .key): .notBound
        case (.some, .bearer): .proofRequired
        case (let bound?, .key(let thumbprint)): bound == thumbprint ? nil : .otherKey
        }
    }
}
