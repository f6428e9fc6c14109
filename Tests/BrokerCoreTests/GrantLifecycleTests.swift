import BrokerCrypto
import Foundation
import Testing
import WireValues

@testable import BrokerCore

/// The lifecycle of a grant through the flows (docs/lifecycle.md), on both stores (PostgreSQL as
/// three instances taking the calls in turn): a sign-out — a provider's logout token, an admin's
/// end of the user — reaches the sign-ins under way (a code not yet redeemed, a device not yet
/// polled, a login still at the provider's page), every ending is announced once, and what the
/// provider does not confirm is revoked later, or given up and audited.
struct GrantLifecycleTests {
    /// The demo app's redemption of `code` with `verifier`.
    private func redemption(_ code: String, _ verifier: String) -> HandoffRedemptionRequest {
        HandoffRedemptionRequest(code: code, verifier: verifier, redirectURI: FlowTestBed.redirectURI, app: FlowTestBed.app)
    }

    /// A logout token of the scripted provider for `sub`, issued now.
    private func logoutToken(_ bed: FlowTestBed, sub: String) async throws -> String {
        try bed.provider.signed(.object([
            ("iss", .string(ScriptedProvider.issuer)), ("aud", .string(ScriptedProvider.clientID)), ("iat", .int(Int(bed.clock.seconds))),
            ("jti", .string(UUID().uuidString)), ("events", .object([(LogoutTokenVerifier.event, .object([]))])), ("sub", .string(sub)),
        ]))
    }

    /// Signs `sub` out as a back-channel logout does: what it ended.
    private func logOut(_ bed: FlowTestBed, sub: String) async throws -> GrantEndings.SignedOut {
        let logout = BackChannelLogout(providers: bed.login.providers,
                                       verifier: LogoutTokenVerifier(signatures: bed.login.idTokens, clock: bed.clock.closure),
                                       store: bed.store, endings: bed.endings, audit: bed.endings.audit)
        return try await logout.logOut(try await logoutToken(bed, sub: sub), provider: "idp")
    }

    /// Signs `subject` out as the admin API's `subjects/end` does: what it ended.
    private func endSubject(_ bed: FlowTestBed, _ subject: String) async throws -> SessionAdministration.Ended {
        try await SessionAdministration(store: bed.store, sessions: bed.sessions).endSubject(subject, at: "idp")
    }

    /// The two ways to sign a user out.
    enum SignOutKind: String, CaseIterable, Sendable {
        case backChannelLogout
        case admin
    }

    private static let cases = StoreKind.allCases.flatMap { store in SignOutKind.allCases.map { (store, $0) } }

    /// Signs `subject` out the `way` says: how many sign-ins under way it ended.
    private func signOut(_ bed: FlowTestBed, _ subject: String, _ way: SignOutKind) async throws -> Int {
        switch way {
        case .backChannelLogout: try await logOut(bed, sub: subject).signIns.count
        case .admin: try await endSubject(bed, subject).signedOut.signIns.count
        }
    }

    @Test(arguments: cases)
    func aCodeNotYetRedeemedEndsWithItsUsersSignOut(_ kind: StoreKind, _ way: SignOutKind) async throws {
        let bed = try await FlowTestBed(kind)
        let verifier = PKCE.makeVerifier()
        let code = try #require(try await bed.signIn(subject: "alice", verifier: verifier).handoffCode)
        let bobsVerifier = PKCE.makeVerifier()
        let bobsCode = try #require(try await bed.signIn(subject: "bob", verifier: bobsVerifier).handoffCode)
        #expect(try await signOut(bed, "alice", way) == 1)
        await #expect(throws: HandoffRefusal.signedOut) { try await bed.login.redeem(redemption(code, verifier)) }
        #expect(try await bed.login.redeem(redemption(bobsCode, bobsVerifier)).token != nil, "another user's sign-in goes on")
        await bed.endings.revocations.deliverDue()
        #expect(bed.provider.revoked.count == 2, "the grant the code held is revoked at the provider")
        let ended = bed.audit.events("session.ended")
        #expect(ended.map { $0["held_by"] } == ["handoff_code"] && ended.first?["subject"] == "alice")
        #expect(ended.first?["reason"] == (way == .admin ? "admin" : "backchannel_logout"))
        await bed.close()
    }

