import BrokerCrypto
import Foundation
import Logging
import Testing
import WireValues

@testable import BrokerCore

/// A provider's logout token ends the sessions it names, on both stores (on PostgreSQL, three
/// instances taking calls in turn): by `sub` every session of the user at that provider, by
/// `sid` those of that provider session; a replay — on another instance, and after the user
/// signed in again — ends nothing.
struct BackChannelLogoutTests {
    private func logout(_ bed: FlowTestBed) -> BackChannelLogout {
        BackChannelLogout(
            providers: bed.login.providers, verifier: LogoutTokenVerifier(signatures: bed.login.idTokens, clock: bed.clock.closure),
            store: bed.store, endings: bed.endings, audit: bed.endings.audit
        )
    }

    /// How many sessions signing out with `token` ended.
    private func ended(_ logout: BackChannelLogout, _ token: String) async throws -> Int {
        try await logout.logOut(token, provider: "idp").sessions.count
    }

    /// The store out of reach while the sessions are looked up: 503, and the token is not spent
    /// (it is spent once its work is done), so that the provider's retry of the same token ends
    /// them.
    @Test(arguments: StoreKind.allCases)
    func aTokenWhoseSessionsCouldNotBeEndedIsAcceptedWhenSentAgain(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        let store = bed.store
        let logout = logout(bed)
        let alice = try await bed.newSession(subject: "alice")
        let signOut = try await token(bed, jti: "jti-retried", sub: "alice")
        store.failNextSessionLookup()
        do throws(BackChannelLogout.Failure) {
            _ = try await logout.logOut(signOut, provider: "idp")
            Issue.record("ended sessions with the store out of reach")
        } catch {
            guard case .unavailable = error else { Issue.record("not a 503: \(error)"); return }
        }
        #expect(try await bed.stored(alice.session.id) != nil)
        #expect(try await ended(logout, signOut) == 1, "the retry is no replay")
        #expect(try await bed.stored(alice.session.id) == nil)
        #expect(await refusal(logout, signOut) == .replayed, "once it has done its work, it is spent")
        await bed.close()
    }

    private func token(_ bed: FlowTestBed, jti: String, sub: String? = nil, sid: String? = nil) async throws -> String {
        var claims: [(String, JSONValue)] = [
            ("iss", .string(ScriptedProvider.issuer)), ("aud", .string(ScriptedProvider.clientID)), ("iat", .int(Int(bed.clock.seconds))),
            ("jti", .string(jti)), ("events", .object([(LogoutTokenVerifier.event, .object([]))])),
        ]
        if let sub { claims.append(("sub", .string(sub))) }
        if let sid { claims.append(("sid", .string(sid))) }
        return try bed.provider.signed(.object(claims))
    }

    private func refusal(_ logout: BackChannelLogout, _ token: String) async -> LogoutTokenError? {
        do throws(BackChannelLogout.Failure) {
            _ = try await logout.logOut(token, provider: "idp")
            return nil
        } catch {
            guard case .refused(let reason) = error else { return nil }
            return reason
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aSubjectsSessionsEndOnceAndAReplayEndsNothing(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        let logout = logout(bed)
        let first = try await bed.newSession(subject: "alice")
        let second = try await bed.newSession(subject: "alice")
        let bob = try await bed.newSession(subject: "bob")
        let signOut = try await token(bed, jti: "jti-alice", sub: "alice")
        #expect(try await ended(logout, signOut) == 2)
        #expect(try await bed.stored(first.session.id) == nil)
        #expect(try await bed.stored(second.session.id) == nil)
        #expect(try await bed.stored(bob.session.id) != nil)
        bed.clock.advance(by: 1)
        let again = try await bed.newSession(subject: "alice")
        #expect(await refusal(logout, signOut) == .replayed, "on another instance, with the store's memory")
        #expect(try await bed.stored(again.session.id) != nil, "the replay ended nothing")
        #expect(bed.provider.accepts(first.session.accessToken), "left to the revocation queue: the provider is the caller")
        await bed.endings.revocations.deliverDue()
        #expect(!bed.provider.accepts(first.session.accessToken), "the queue revoked the tokens at the provider afterwards")
        await bed.close()
    }

    /// A logout delivered late, or retried after a 503, ends the sessions begun by its `iat` (and
    /// the clock skew), not a sign-in made after the logout.
    @Test(arguments: StoreKind.allCases)
    func aSignInAfterTheLogoutSurvivesItsLateDelivery(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        let logout = logout(bed)
        let before = try await bed.newSession(subject: "alice")
        let signOut = try await token(bed, jti: "jti-late", sub: "alice")
        bed.clock.advance(by: 120)
        let after = try await bed.newSession(subject: "alice")
        #expect(try await ended(logout, signOut) == 1)
        #expect(try await bed.stored(before.session.id) == nil)
        #expect(try await bed.stored(after.session.id) != nil)
        await bed.close()
    }

    @Test(arguments: StoreKind.allCases)
    func aProviderSessionEndsOnlyItsOwnSessions(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        let logout = logout(bed)
        let laptop = try await bed.newSession(subject: "alice")
        let phone = try await bed.newSession(subject: "alice")
        _ = try await bed.store.updateSession(laptop.session.id, under: nil) { $0.providerSessionID = "sid-laptop" }
        _ = try await bed.store.updateSession(phone.session.id, under: nil) { $0.providerSessionID = "sid-phone" }
        #expect(try await ended(logout, try await token(bed, jti: "jti-1", sid: "sid-laptop")) == 1)
        #expect(try await bed.stored(laptop.session.id) == nil)
        #expect(try await bed.stored(phone.session.id) != nil)
        #expect(try await ended(logout, try await token(bed, jti: "jti-2", sub: "bob", sid: "sid-phone")) == 0,
                "sub and sid must both match")
        #expect(try await bed.stored(phone.session.id) != nil)
        #expect(await refusal(logout, try await token(bed, jti: "jti-3")) == .noSubjectOrSession)
        #expect(try await bed.stored(phone.session.id) != nil)
        await bed.close()
    }
}
