/// Why a DPoP proof (RFC 9449 §4.3) was refused. Each reason is told to the client in the
/// error's description; none repeats the proof or a token.
enum DPoPProofError: Error, Sendable, Equatable {
    /// No `DPoP` header where the token or the app needs one.
    case missing
    /// Not a compact JWS, or a header or claim of the wrong shape.
    case malformed(String)
    /// `typ` is not `dpop+jwt`.
    case wrongType
    /// `alg` is `none`, symmetric or not one the broker checks.
    case unsupportedAlgorithm(String)
    /// The `jwk` header is not a key of the type `alg` needs.
    case keyMismatch(String)
    /// The `jwk` header carries a private member.
    case privateKey(String)
    /// The `jwk` header's key cannot be built: a point off its curve, an RSA modulus under 2048
    /// bits.
    case unusableKey
    /// The signature does not check out with the `jwk` header's key.
    case badSignature
    /// `htm` is not the request's method.
    case wrongMethod
    /// `htu` is not the request's URL.
    case wrongURL
    /// `iat` is outside the accepted window.
    case stale
    /// `ath` is missing, or not the hash of the presented token.
    case wrongTokenHash
    /// The `jti` was seen before within the window.
    case replayed
    /// The proof's key is not the key the token is bound to.
    case otherKey
    /// The app asks for nonces and the proof has none, or a stale one (RFC 9449 §8): the answer
    /// gives the current one in `DPoP-Nonce`.
    case nonceRequired

    /// What the client is told.
    var description: String {
        switch self {
        case .missing: "A DPoP proof is required: send it in the DPoP header."
        case .malformed(let what): "The DPoP proof is malformed: \(what)."
        case .wrongType: "The DPoP proof's typ must be dpop+jwt."
        case .unsupportedAlgorithm(let alg): "The DPoP proof's alg \(alg) is not accepted (use one of \(DPoPProof.algorithmNames))."
        case .keyMismatch(let alg): "The DPoP proof's jwk is not a public key for \(alg)."
        case .privateKey(let member): "The DPoP proof's jwk contains the private member \(member); send the public key only."
        case .unusableKey: "The DPoP proof's jwk is no usable key (a point off its curve, or an RSA key under 2048 bits)."
        case .badSignature: "The DPoP proof's signature does not verify with its jwk."
        case .wrongMethod: "The DPoP proof's htm is not this request's method."
        case .wrongURL: "The DPoP proof's htu is not this request's URL."
        case .stale: "The DPoP proof's iat is too old or in the future; make a new proof for each request."
        case .wrongTokenHash: "The DPoP proof's ath is missing or is not the hash of the presented token."
        case .replayed: "The DPoP proof was used before; make a new proof (a new jti) for each request."
        case .otherKey: "The DPoP proof is signed with another key than the one the token is bound to."
        case .nonceRequired: "The DPoP proof must carry the nonce given in the DPoP-Nonce header."
        }
    }

    /// A metrics label for the refusal.
    var reason: String {
        switch self {
        case .missing: "dpop_proof_missing"
        case .replayed: "dpop_proof_replayed"
        case .otherKey: "dpop_key_mismatch"
        case .nonceRequired: "dpop_nonce_required"
        default: "dpop_proof_invalid"
        }
    }
}
