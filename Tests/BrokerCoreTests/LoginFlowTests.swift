import BrokerCrypto
import Foundation
import Testing
import WireValues

@testable import BrokerCore

/// The login flow as a service (`LoginFlow`): begin, complete at the callback, redeem the
/// handoff code, merge an incremental grant — against an in-process provider, over the
/// in-memory store, with a clock the test moves.
struct LoginFlowTests {
    /// The demo app's redemption of `code` with `verifier`.
    private func redemption(_ code: String, _ verifier: String) -> HandoffRedemptionRequest {
        HandoffRedemptionRequest(code: code, verifier: verifier, redirectURI: FlowTestBed.redirectURI, app: FlowTestBed.app)
    }

    /// The handoff code of an incremental sign-in by `subject` adding `scopes` to `session`.
    private func incrementalCode(_ bed: FlowTestBed, _ session: Session, subject: String = "alice", scopes: [String], verifier: String) async throws -> String {
        let completion = try await bed.signIn(subject: subject, scopes: scopes, session: session, verifier: verifier)
        guard let code = completion.handoffCode else { throw ScriptError("no code: \(completion)") }
        return code
    }

    @Test(arguments: StoreKind.allCases)
    func aSignInBecomesASessionOnce(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let verifier = PKCE.makeVerifier()
            let completion = try await bed.signIn(verifier: verifier)
            guard case .app(let back, let outcome) = completion, case .handoff(let code) = outcome else { Issue.record("no code: \(completion)"); return }
            #expect(back.redirectURI == FlowTestBed.redirectURI)
            #expect(back.parameters(outcome).map(\.0) == ["code", "state"] && back.parameters(outcome).last?.1 == "app-state")
            let redemption = HandoffRedemptionRequest(code: code, verifier: verifier, redirectURI: FlowTestBed.redirectURI, app: FlowTestBed.app)
            let redeemed = try await bed.login.redeem(redemption)
            let token = try #require(redeemed.token)
            #expect(token.hasPrefix(OpaqueToken.sessionPrefix) && redeemed.session.id == OpaqueToken.hash(token))
            let stored = try #require((try await bed.stored(redeemed.session.id)))
            #expect(stored.subject == "alice" && stored.scopes == ["openid", "email"] && stored.app == FlowTestBed.app)
            #expect(bed.provider.accepts(stored.accessToken) && stored.refreshToken != nil)
            #expect(stored.idTokenClaims.map { String(decoding: $0, as: UTF8.self).contains(#""sub":"alice""#) } == true)
            await #expect(throws: HandoffRefusal.replayed) { try await bed.login.redeem(redemption) }
        }
    }

    @Test(arguments: StoreKind.allCases)
    func theAuthorizationURLCarriesTheBrokersOwnStatePKCEAndNonce(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let provider = try await bed.login.providers.resolve("idp")
            let url = try await bed.login.begin(bed.request(scopes: ["profile"], challenge: PKCE.challenge(for: PKCE.makeVerifier())), at: provider)
            #expect(url.hasPrefix("\(ScriptedProvider.issuer)/authorize?"))
            let query = try FormFields(parsing: url.split(separator: "?", maxSplits: 1)[1])
            #expect(query["redirect_uri"] == FlowTestBed.callbackURL && query["scope"] == "openid email profile")
            #expect(query["state"]?.hasPrefix(OpaqueToken.statePrefix) == true && query["nonce"] != nil)
            // The provider leg has its own verifier: the app's challenge never leaves the broker.
            #expect(query["code_challenge"] != "x" && query["code_challenge_method"] == "S256")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aLoginIsTakenOnceAndNotAfterItExpired(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let provider = try await bed.login.providers.resolve("idp")
            let challenge = PKCE.challenge(for: PKCE.makeVerifier())
            let (_, first) = try bed.provider.signIn(try await bed.login.begin(bed.request(challenge: challenge), at: provider), subject: "alice")
            #expect(try await bed.login.takeLogin(state: first) != nil)
            #expect(try await bed.login.takeLogin(state: first) == nil)
            let (_, second) = try bed.provider.signIn(try await bed.login.begin(bed.request(challenge: challenge), at: provider), subject: "alice")
            bed.clock.advance(by: bed.settings.loginLifetimeSeconds + 1)
            #expect(try await bed.login.takeLogin(state: second) == nil)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func anAnswerFromAnotherIssuerIsRefused(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let completion = try await bed.signIn(verifier: PKCE.makeVerifier(), issuer: "https://elsewhere.test")
            #expect(completion.refusal == LoginRefusal(error: "invalid_request", description: "The response came from another issuer."))
            #expect(bed.store.sessionCount == 0)
        }
    }

    /// A rule of the callback alone, not of the store: the embedded one.
    @Test func aProviderThatPromisesItsIssuerMustNameIt() async throws {
        // Without the promise an answer without iss is taken (RFC 9207 §2.4): DeviceFlowTests'
        // sign-ins send none. Here the same answer is refused, and one naming the issuer is taken.
        let bed = try await FlowTestBed(.embedded)
        try await bed.closing {
            bed.provider.promiseIssuerInResponses()
            let missing = try await bed.signIn(verifier: PKCE.makeVerifier(), issuer: nil)
            #expect(missing.refusal == LoginRefusal(error: "invalid_request", description: "The provider's response did not name its issuer."))
            let wrong = try await bed.signIn(verifier: PKCE.makeVerifier(), issuer: "https://elsewhere.test")
            #expect(wrong.refusal == LoginRefusal(error: "invalid_request", description: "The response came from another issuer."))
            #expect(try await bed.signIn(verifier: PKCE.makeVerifier()).refusal == nil)
            #expect(bed.store.sessionCount == 0)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func anIDTokenForAnotherLoginIsRefused(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            bed.provider.forgeNextNonce("someone-elses-nonce")
            let completion = try await bed.signIn(verifier: PKCE.makeVerifier())
            #expect(completion.refusal == LoginRefusal(error: "server_error", description: "The provider's ID token is invalid."))
        }
    }

    @Test(arguments: StoreKind.allCases)
    func theProvidersErrorGoesToTheAppWhenWellFormed(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let provider = try await bed.login.providers.resolve("idp")
            for (error, expected) in [("access_denied", "access_denied"), ("bad\"code", "invalid_request")] {
                let url = try await bed.login.begin(bed.request(challenge: PKCE.challenge(for: PKCE.makeVerifier())), at: provider)
                let state = try bed.provider.signIn(url, subject: "alice").state
                let pending = try #require(try await bed.login.takeLogin(state: state))
                let completion = await bed.login.complete(pending, state: state, with: CallbackAnswer(code: nil, error: error, errorDescription: "No.", issuer: nil))
                #expect(completion.refusal?.error == expected)
            }
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aCodeWorksOnlyForItsAppRedirectAndVerifierAndOnlyInTime(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            func code(_ verifier: String) async throws -> String {
                guard let code = try await bed.signIn(verifier: verifier).handoffCode else { throw ScriptError("no code") }
                return code
            }
            let verifier = PKCE.makeVerifier()
            let cases: [(HandoffRedemptionRequest, HandoffRefusal)] = [
                (HandoffRedemptionRequest(code: try await code(verifier), verifier: verifier, redirectURI: FlowTestBed.redirectURI, app: "other"), .wrongClient),
                (HandoffRedemptionRequest(code: try await code(verifier), verifier: verifier, redirectURI: "com.example.app:/other", app: FlowTestBed.app), .wrongClient),
                (HandoffRedemptionRequest(code: try await code(verifier), verifier: PKCE.makeVerifier(), redirectURI: FlowTestBed.redirectURI, app: FlowTestBed.app), .wrongVerifier),
                (HandoffRedemptionRequest(code: "tbh_made-up", verifier: verifier, redirectURI: FlowTestBed.redirectURI, app: FlowTestBed.app), .unknownCode),
            ]
            for (request, refusal) in cases {
                await #expect(throws: refusal) { try await bed.login.redeem(request) }
            }
            let late = try await code(verifier)
            bed.clock.advance(by: bed.settings.handoffLifetimeSeconds + 1)
            await #expect(throws: HandoffRefusal.unknownCode) {
                try await bed.login.redeem(HandoffRedemptionRequest(code: late, verifier: verifier, redirectURI: FlowTestBed.redirectURI, app: FlowTestBed.app))
            }
            #expect(bed.store.sessionCount == 0)
            // A verifier that is not one (RFC 7636 §4.1) is said to be malformed, and leaves the code as it was.
            let kept = try await code(verifier)
            for malformed in ["short", verifier + "!", String(repeating: "a", count: 129)] {
                await #expect(throws: HandoffRefusal.malformedVerifier) {
                    try await bed.login.redeem(HandoffRedemptionRequest(code: kept, verifier: malformed, redirectURI: FlowTestBed.redirectURI, app: FlowTestBed.app))
                }
            }
            let redeemed = try await bed.login.redeem(HandoffRedemptionRequest(code: kept, verifier: verifier, redirectURI: FlowTestBed.redirectURI, app: FlowTestBed.app))
            #expect(redeemed.token != nil)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aReplayedCodeEndsItsSessionHereAndAtTheProvider(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let verifier = PKCE.makeVerifier()
            guard let code = try await bed.signIn(verifier: verifier).handoffCode else { Issue.record("no code"); return }
            let request = HandoffRedemptionRequest(code: code, verifier: verifier, redirectURI: FlowTestBed.redirectURI, app: FlowTestBed.app)
            let session = try await bed.login.redeem(request).session
            await #expect(throws: HandoffRefusal.replayed) { try await bed.login.redeem(request) }
            #expect((try await bed.stored(session.id)) == nil)
            #expect(bed.provider.revoked == [session.refreshToken, session.accessToken].compactMap { $0 }, "revoked before the answer")
            #expect(!bed.provider.accepts(session.accessToken))
        }
    }

    /// A replay by a request that could not have redeemed the code (no verifier: it only saw the
    /// code) ends nothing: otherwise anyone who saw a redeemed code could end its user's session.
    @Test(arguments: StoreKind.allCases)
    func aReplayWithoutTheVerifierEndsNothing(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let verifier = PKCE.makeVerifier()
            guard let code = try await bed.signIn(verifier: verifier).handoffCode else { Issue.record("no code"); return }
            let session = try await bed.login.redeem(redemption(code, verifier)).session
            await #expect(throws: HandoffRefusal.wrongVerifier) { try await bed.login.redeem(redemption(code, PKCE.makeVerifier())) }
            await #expect(throws: HandoffRefusal.wrongClient) {
                try await bed.login.redeem(HandoffRedemptionRequest(code: code, verifier: verifier, redirectURI: FlowTestBed.redirectURI, app: "other"))
            }
            #expect((try await bed.stored(session.id)) != nil)
            #expect(bed.provider.revoked.isEmpty && bed.provider.accepts(session.accessToken))
        }
    }

    /// An incremental sign-in's code names the app's session from the start. Refused (a wrong
    /// verifier: someone who saw it), it spends nothing: the app redeems it afterwards. Redeemed
    /// first once expired, it released nothing, and the app's redemption after it ends nothing.
    @Test(arguments: StoreKind.allCases)
    func anIncrementalCodeRefusedFirstIsStillTheApps(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession(subject: "alice").session
            let verifier = PKCE.makeVerifier()
            let code = try await incrementalCode(bed, session, scopes: ["calendar"], verifier: verifier)
            await #expect(throws: HandoffRefusal.wrongVerifier) { try await bed.login.redeem(redemption(code, PKCE.makeVerifier())) }
            #expect(try await bed.login.redeem(redemption(code, verifier)).session.id == session.id)
            #expect((try await bed.stored(session.id))?.scopes == ["openid", "email", "calendar"])
            #expect(bed.audit.events("handoff_code.refused").map { $0["reason"] } == ["wrong_verifier"], "the refusal is in the audit trail")

            let late = try await incrementalCode(bed, session, scopes: ["drive"], verifier: verifier)
            bed.clock.advance(by: bed.settings.handoffLifetimeSeconds + 1)
            await #expect(throws: HandoffRefusal.unknownCode) { try await bed.login.redeem(redemption(late, PKCE.makeVerifier())) }
            await #expect(throws: HandoffRefusal.unknownCode) { try await bed.login.redeem(redemption(late, verifier)) }
            #expect((try await bed.stored(session.id)) != nil)
            await bed.endings.revocations.deliverDue()
            #expect(bed.provider.revoked.isEmpty, "an incremental code holds no grant of its own: the session has it")
        }
    }

    /// A code tried first at another provider's issuer (a client following the wrong metadata) is
    /// refused before it is spent: redeemed then at its own, it is no replay, and the session it
    /// stands for, the app's since before, goes on.
    @Test(arguments: StoreKind.allCases)
    func aCodeTriedAtAnotherIssuerIsStillTheApps(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession(subject: "alice").session
            let verifier = PKCE.makeVerifier()
            let code = try await incrementalCode(bed, session, scopes: ["calendar"], verifier: verifier)
            var elsewhere = redemption(code, verifier)
            elsewhere.issuer = "other"
            await #expect(throws: HandoffRefusal.wrongIssuer) { try await bed.login.redeem(elsewhere) }
            var here = redemption(code, verifier)
            here.issuer = "idp"
            #expect(try await bed.login.redeem(here).session.id == session.id)
            #expect((try await bed.stored(session.id))?.scopes == ["openid", "email", "calendar"], "the session goes on")

            let fresh = PKCE.makeVerifier()
            guard let new = try await bed.signIn(subject: "bob", verifier: fresh).handoffCode else { Issue.record("no code"); return }
            var misdirected = redemption(new, fresh)
            misdirected.issuer = "other"
            await #expect(throws: HandoffRefusal.wrongIssuer) { try await bed.login.redeem(misdirected) }
            let redeemed = try await bed.login.redeem(redemption(new, fresh))
            #expect(redeemed.token != nil && redeemed.session.subject == "bob")
            #expect(bed.audit.events("handoff_code.refused").map { $0["reason"] } == ["wrong_issuer", "wrong_issuer"])
            await bed.endings.revocations.deliverDue()
            #expect(bed.provider.revoked.isEmpty, "nothing ended")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func anIncrementalGrantMergesIntoTheSessionOfTheSameUserOnly(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession(subject: "alice").session
            let verifier = PKCE.makeVerifier()
            let redeemed = try await bed.login.redeem(redemption(try await incrementalCode(bed, session, scopes: ["calendar"], verifier: verifier), verifier))
            #expect(redeemed.token == nil && redeemed.session.id == session.id)
            #expect(redeemed.session.scopes == ["openid", "email", "calendar"] && redeemed.session.accessToken != session.accessToken)

            let other = try await bed.signIn(subject: "mallory", scopes: ["drive"], session: redeemed.session, verifier: verifier)
            #expect(other.refusal == LoginRefusal(error: "access_denied", description: "A different account signed in than the session's."))
            #expect((try await bed.stored(session.id))?.scopes == ["openid", "email", "calendar"])
            await bed.endings.revocations.deliverDue()
            #expect(bed.provider.revoked.count == 2, "mallory's grant, which landed nowhere, is revoked")
            #expect(bed.audit.events("session.ended").map { $0["reason"] } == ["not_held"])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func anIncrementalGrantForAnEndedSessionIsRefused(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession().session
            let provider = try await bed.login.providers.resolve("idp")
            let url = try await bed.login.begin(bed.request(scopes: ["calendar"], session: session, challenge: PKCE.challenge(for: PKCE.makeVerifier())), at: provider)
            let (code, state) = try bed.provider.signIn(url, subject: "alice")
            _ = try await bed.sessions.end(session.id, .revoked)
            let pending = try #require(try await bed.login.takeLogin(state: state))
            let completion = await bed.login.complete(pending, state: state, with: CallbackAnswer(code: code, error: nil, errorDescription: nil, issuer: nil))
            #expect(completion.refusal == LoginRefusal(error: "access_denied", description: "The session ended during the sign-in."))
            let revokedBefore = bed.provider.revoked.count
            await bed.endings.revocations.deliverDue()
            #expect(bed.provider.revoked.count == revokedBefore + 2, "the grant the sign-in brought landed nowhere and is revoked")
        }
    }
}