    @Test(arguments: cases)
    func aDeviceNotYetPolledEndsWithItsUsersSignOut(_ kind: StoreKind, _ way: SignOutKind) async throws {
        let bed = try await FlowTestBed(kind)
        let devices = bed.services.devices
        let codes = try await devices.start(app: FlowTestBed.app, provider: ScriptedProvider.config(), scopes: [])
        let waiting = try #require(try await devices.find(typed: codes.userCode))
        let started = try await devices.signIn(waiting, at: try await bed.login.providers.resolve("idp"))
        let (code, state) = try bed.provider.signIn(started.location, subject: "alice")
        let pending = try #require(try await bed.login.takeLogin(state: state))
        let completed = await bed.login.complete(pending, state: state, with: CallbackAnswer(code: code, error: nil, errorDescription: nil, issuer: nil))
        #expect(completed.refusal == nil)
        #expect(try await devices.confirm(OpaqueToken.hash(codes.deviceCode), state: state, approve: true))
        #expect(try await signOut(bed, "alice", way) == 1)
        await #expect(throws: DevicePollRefusal.signedOut) { try await devices.poll(deviceCode: codes.deviceCode, app: FlowTestBed.app) }
        #expect(bed.store.sessionCount == 0)
        await bed.endings.revocations.deliverDue()
        #expect(bed.provider.revoked.count == 2)
        await bed.close()
    }

    /// The user signed in at the provider, then signed out there (the logout token comes) while
    /// the browser was on its way back: the grant that comes back ends when it lands. A sign-in
    /// after the logout stands.
    @Test(arguments: StoreKind.allCases)
    func aLoginAtTheProvidersPageWhenItsUserSignsOutEndsWhenItComesBack(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        let provider = try await bed.login.providers.resolve("idp")
        let verifier = PKCE.makeVerifier()
        let url = try await bed.login.begin(bed.request(challenge: PKCE.challenge(for: verifier)), at: provider)
        let (code, state) = try bed.provider.signIn(url, subject: "alice")
        bed.clock.advance(by: 5)
        #expect(try await logOut(bed, sub: "alice").signIns.isEmpty, "nothing had landed yet")
        bed.clock.advance(by: 5)
        let pending = try #require(try await bed.login.takeLogin(state: state))
        let completion = await bed.login.complete(pending, state: state, with: CallbackAnswer(code: code, error: nil, errorDescription: nil, issuer: nil))
        #expect(completion.refusal == LoginRefusal(error: "access_denied", description: "You were signed out while signing in; sign in again."))
        await bed.endings.revocations.deliverDue()
        #expect(bed.provider.revoked.count == 2, "its grant is revoked")
        #expect(bed.audit.events("session.ended").map { $0["held_by"] } == ["handoff_code"])

        bed.clock.advance(by: 5)
        #expect(try await bed.newSession(subject: "alice").token != nil, "a sign-in after the logout stands")
        await bed.close()
    }

    /// An admin ends a user; the user signs in again at once, and the provider, which still has
    /// its own session for them, answers with that session's old `auth_time`: a sign-in begun
    /// after the admin's end, which stands.
    @Test(arguments: StoreKind.allCases)
    func aSignInBegunAfterAnAdminsEndStandsThoughTheProviderReusesItsSession(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        let firstSignIn = bed.clock.seconds
        let first = try await bed.newSession(subject: "alice")
        bed.clock.advance(by: 600)
        #expect(try await endSubject(bed, "alice").signedOut.sessions.count == 1)
        bed.clock.advance(by: 1)
        let provider = try await bed.login.providers.resolve("idp")
        let verifier = PKCE.makeVerifier()
        let url = try await bed.login.begin(bed.request(challenge: PKCE.challenge(for: verifier)), at: provider)
        let (code, state) = try bed.provider.signIn(url, subject: "alice", authenticatedAt: firstSignIn)
        let pending = try #require(try await bed.login.takeLogin(state: state))
        let completion = await bed.login.complete(pending, state: state, with: CallbackAnswer(code: code, error: nil, errorDescription: nil, issuer: nil))
        let handoff = try #require(completion.handoffCode, "refused: \(String(describing: completion.refusal))")
        #expect(try await bed.login.redeem(redemption(handoff, verifier)).session.id != first.session.id)
        await bed.close()
    }

