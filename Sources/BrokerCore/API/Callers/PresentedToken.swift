import BrokerCrypto
import HTTPServer

/// A session token as a request presents it: `Authorization: Bearer <token>`, or
/// `Authorization: DPoP <token>` with the `DPoP` proof for this request (RFC 9449 §7.1), which is
/// checked once the session is found and bound (``Callers/admit(_:to:route:)``): a token
/// that names no session costs no signature check.
struct PresentedToken: Sendable {
    /// The token's hash: the session's id.
    let id: SHA256Digest
    /// For the DPoP scheme, the proof as sent (nil without a `DPoP` header) and the request it
    /// must be for.
    let claimed: ClaimedProof?

    var holder: SessionHolder { claimed == nil ? .bearer : .proofOfKey }
}

/// A DPoP proof as a request sent it, not yet checked, with what it must name.
struct ClaimedProof: Sendable {
    let text: String?
    let method: String
    let path: Substring
    /// The request has more than one `DPoP` header (RFC 9449 §4.3 refuses it).
    var several = false
}

extension Callers {
    /// The request's presented session token; a missing or malformed one is a 401 (RFC 6750 §3).
    func presentedToken(_ request: Request) throws(HTTPError) -> PresentedToken {
        let (id, scheme) = try sessionID(request)
        guard scheme == .dpop else { return PresentedToken(id: id, claimed: nil) }
        let text = request.header("DPoP")
        return PresentedToken(id: id, claimed: ClaimedProof(text: text, method: request.method, path: request.path,
                                                            several: text != nil && Self.hasSeveralProofs(request, first: text)))
    }

    /// Whether the request sent more `DPoP` headers than the one whose value is `first` (the
    /// joined values of one empty header are none).
    private static func hasSeveralProofs(_ request: Request, first: String?) -> Bool {
        (request.joinedHeader("DPoP") ?? "") != first
    }

    private static let severalProofs = DPoPProofError.malformed("the request carries more than one DPoP header")

    /// Whether `session` answers `presented`: the scheme fits its binding
    /// (``Session/mismatch(_:)``), and for a bound session the proof checks out for this request
    /// and is signed by its key (``checkedProof(_:tokenHash:boundTo:app:route:)``): a 401
    /// otherwise, counted under `route`. Returns the proof that the shared store must still
    /// record (``spendAnywhere(_:route:)``).
    /// The session is marked used (``StateStore/noteUse(_:now:)``) once admitted: a refused
    /// request, a copied token without its key, keeps no session alive.
    func admit(_ presented: PresentedToken, to session: Session, route: String) throws(HTTPError) -> DPoPProof? {
        if let mismatch = session.mismatch(presented.holder) { throw holderRefused(mismatch, route: route) }
        var unrecorded: DPoPProof?
        if let claimed = presented.claimed, let bound = session.keyThumbprint {
            unrecorded = try checkedProof(claimed, tokenHash: presented.id, boundTo: bound, app: session.app, route: route)
        }
        // A mark less than a minute old stands: the proxy's path takes the session's lock once.
        let at = now()
        if at - session.usedAt > Session.useMarkInterval { store.noteUse(session.id, now: at) }
        return unrecorded
    }

    /// `claimed` checked (``DPoPProof``) for the token whose hash is `tokenHash`, signed by the
    /// key `bound` names, with the nonce `app` may ask for, and new to this instance
    /// (``spendHere(_:app:route:)``); a 401 otherwise, counted under `route`. Returns the proof
    /// when the shared store must still record it.
    func checkedProof(_ claimed: ClaimedProof, tokenHash: SHA256Digest, boundTo bound: String, app: String, route: String) throws(HTTPError) -> DPoPProof? {
        let proof: DPoPProof
        do throws(DPoPProofError) {
            guard let text = claimed.text else { throw .missing }
            guard !claimed.several else { throw Self.severalProofs }
            proof = try proofs.check(text, method: claimed.method, path: claimed.path, tokenHash: tokenHash, now: now())
        } catch {
            metrics.rejected(route: route, reason: error.reason)
            throw .dpopRefused(error)
        }
        guard proof.thumbprint == bound else { throw holderRefused(.otherKey, route: route) }
        return try spendHere(proof, app: app, route: route)
    }

    /// The 401 for a token presented otherwise than its session is bound, counted under `route`.
    func holderRefused(_ mismatch: HolderMismatch, route: String) -> HTTPError {
        metrics.rejected(route: route, reason: mismatch.reason)
        return .holderRefused(mismatch)
    }

    /// A 401 when `proof` lacks the nonce its app asks for (``nonceMissing(_:app:)``) or was
    /// accepted by this instance before (``ReplayMemory``); else the proof when the store the
    /// instances share must still record it.
    private func spendHere(_ proof: DPoPProof, app: String, route: String) throws(HTTPError) -> DPoPProof? {
        if nonceMissing(proof, app: app) {
            metrics.rejected(route: route, reason: DPoPProofError.nonceRequired.reason)
            throw .useNonce(proofs.nonces.current(at: now()), status: 401)
        }
        guard proofs.replay.firstHere(proof.replayID, now: now()) else {
            metrics.rejected(route: route, reason: DPoPProofError.replayed.reason)
            throw .dpopRefused(.replayed)
        }
        return store.holdsEverySession ? nil : proof
    }

