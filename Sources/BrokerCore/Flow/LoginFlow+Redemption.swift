import BrokerCrypto
import Logging
import WireValues

extension LoginFlow {
    /// Redeems a handoff code (``Handoff/redeem(_:)``, one change in the store): by the app it was
    /// issued to, with the same redirect URI and the PKCE verifier of the app's challenge, once.
    /// A new session is durable before its token is returned. A refusal spends nothing until the
    /// ``Handoff/refusalLimit``th, and is an audit event (someone other than the app has the
    /// code). Redeemed again by a request that could have redeemed it, the code has leaked with
    /// its verifier: the session it released ends, here and at the provider, before the answer
    /// (RFC 6749 §4.1.2).
    func redeem(_ request: HandoffRedemptionRequest) async throws(HandoffRefusal) -> RedeemedSession {
        // Before the code is touched: a malformed verifier is the client's mistake, not a guess.
        guard PKCE.isWellFormed(request.verifier) else { throw .malformedVerifier }
        let token = OpaqueToken.make(prefix: OpaqueToken.sessionPrefix)
        let attempt = HandoffAttempt(app: request.app, redirectURI: request.redirectURI, verifier: request.verifier,
                                     sessionID: OpaqueToken.hash(token), keyThumbprint: request.keyThumbprint, issuer: request.issuer, at: now())
        let transition: Transition<HandoffRedemption>
        do {
            transition = try await store.redeemHandoff(OpaqueToken.hash(request.code), attempt)
        } catch {
            throw .unsaved
        }
        // What the step ended (a replayed code's session, a spent code's grant) is revoked at the
        // provider before the answer: whoever holds the code may hold its tokens.
        await endings.announceAndRevoke(transition.ended)
        switch transition.answer {
        case .unknown, .spent(.expired):
            metrics.rejected(route: "/token", reason: "unknown_handoff_code")
            metrics.handoffRedemption(outcome: "unknown")
            throw .unknownCode
        case .spent(.refusedTooOften):
            metrics.handoffRedemption(outcome: "rejected")
            throw .refusedTooOften
        case .spent(.signedOut):
            metrics.handoffRedemption(outcome: "rejected")
            throw .signedOut
        case .refused(let refusal):
            if refusal == .wrongVerifier { metrics.rejected(route: "/token", reason: "wrong_code_verifier") }
            if refusal == .wrongKey { metrics.rejected(route: "/token", reason: HolderMismatch.otherKey.reason) }
            metrics.handoffRedemption(outcome: "rejected")
            endings.audit.record("handoff_code.refused", [("app", .string(request.app)), ("reason", .string(refusal.auditReason))])
            throw refusal
        case .replayed:
            metrics.rejected(route: "/token", reason: "replayed_handoff_code")
            metrics.handoffRedemption(outcome: "replayed")
            logger.warning("handoff code replayed with its verifier; the session it released was ended")
            throw .replayed
        case .released(let signIn):
            metrics.handoffRedemption(outcome: "redeemed")
            guard let session = transition.made else { throw .unsaved }
            logger.notice("sign-in completed", metadata: SignInLog.metadata(signIn, [
                "provider": "\(session.provider)", "app": "\(session.app)", "session": "\(session.id.hex)",
            ]))
            return RedeemedSession(session: session, token: token)
        case .merged(let id):
            metrics.handoffRedemption(outcome: "redeemed")
            // Incremental authorization: the grant is in the app's session already.
            let found: Session?
            do {
                found = try await store.findSession(id, now: attempt.at)
            } catch {
                throw .unsaved
            }
            guard let session = found else { throw .sessionGone }
            return RedeemedSession(session: session, token: nil)
        }
    }
}

extension HandoffRefusal {
    /// The reason a refused redemption's audit line gives (docs/operations.md).
    fileprivate var auditReason: String {
        switch self {
        case .wrongVerifier: "wrong_verifier"
        case .wrongKey: "wrong_key"
        case .wrongIssuer: "wrong_issuer"
        case .boundSessionAtIssuer: "bound_session_at_issuer"
        default: "wrong_client"
        }
    }
}