    @Test(arguments: StoreKind.allCases)
    func everyEndingIsAnnouncedOnce(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        let verifier = PKCE.makeVerifier()
        let code = try #require(try await bed.signIn(subject: "alice", verifier: verifier).handoffCode)
        let replayed = try await bed.login.redeem(redemption(code, verifier))
        await #expect(throws: HandoffRefusal.replayed) { try await bed.login.redeem(redemption(code, verifier)) }
        await #expect(throws: HandoffRefusal.replayed) { try await bed.login.redeem(redemption(code, verifier)) }
        let revoked = try await bed.newSession(subject: "bob")
        #expect(try await bed.sessions.end(revoked.session.id, .revoked) == .succeeded)
        #expect(try await bed.sessions.end(revoked.session.id, .revoked) == nil)
        let refused = try await bed.newSession(subject: "carol")
        bed.provider.failNextRefresh(status: 400, body: #"{"error":"invalid_grant"}"#)
        do {
            _ = try await bed.sessions.refresh(refused.session.id, force: true, minimumValidity: 60)
            Issue.record("refreshed despite invalid_grant")
        } catch {
            guard case .loginRequired = error else { Issue.record("\(error)"); return }
        }
        let ended = bed.audit.events("session.ended")
        #expect(ended.map { $0["reason"] } == ["replayed_code", "revoked", "invalid_grant"])
        #expect(ended.map { $0["session"] } == [replayed.session.id.hex, revoked.session.id.hex, refused.session.id.hex])
        #expect(ended.allSatisfy { !$0.values.contains { $0.hasPrefix("at-") || $0.hasPrefix("rt-") || $0.hasPrefix("tbs_") } }, "never a token")
        await bed.close()
    }

    /// How a sign-in fails after the provider issued its tokens.
    enum RefusedTokens: String, CaseIterable, Sendable {
        /// The ID token is for another login (its nonce).
        case idTokenForAnotherLogin
        /// The tokens are of a type the broker does not know.
        case unknownTokenType
    }

    private static let refusals = StoreKind.allCases.flatMap { store in RefusedTokens.allCases.map { (store, $0) } }

    /// A sign-in that fails after the provider issued its tokens leaves no grant live there: its
    /// tokens are queued and revoked, and the ending is announced, with no subject (who signed in
    /// is not known, or not trusted).
    @Test(arguments: refusals)
    func aSignInRefusedAfterTheCodeExchangeRevokesItsTokens(_ kind: StoreKind, _ way: RefusedTokens) async throws {
        let bed = try await FlowTestBed(kind)
        switch way {
        case .idTokenForAnotherLogin: bed.provider.forgeNextNonce("someone-elses-nonce")
        case .unknownTokenType: bed.provider.nameNextTokenType("mac")
        }
        let completion = try await bed.signIn(subject: "alice", verifier: PKCE.makeVerifier())
        #expect(completion.refusal?.description == (way == .idTokenForAnotherLogin
            ? "The provider's ID token is invalid." : "The provider did not accept the sign-in."))
        #expect(bed.provider.accessTokensIssued == 1)
        await expectRevokedAndAnnounced(bed, subject: "")
        await bed.close()
    }

    /// A refresh's tokens the broker cannot use (of a type it does not know) are live at the
    /// provider all the same: revoked, the session keeping its own.
    @Test(arguments: StoreKind.allCases)
    func aRefreshsTokensOfAnUnknownTypeAreRevoked(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        let session = try await bed.newSession(subject: "bob").session
        bed.provider.nameNextTokenType("mac")
        do {
            _ = try await bed.sessions.refresh(session.id, force: true, minimumValidity: 60)
            Issue.record("refreshed with tokens of an unknown type")
        } catch {}
        await expectRevokedAndAnnounced(bed, subject: "bob")
        #expect(bed.provider.accepts(session.accessToken), "the session's own token stands")
        await bed.close()
    }

    /// The one grant that reached no holder: its two tokens revoked, one ending announced.
    private func expectRevokedAndAnnounced(_ bed: FlowTestBed, subject: String) async {
        await bed.endings.revocations.deliverDue()
        #expect(bed.provider.revoked.count == 2 && bed.provider.revoked.allSatisfy { !bed.provider.accepts($0) }, "\(bed.provider.revoked)")
        let ended = bed.audit.events("session.ended")
        #expect(ended.map { $0["reason"] } == ["not_held"] && ended.map { $0["held_by"] } == ["none"] && ended.map { $0["subject"] } == [subject])
    }

    /// A grant that reached no holder because the store was out of reach (a sign-in's callback
    /// during an outage) cannot be queued either: its provider, reachable, is asked at once, and
    /// what it does not confirm is queued as soon as the store takes it. Never left live.
    @Test(arguments: StoreKind.allCases)
    func aGrantTheStoreCouldNotQueueIsRevokedAtOnceOrQueuedLater(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        let asked = try await bed.newSession(subject: "alice").session
        let dropped = Grant(TokenResponse(accessToken: "at-dropped", expiresIn: 3600, refreshToken: "rt-dropped", scopes: nil, idToken: nil), provider: asked.provider,
                            subject: "alice", requestedScopes: asked.scopes, idTokenClaims: nil, at: bed.clock.seconds)
        bed.store.failRevocationQueueing(1)
        await bed.endings.drop(dropped, app: FlowTestBed.app)
        #expect(bed.provider.revoked == ["rt-dropped", "at-dropped"], "the provider was asked at once")
        #expect(bed.audit.events("session.ended").map { $0["held_by"] } == ["none"], "one ending, announced")

        let later = Grant(TokenResponse(accessToken: "at-later", expiresIn: 3600, refreshToken: "rt-later", scopes: nil, idToken: nil), provider: asked.provider,
                          subject: "alice", requestedScopes: asked.scopes, idTokenClaims: nil, at: bed.clock.seconds)
        bed.store.failRevocationQueueing(2)
        bed.provider.failRevocations(1)
        await bed.endings.drop(later, app: FlowTestBed.app)
        await bed.endings.revocations.deliverDue() // the store still out of reach: kept
        #expect(try await bed.store.countRevocations() == 0)
        await bed.endings.revocations.deliverDue() // the store back: queued, and delivered
        #expect(try await bed.store.countRevocations() == 0)
        #expect(bed.provider.revoked.suffix(2) == ["rt-later", "at-later"], "revoked once the store took it")
        await bed.close()
    }

    @Test(arguments: StoreKind.allCases)
    func aRevocationTheProviderDoesNotConfirmIsTriedAgainUntilItDoes(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        let session = try await bed.newSession().session
        bed.provider.failRevocations(3)
        #expect(try await bed.sessions.end(session.id, .revoked) == .queued, "the provider is down: the client is told it is queued")
        #expect(bed.provider.accepts(session.accessToken))
        await bed.endings.revocations.deliverDue()
        #expect(try await bed.store.countRevocations() == 1, "not due again before its backoff")
        for attempt in 1...2 {
            bed.clock.advance(by: QueuedRevocation.backoff(after: attempt))
            await bed.endings.revocations.deliverDue()
        }
        #expect(!bed.provider.accepts(session.accessToken))
        #expect(Set(bed.provider.revoked) == Set([session.refreshToken, session.accessToken].compactMap { $0 }) && bed.provider.revoked.count == 2,
                "each token revoked once: one confirmed is not asked again")
        #expect(try await bed.store.countRevocations() == 0)
        await bed.close()
    }

    @Test(arguments: StoreKind.allCases)
    func aRevocationStillRefusedPastItsTimeIsGivenUpAndAudited(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind, settings: SessionSettings(revocationRetrySeconds: 600))
        let session = try await bed.newSession().session
        bed.provider.failRevocations(1000)
        #expect(try await bed.sessions.end(session.id, .revoked) == .queued)
        var attempts = 1
        while try await bed.store.countRevocations() > 0, attempts < 20 {
            bed.clock.advance(by: QueuedRevocation.backoff(after: attempts))
            await bed.endings.revocations.deliverDue()
            attempts += 1
        }
        #expect(try await bed.store.countRevocations() == 0, "given up")
        let abandoned = bed.audit.events("revocation.abandoned")
        #expect(abandoned.count == 1 && abandoned.first?["reason"] == "revoked" && abandoned.first?["provider"] == "idp")
        #expect(bed.provider.accepts(session.accessToken), "never confirmed")
        await bed.close()
    }
}