    /// Records `proof` in the store the instances share, where ``admit(_:to:route:)`` left it to
    /// do: a 401 when another instance accepted it already, a 503 when the store is out of reach.
    func spendAnywhere(_ proof: DPoPProof?, route: String) async throws(HTTPError) {
        guard let proof, try await !firstAnywhere(proof) else { return }
        metrics.rejected(route: route, reason: DPoPProofError.replayed.reason)
        throw .dpopRefused(.replayed)
    }

    /// Whether `proof` is new to every instance sharing the store (always, with the embedded
    /// store, which serves one instance), recording it there; a 503 when the store is out of reach.
    func firstAnywhere(_ proof: DPoPProof) async throws(HTTPError) -> Bool {
        guard !store.holdsEverySession else { return true }
        do throws(StateWriteError) {
            return try await ReplayMemory.firstAnywhere(proof.replayID, until: proof.rememberUntil, in: store)
        } catch {
            throw error.httpError
        }
    }

    /// Whether `app` asks for nonces (`dpop_nonce`) and `proof` has no nonce the broker gave out
    /// lately.
    func nonceMissing(_ proof: DPoPProof, app: String) -> Bool {
        apps[app]?.dpopNonce == true && !proofs.nonces.accepts(proof.nonce, at: now())
    }

    /// The key a token request proves it holds (RFC 9449 §5): its `DPoP` proof checked for this
    /// request and new to this instance (the grant asks the store, ``firstAnywhere(_:)``); nil
    /// without one. A bad proof is a 400 `invalid_dpop_proof`.
    func tokenRequestProof(_ request: Request) throws(HTTPError) -> DPoPProof? {
        guard let text = request.header("DPoP") else { return nil }
        do throws(DPoPProofError) {
            guard !Self.hasSeveralProofs(request, first: text) else { throw Self.severalProofs }
            let proof = try proofs.check(text, method: request.method, path: request.path, tokenHash: nil, now: now())
            guard proofs.replay.firstHere(proof.replayID, now: now()) else { throw .replayed }
            return proof
        } catch {
            metrics.rejected(route: request.route, reason: error.reason)
            throw .badRequest(error.description, code: "invalid_dpop_proof")
        }
    }
}

extension HTTPError {
    /// The challenge of a DPoP refusal (RFC 9449 §7.1), naming the algorithms accepted.
    private static func dpopChallenge(_ error: String) -> HTTPHeader {
        HTTPHeader("WWW-Authenticate", #"DPoP error="\#(error)", algs="\#(DPoPProof.algorithmNames)""#)
    }

    /// 401 for a proof that does not do.
    static func dpopRefused(_ error: DPoPProofError) -> HTTPError {
        HTTPError(status: 401, code: "invalid_dpop_proof", description: error.description, headers: [dpopChallenge("invalid_dpop_proof")])
    }

    /// A proof without the nonce its app asks for (RFC 9449 §8, §9): 400 at a token endpoint,
    /// 401 elsewhere, with the nonce to use in `DPoP-Nonce`.
    static func useNonce(_ nonce: String, status: Int) -> HTTPError {
        HTTPError(status: status, code: "use_dpop_nonce", description: DPoPProofError.nonceRequired.description,
                  headers: (status == 401 ? [dpopChallenge("use_dpop_nonce")] : []) + [HTTPHeader("DPoP-Nonce", nonce)])
    }

    /// 401 `invalid_token` for a token bound to a key, with the DPoP challenge.
    static func dpopInvalidToken(_ description: String) -> HTTPError {
        HTTPError(status: 401, code: "invalid_token", description: description, headers: [dpopChallenge("invalid_token")])
    }

    /// 401 `invalid_token` for a token sent in the DPoP scheme that is no session's: both
    /// challenges, Bearer first (RFC 9449 §7.2, a resource server that takes both schemes). A
    /// DPoP challenge alone reads to requests-oauth2client as a demand for a nonce, and it raises
    /// instead of answering the 401.
    static func unknownInDPoPScheme(_ description: String) -> HTTPError {
        HTTPError(status: 401, code: "invalid_token", description: description,
                  headers: [HTTPHeader("WWW-Authenticate", #"Bearer error="invalid_token""#), dpopChallenge("invalid_token")])
    }

    /// 401 for a token presented other than as its session is bound.
    static func holderRefused(_ mismatch: HolderMismatch) -> HTTPError {
        switch mismatch {
        case .proofRequired:
            dpopInvalidToken("The session token is bound to a key: send it as Authorization: DPoP <token> with a DPoP proof.")
        case .notBound:
            .invalidToken("The session token is bound to no key: send it as Authorization: Bearer <token>.")
        case .otherKey:
            dpopRefused(.otherKey)
        }
    }
}
