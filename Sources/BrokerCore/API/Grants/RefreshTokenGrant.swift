import HTTPServer
import WireValues

/// RFC 6749 §6: the refresh token is the session token; the answer is the session's current
/// access token, refreshed at the provider when due (``SessionOperations/fresh(_:validFor:)``,
/// with the refresher's single-flight), and the same refresh token. A public client's refresh
/// token names its app, so `client_id` may be left out (requests-oauthlib sends none); one that
/// names another app is refused. A refresh token bound to a key (DPoP) needs a proof of it.
struct RefreshTokenGrant: GrantType {
    static let type = "refresh_token"
    static let limitedPerAddress = false
    let token: String
    let scope: [String]?
    let client: String?

    init(_ form: FormFields, client: TokenClient) throws(HTTPError) {
        token = try form.required("refresh_token")
        scope = try form.optional("scope").map { $0.split(separator: " ").map(String.init) }
        self.client = client.id
    }

    func grant(at provider: String?, proof: DPoPProof?, _ services: BrokerServices) async throws(HTTPError) -> RedeemedSession {
        let invalid = HTTPError.badRequest("The refresh token is unknown, expired or revoked, or was issued to another client.",
                                           code: "invalid_grant")
        guard token.hasPrefix(OpaqueToken.sessionPrefix) else { throw invalid }
        guard let session = try await services.load(OpaqueToken.hash(token)), session.app == client ?? session.app,
              session.provider == provider ?? session.provider else { throw invalid }
        try services.requireNonce(proof, app: session.app)
        // RFC 9449 §5: a bound refresh token is used only with a proof of its key.
        if let mismatch = session.mismatch(proof: proof) {
            throw .badRequest(mismatch == .notBound ? "The refresh token is bound to no key: send no DPoP proof with it."
                : DPoPProofError.otherKey.description, code: "invalid_dpop_proof")
        }
        if let scope, !Set(scope).isSubset(of: session.scopes) {
            throw .badRequest("scope may only name scopes the grant has.", code: "invalid_scope")
        }
        do throws(RefreshFailure) {
            return RedeemedSession(session: try await services.sessions.fresh(session, validFor: services.refreshSkew), token: token)
        } catch {
            switch error {
            case .loginRequired, .gone:
                throw .badRequest("The provider no longer honours this sign-in; sign in again.", code: "invalid_grant")
            case .tooSoon, .failed, .unsaved:
                throw error.httpError
            }
        }
    }
}
