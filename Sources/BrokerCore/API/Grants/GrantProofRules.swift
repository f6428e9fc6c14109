/// The key a grant binds a new session to (RFC 9449 §5), by the rules of the app that asks:
/// the request's proof's key, or none — unless the app requires DPoP (`dpop: required`); with
/// the nonce the app may ask for (`dpop_nonce`, §8).
struct GrantProofRules: Sendable {
    let callers: Callers

    /// The key a new session of `app` is bound to: the proof's, else none.
    func thumbprint(of proof: DPoPProof?, for app: String) throws(GrantRefusal) -> String? {
        guard let proof else {
            if callers.apps[app]?.dpop == .required {
                throw .invalidProof("The app \(app) binds its sessions to a key: send a DPoP proof (RFC 9449) with the token request.",
                                    reason: DPoPProofError.missing.reason)
            }
            return nil
        }
        try requireNonce(proof, app: app)
        return proof.thumbprint
    }

    /// A refusal when `app` asks for nonces and `proof` has none the broker gave out lately.
    func requireNonce(_ proof: DPoPProof?, app: String) throws(GrantRefusal) {
        guard let proof, callers.nonceMissing(proof, app: app) else { return }
        throw .nonceRequired(nonce: callers.proofs.nonces.current(at: callers.now()))
    }
}
