import HTTPServer

/// The token endpoints' per-address limit (`token_requests_per_minute`), applied the same way
/// by every endpoint that carries out a grant: it counts the grants of a limited type refused
/// as `invalid_grant` — an unknown, expired, replayed or spent code, another client's, a wrong
/// PKCE verifier: what guessing looks like — and the device polls a device that follows RFC
/// 8628 gets at most once (`slow_down`: sooner than told; `access_denied`, `expired_token`:
/// polled again after being told to stop), and once an address has spent it, refuses that
/// address's grants of those types (429) until it refills. A grant carried out, or a device's
/// `authorization_pending`, never counts: a backend that redeems the codes of many users from
/// one address, or devices behind one address polling as told, spend nothing with codes that
/// work. Refusals are counted once their outcome is known, each of them
/// (``RateLimiter/charge(_:now:)``), so that guesses sent together while the budget had room
/// are all paid for.
struct GrantLimit: Sendable {
    private let limiter: RateLimiter
    private let client: String

    /// The limit `grant` is under for `request`'s client; nil when its type is not limited.
    /// Throws 429 (counted under the request's route) while the client's budget is spent.
    init?(_ grant: RequestedGrant, _ request: Request, _ admission: Admission) throws(HTTPError) {
        guard grant.limitedPerAddress else { return nil }
        try admission.refuseWhileSpent(request, in: admission.tokenLimiter)
        limiter = admission.tokenLimiter
        client = request.clientIP
    }

    /// Carries `grant` out, its DPoP proof (if any) first recorded where the instances share
    /// them: the session, or the refusal as the endpoint answers it. A refusal that looks like
    /// guessing is charged to the client's budget, and one of the proof is counted under `route`.
    static func carryOut(_ grant: RequestedGrant, at provider: String?, proof: DPoPProof?, under limit: GrantLimit?, route: String,
                         _ callers: Callers) async throws(HTTPError) -> RedeemedSession {
        if let proof, try await !callers.firstAnywhere(proof) {
            callers.metrics.rejected(route: route, reason: DPoPProofError.replayed.reason)
            throw .badRequest(DPoPProofError.replayed.description, code: "invalid_dpop_proof")
        }
        do throws(GrantRefusal) {
            return try await grant.carryOut(provider, proof)
        } catch {
            if let limit, error.looksLikeGuessing { limit.limiter.charge(limit.client, now: callers.now()) }
            if let reason = error.proofReason { callers.metrics.rejected(route: route, reason: reason) }
            throw error.httpError
        }
    }
}

extension GrantRefusal {
    /// What ``GrantLimit`` charges: a code or device code that does not work (`invalid_grant`),
    /// and what a device that follows RFC 8628 is told at most once (`slow_down`,
    /// `access_denied`, `expired_token`).
    var looksLikeGuessing: Bool {
        switch self {
        case .invalidGrant: true
        case .handoff(let refusal): refusal != .malformedVerifier && refusal != .unsaved
        case .device(let refusal):
            switch refusal {
            case .pending, .unsaved: false
            case .unknownCode, .used, .expired, .slowDown, .denied, .signedOut: true
            }
        case .invalidScope, .invalidProof, .nonceRequired, .refresh, .unreadable, .unsaved: false
        }
    }

    /// The metrics reason of a refusal of the request's DPoP proof.
    var proofReason: String? {
        switch self {
        case .invalidProof(_, let reason): reason
        case .nonceRequired: DPoPProofError.nonceRequired.reason
        default: nil
        }
    }
}
