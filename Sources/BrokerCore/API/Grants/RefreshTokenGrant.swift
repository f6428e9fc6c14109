import HTTPServer
import WireValues

/// RFC 6749 §6: the refresh token is the session token; the answer is the session's current
/// access token, refreshed at the provider when due (``SessionOperations/fresh(_:validFor:)``,
/// with the refresher's single-flight), and the same refresh token. A public client's refresh
/// token names its app, so `client_id` may be left out (requests-oauthlib sends none); one that
/// names another app is refused. A refresh token bound to a key (DPoP) needs a proof of it.
final class RefreshTokenGrant: GrantType {
    static let type = "refresh_token"
    static let limitedPerAddress = false
    let sessions: SessionOperations
    let rules: GrantProofRules

    init(sessions: SessionOperations, rules: GrantProofRules) {
        self.sessions = sessions
        self.rules = rules
    }

    struct Parameters: Sendable {
        let token: String
        let scope: [String]?
        let client: String?
    }

    static func parameters(_ form: FormFields, client: TokenClient) throws(HTTPError) -> Parameters {
        Parameters(token: try form.required("refresh_token"),
                   scope: try form.optional("scope").map { $0.split(separator: " ").map(String.init) }, client: client.id)
    }

    func grant(_ refresh: Parameters, at provider: String?, proof: DPoPProof?) async throws(GrantRefusal) -> RedeemedSession {
        let invalid = GrantRefusal.invalidGrant("The refresh token is unknown, expired or revoked, or was issued to another client.")
        guard refresh.token.hasPrefix(OpaqueToken.sessionPrefix) else { throw invalid }
        let found: Session?
        do throws(StateReadError) {
            found = try await sessions.store.findSession(OpaqueToken.hash(refresh.token), now: sessions.now())
        } catch {
            throw .unreadable(error)
        }
        guard let session = found, session.app == refresh.client ?? session.app, session.provider == provider ?? session.provider else { throw invalid }
        try rules.requireNonce(proof, app: session.app)
        // RFC 9449 §5: a bound refresh token is used only with a proof of its key.
        switch session.mismatch(proof: proof) {
        case nil: break
        case .proofRequired: throw .invalidProof(DPoPProofError.missing.description, reason: DPoPProofError.missing.reason)
        case .otherKey: throw .invalidProof(DPoPProofError.otherKey.description, reason: HolderMismatch.otherKey.reason)
        case .notBound: throw .invalidProof("The refresh token is bound to no key: send no DPoP proof with it.", reason: HolderMismatch.notBound.reason)
        }
        if let scope = refresh.scope, !Set(scope).isSubset(of: session.scopes) {
            throw .invalidScope("scope may only name scopes the grant has.")
        }
        // A standard client's use of its session is this grant: it keeps the session alive.
        sessions.store.noteUse(session.id, now: sessions.now())
        do throws(RefreshFailure) {
            return RedeemedSession(session: try await sessions.fresh(session, validFor: sessions.refreshSkew), token: refresh.token)
        } catch {
            switch error {
            case .loginRequired, .gone: throw .invalidGrant("The provider no longer honours this sign-in; sign in again.")
            case .tooSoon, .failed, .unsaved: throw .refresh(error)
            }
        }
    }
}
