import HTTPServer

extension GrantRefusal {
    /// The token endpoint's answer (RFC 6749 §5.2; RFC 9449 §5 and §8 for proofs; RFC 8628 §3.5
    /// for devices).
    var httpError: HTTPError {
        switch self {
        case .invalidGrant(let description): .badRequest(description, code: "invalid_grant")
        case .invalidScope(let description): .badRequest(description, code: "invalid_scope")
        case .invalidProof(let description, _): .badRequest(description, code: "invalid_dpop_proof")
        case .nonceRequired(let nonce): .useNonce(nonce, status: 400)
        case .handoff(let refusal): refusal.httpError
        case .device(let refusal): refusal.httpError
        case .refresh(let failure): failure.httpError
        case .unreadable(let error): error.httpError
        case .unsaved(let error): error.httpError
        }
    }
}
