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

    /// The refusals that count.
    private static let counted: Set<String> = ["invalid_grant", "slow_down", "access_denied", "expired_token"]

    /// Carries `grant` out, its DPoP proof (if any) first recorded where the instances share
    /// them: the session, or the refusal as the endpoint answers it. A refusal that counts is
    /// charged to the client's budget, and one for the proof is counted under `route`.
    static func carryOut(_ grant: RequestedGrant, at provider: String?, proof: DPoPProof?, under limit: GrantLimit?, route: String,
                         _ callers: Callers) async throws(HTTPError) -> RedeemedSession {
        do throws(HTTPError) {
            if let proof, try await !callers.firstAnywhere(proof) {
                throw .badRequest(DPoPProofError.replayed.description, code: "invalid_dpop_proof")
            }
            do throws(GrantRefusal) {
                return try await grant.carryOut(provider, proof)
            } catch {
                throw error.httpError
            }
        } catch {
            if let limit, counted.contains(error.code) { limit.limiter.charge(limit.client, now: callers.now()) }
            if let reason = proofRefusals[error.code] { callers.metrics.rejected(route: route, reason: reason) }
            throw error
        }
    }

    /// The refusals of a grant's DPoP proof, and their metrics reasons.
    private static let proofRefusals = ["invalid_dpop_proof": "dpop_proof_invalid", "use_dpop_nonce": DPoPProofError.nonceRequired.reason]
}
