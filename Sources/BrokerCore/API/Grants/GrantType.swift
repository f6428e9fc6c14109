import HTTPServer
import WireValues

/// One grant type a token endpoint offers (RFC 6749 §4.1.3 and §6, RFC 8628 §3.4). As
/// ory/fosite composes its token endpoint from a handler per grant type, every endpoint that
/// offers a grant uses its one type: the broker's `POST /token` and the standard
/// `/providers/{provider}/token` read, check and carry out a grant the same way, and differ only
/// in the grants they offer and in how they write the answer.
protocol GrantType: Sendable {
    /// The `grant_type` value.
    static var type: String { get }
    /// Whether the grant is under the token endpoints' per-address limit (``GrantLimit``). A
    /// refresh is not: a client refreshes when its token is due, and is never refused for it
    /// per address.
    static var limitedPerAddress: Bool { get }
    /// The grant's parameters from the token request's form, for the client it names.
    init(_ form: FormFields, client: TokenClient) throws(HTTPError)
    /// Carries the grant out at the issuer of `provider` (nil at the broker's own endpoint,
    /// which serves every provider), for a request that proved it holds the key of `proof`
    /// (DPoP, checked and new to every instance) or none: the session and the token its client
    /// is to hold.
    func grant(at provider: String?, proof: DPoPProof?, _ services: BrokerServices) async throws(HTTPError) -> RedeemedSession
}

/// The client a token request names, as its endpoint reads it: `app` or `client_id` at the
/// broker's `POST /token`; `client_id` or HTTP Basic at the standard endpoint.
struct TokenClient: Sendable {
    let id: String?
    /// The parameter that names it, for the error when a grant needs it and it is missing.
    let parameter: String

    /// The client, which the grant needs named.
    func required() throws(HTTPError) -> String {
        guard let id else { throw .badRequest("Missing required parameter \(parameter).") }
        return id
    }
}

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
    init?(_ grant: any GrantType, _ request: Request, _ services: BrokerServices) throws(HTTPError) {
        guard type(of: grant).limitedPerAddress else { return nil }
        try services.refuseWhileSpent(request, in: services.tokenLimiter)
        limiter = services.tokenLimiter
        client = request.clientIP
    }

    /// The refusals that count.
    private static let counted: Set<String> = ["invalid_grant", "slow_down", "access_denied", "expired_token"]

    /// Carries `grant` out, its DPoP proof (if any) first recorded where the instances share
    /// them; a refusal that counts is charged to the client's budget, and one for the proof is
    /// counted under `route`.
    static func carryOut(_ grant: any GrantType, at provider: String?, proof: DPoPProof?, under limit: GrantLimit?, route: String,
                         _ services: BrokerServices) async throws(HTTPError) -> RedeemedSession {
        do throws(HTTPError) {
            if let proof, try await !services.firstAnywhere(proof) {
                throw .badRequest(DPoPProofError.replayed.description, code: "invalid_dpop_proof")
            }
            return try await grant.grant(at: provider, proof: proof, services)
        } catch {
            if let limit, counted.contains(error.code) { limit.limiter.charge(limit.client, now: services.now()) }
            if let reason = proofRefusals[error.code] { services.metrics.rejected(route: route, reason: reason) }
            throw error
        }
    }

    /// The refusals of a grant's DPoP proof, and their metrics reasons.
    private static let proofRefusals = ["invalid_dpop_proof": "dpop_proof_invalid", "use_dpop_nonce": DPoPProofError.nonceRequired.reason]
}

/// The grants a token endpoint offers.
struct GrantTypes: Sendable {
    let offered: [any GrantType.Type]

    /// The grant the form's `grant_type` names, its parameters read; `unsupported_grant_type`
    /// for any other, with the ones offered.
    func grant(_ form: FormFields, client: TokenClient) throws(HTTPError) -> any GrantType {
        let type = try form.required("grant_type")
        for grant in offered where grant.type == type {
            return try grant.init(form, client: client)
        }
        throw .badRequest("grant_type must be one of: \(types.joined(separator: ", ")).", code: "unsupported_grant_type")
    }

    /// The `grant_type` values offered, in order.
    var types: [String] { offered.map { $0.type } }
}

extension BrokerServices {
    /// A granted session at the issuer of `provider`: one issued for another issuer's provider
    /// is not handed out, and a session it created is ended (a 503 when that cannot be saved: the
    /// session is then left to end by its lifetimes, nobody holding its token).
    func granted(_ granted: RedeemedSession, at provider: String?, refusal: String) async throws(HTTPError) -> RedeemedSession {
        guard let provider, granted.session.provider != provider else { return granted }
        if granted.token != nil {
            do throws(StateWriteError) {
                _ = try await sessions.endings.endSession(granted.session.id, .otherIssuer)
            } catch {
                throw error.httpError
            }
        }
        throw .badRequest(refusal, code: "invalid_grant")
    }
}

extension BrokerServices {
    /// The key a new session of `app` is bound to: the proof's, else none — unless the app
    /// requires DPoP (`dpop: required`), which is a 400 `invalid_dpop_proof`.
    func keyThumbprint(of proof: DPoPProof?, for app: String) throws(HTTPError) -> String? {
        guard let proof else {
            if config.app(id: app)?.dpop == .required {
                throw .badRequest("The app \(app) binds its sessions to a key: send a DPoP proof (RFC 9449) with the token request.",
                                  code: "invalid_dpop_proof")
            }
            return nil
        }
        try requireNonce(proof, app: app)
        return proof.thumbprint
    }

    /// A 400 `use_dpop_nonce` at a token endpoint when `app` asks for nonces and `proof` has
    /// none the broker gave out lately (RFC 9449 §8).
    func requireNonce(_ proof: DPoPProof?, app: String) throws(HTTPError) {
        guard let proof, nonceMissing(proof, app: app) else { return }
        throw .useNonce(proofs.nonces.current(at: now()), status: 400)
    }
}
