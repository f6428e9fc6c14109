import BrokerCrypto
import Logging

extension LoginFlow {
    /// Redeems a handoff code: once, by the app it was issued to, with the same redirect URI and
    /// the PKCE verifier of the app's challenge. A new session is durable before its token is
    /// returned. A code redeemed twice, both times by requests that could redeem it, has leaked
    /// with its verifier: the session it released ends, here and at the provider, where its first
    /// redeemer's access token would otherwise keep working (RFC 6749 §4.1.2). A request that
    /// could not (no verifier) ends nothing, first or again.
    func redeem(_ request: HandoffRedemptionRequest) async throws(HandoffRefusal) -> RedeemedSession {
        // Before the code is touched: a malformed verifier is the client's mistake, not a guess.
        guard PKCE.isWellFormed(request.verifier) else { throw .malformedVerifier }
        let codeID = OpaqueToken.hash(request.code)
        let at = now()
        let redemption: HandoffRedemption
        do {
            redemption = try await store.redeemHandoff(codeID, now: at) { handoff in
                guard handoff.app == request.app, handoff.redirectURI == request.redirectURI else { return .wrongClient }
                guard PKCE.verify(verifier: request.verifier, challenge: handoff.appChallenge) else { return .wrongVerifier }
                return nil
            }
        } catch {
            throw .unsaved
        }
        let handoff: Handoff
        switch redemption {
        case .unknown, .expired:
            metrics.rejected(route: "/token", reason: "unknown_handoff_code")
            metrics.handoffRedemption(outcome: "unknown")
            throw .unknownCode
        case .replayed(let sessionID):
            if let sessionID {
                let removed: Session?
                do {
                    removed = try await store.removeSession(sessionID)
                } catch {
                    throw .unsaved
                }
                if let removed {
                    profiles.remove(sessionID)
                    await revokeReplayed(removed.provider, accessToken: removed.accessToken, refreshToken: removed.refreshToken)
                }
            }
            metrics.rejected(route: "/token", reason: "replayed_handoff_code")
            metrics.handoffRedemption(outcome: "replayed")
            throw .replayed
        case .refused(let refusal):
            if refusal == .wrongVerifier { metrics.rejected(route: "/token", reason: "wrong_code_verifier") }
            metrics.handoffRedemption(outcome: "rejected")
            throw refusal
        case .fresh(let found):
            handoff = found
        }
        metrics.handoffRedemption(outcome: "redeemed")
        guard let grant = handoff.grant else {
            // Incremental authorization: the grant is already in the app's session.
            guard let sessionID = handoff.sessionID else { throw .sessionGone }
            let found: Session?
            do {
                found = try await store.findSession(sessionID, now: at)
            } catch {
                throw .unsaved
            }
            guard let session = found else { throw .sessionGone }
            return RedeemedSession(session: session, token: nil)
        }
        let token = OpaqueToken.make(prefix: OpaqueToken.sessionPrefix)
        let session = Session(id: OpaqueToken.hash(token), app: handoff.app, grant: grant, at: at)
        let kept: Bool
        do {
            kept = try await store.saveSession(session, createdBy: codeID)
        } catch {
            throw .unsaved
        }
        guard kept else {
            // The code was replayed while this session was being made: it has leaked.
            do {
                _ = try await store.removeSession(session.id)
            } catch {
                throw .unsaved
            }
            await revokeReplayed(grant.provider, accessToken: grant.accessToken, refreshToken: grant.refreshToken)
            throw .replayed
        }
        return RedeemedSession(session: session, token: token)
    }

    private func revokeReplayed(_ provider: String, accessToken: String, refreshToken: String?) async {
        let revocation = await revoker.revoke(provider, accessToken: accessToken, refreshToken: refreshToken)
        logger.warning("handoff code replayed; its session was revoked", metadata: ["provider_revocation": "\(revocation.rawValue)"])
    }
}
