import BrokerCrypto
import Foundation
import TestWaiting
import Testing
import WireValues

@testable import BrokerCore

/// The session operations as a service (`SessionOperations`): current token, refresh, revoke and
/// profile — against an in-process provider, over the in-memory store, with a clock the test moves.
struct SessionOperationsTests {
    /// What `GET /token` finds: the session in this instance's memory (the hot path), else — a
    /// shared store's cache miss — in the store. Another instance's change reaches this one's
    /// memory by a notification: with `expected`, that answer is awaited (``waitUntil(_:seconds:_:)``).
    private func current(_ bed: FlowTestBed, _ id: SHA256Digest, validFor validity: Double = 60, expected: String? = nil) async throws -> String {
        guard let expected else { return try await currentOnce(bed, id, validFor: validity) }
        var found = ""
        try await waitUntil("GET /token finds \(expected)") {
            found = try await currentOnce(bed, id, validFor: validity)
            return found == expected
        }
        return found
    }

    /// The decision `GET /token` takes: on the session in memory, else (a shared store's cache
    /// miss) the same decision on the session read from the store (``SessionOperations/currentLoaded(_:holder:validFor:)``).
    private func currentOnce(_ bed: FlowTestBed, _ id: SHA256Digest, validFor validity: Double) async throws -> String {
        let inMemory = bed.sessions.current(id, holder: .bearer, validFor: validity, { session, _ in session.accessToken })
        guard case .unknownSession = inMemory else { return Self.describe(inMemory) }
        guard !bed.store.holdsEverySession, let (session, decision) = try await bed.sessions.currentLoaded(id, holder: .bearer, validFor: validity)
        else { return "unknown" }
        if case .fresh = decision { return "fresh \(session.accessToken)" }
        return Self.describe(decision)
    }

    private static func describe<Answer>(_ decision: SessionOperations.CurrentToken<Answer>) -> String {
        switch decision {
        case .fresh(let token): "fresh \(token)"
        case .refreshDue(let early): early ? "refresh early" : "refresh due"
        case .wrongHolder(let mismatch): "wrong holder \(mismatch)"
        case .unknownSession: "unknown"
        }
    }

    @Test(arguments: StoreKind.allCases)
    func theCurrentTokenIsServedUntilItIsDueThenRefreshed(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession().session
            #expect(try await current(bed, session.id) == "fresh \(session.accessToken)")
            #expect(try await current(bed, OpaqueToken.hash("tbs_unknown")) == "unknown")
            #expect(try await current(bed, session.id, validFor: 86_400) == "refresh early", "asked before it is due (min_ttl)")
            bed.clock.advance(by: 3600 - 59)
            #expect(try await current(bed, session.id, validFor: 86_400) == "refresh due")
            #expect(try await current(bed, session.id) == "refresh due")
            let refreshed = try await bed.sessions.refresh(session.id, force: false, minimumValidity: 60)
            #expect(refreshed.accessToken != session.accessToken && refreshed.refreshToken != session.refreshToken)
            let expected = "fresh \(refreshed.accessToken)"
            #expect(try await current(bed, session.id, expected: expected) == expected && bed.provider.accepts(refreshed.accessToken))
        }
    }

    /// A shared store's cache miss (`GET /token` on an instance that does not hold the session in
    /// memory, as the PostgreSQL store here) takes the decision on the session read from the
    /// store, by the same rule as the memory; the embedded store's memory holds every session.
    @Test(arguments: StoreKind.allCases)
    func aCacheMissDecidesAsMemoryDoes(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession().session
            for (advance, validity, expected) in [(0.0, 60.0, "fresh \(session.accessToken)"), (0, 86_400, "refresh early"),
                                                   (3600 - 30, 86_400, "refresh due"), (0, 60, "refresh due")] {
                bed.clock.advance(by: advance)
                let (loaded, decision) = try #require(try await bed.sessions.currentLoaded(session.id, holder: .bearer, validFor: validity))
                let fromStore = if case .fresh = decision { "fresh \(loaded.accessToken)" } else { Self.describe(decision) }
                #expect(fromStore == expected, "after \(advance) s, valid for \(validity) s")
                if kind == .embedded {
                    let memory = bed.sessions.current(session.id, holder: .bearer, validFor: validity) { session, _ in session.accessToken }
                    #expect(Self.describe(memory) == expected)
                }
            }
            let (_, bound) = try #require(try await bed.sessions.currentLoaded(session.id, holder: .proofOfKey, validFor: 60))
            #expect(Self.describe(bound) == "wrong holder notBound")
            #expect(try await bed.sessions.currentLoaded(OpaqueToken.hash("tbs_unknown"), holder: .bearer, validFor: 60) == nil)
        }
    }

    /// The one way to a fresh token: the session as it is while its token is good for the asked
    /// validity, else refreshed once (concurrent callers share the refresh).
    @Test(arguments: StoreKind.allCases)
    func aFreshTokenIsTheSessionsWhileValidElseOneRefresh(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession().session
            #expect(try await bed.sessions.fresh(session, validFor: 60).accessToken == session.accessToken)
            #expect(try await currentOnce(bed, session.id, validFor: 86_400) == "refresh early", "a day's validity asked of a fresh token")
            #expect(try await currentOnce(bed, session.id, validFor: 60) == "fresh \(session.accessToken)")
            bed.clock.advance(by: 3600 - 30)
            #expect(try await currentOnce(bed, session.id, validFor: 86_400) == "refresh due", "due anyway: not early")
            let refreshed = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<8 { group.addTask { try await bed.sessions.fresh(session, validFor: 60).accessToken } }
                return try await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
            #expect(refreshed.count == 1 && !refreshed.contains(session.accessToken), "one refresh for every caller")
            #expect(bed.provider.accepts(try #require(refreshed.first)))
        }
    }

    /// A bed with one session whose access token has just expired: due for a refresh.
    private func sessionDue(_ kind: StoreKind) async throws -> (FlowTestBed, Session) {
        let bed = try await FlowTestBed(kind)
        let session = try await bed.newSession().session
        bed.clock.advance(by: 3600 + 1)
        return (bed, session)
    }

    /// While the next refresh is at the provider, a sign-in adding scopes (or another instance's
    /// refresh) replaces the session's access token, its refresh token when one is given, and
    /// adds `scopes`.
    private func replaceDuringNextRefresh(_ bed: FlowTestBed, _ session: Session, accessToken: String, refreshToken: String? = nil,
                                          scopes: [String] = []) {
        let store = bed.store
        bed.provider.duringNextRefresh {
            _ = try? await store.updateSession(session.id, under: nil) { replaced in
                replaced.accessToken = accessToken
                if let refreshToken { replaced.refreshToken = refreshToken }
                replaced.accessTokenExpiresAt = nil
                replaced.scopes += scopes
            }
        }
    }

    /// A refresh of `id` that the provider refuses with `invalid_grant`: "sign in again".
    private func expectLoginRequired(_ bed: FlowTestBed, _ id: SHA256Digest) async {
        bed.provider.failNextRefresh(status: 400, body: #"{"error":"invalid_grant"}"#)
        do {
            _ = try await bed.sessions.refresh(id, force: false, minimumValidity: 60)
            Issue.record("refreshed despite invalid_grant")
        } catch {
            guard case .loginRequired = error else { Issue.record("\(error)"); return }
        }
    }

    @Test(arguments: StoreKind.allCases)
    func onlyInvalidGrantEndsTheSession(_ kind: StoreKind) async throws {
        let (bed, session) = try await sessionDue(kind)
        try await bed.closing { () async throws in
            for (status, body) in [(400, #"{"error":"temporarily_unavailable"}"#), (500, #"{"error":"server_error"}"#), (401, #"{"error":"invalid_client"}"#)] {
                bed.provider.failNextRefresh(status: status, body: body)
                await #expect(throws: RefreshFailure.self) { try await bed.sessions.refresh(session.id, force: false, minimumValidity: 60) }
                #expect((try await bed.stored(session.id)) != nil, "ended by \(body)")
            }
            await expectLoginRequired(bed, session.id)
            #expect((try await bed.stored(session.id)) == nil)
        }
    }

    /// Signed out while its refresh was at the provider, which refused it: the session is gone
    /// either way, so the caller is told to sign in again (401), not to retry (503).
    @Test(arguments: StoreKind.allCases)
    func aRefreshRefusedForASessionEndedMeanwhileIsLoginRequired(_ kind: StoreKind) async throws {
        let (bed, session) = try await sessionDue(kind)
        try await bed.closing {
            let store = bed.store
            bed.provider.duringNextRefresh { _ = try? await store.endSession(session.id, .revoked, now: 0) }
            await expectLoginRequired(bed, session.id)
        }
    }

    /// The grant a refresh set out from was replaced while the provider answered (a sign-in
    /// adding scopes; another instance's refresh once this one's lease ran out): the replacing
    /// grant stands, and what the refresh brought is not revoked — a replaced grant's tokens are
    /// not (docs/lifecycle.md): at Google, revoking them would revoke the replacing ones too.
    @Test(arguments: StoreKind.allCases)
    func aRefreshWhoseGrantWasReplacedMeanwhileLeavesTheNewOne(_ kind: StoreKind) async throws {
        let (bed, session) = try await sessionDue(kind)
        try await bed.closing {
            replaceDuringNextRefresh(bed, session, accessToken: "at-replacing", refreshToken: "rt-replacing")
            let answered = try await bed.sessions.refresh(session.id, force: false, minimumValidity: 60)
            #expect(answered.accessToken == "at-replacing")
            #expect(try await bed.stored(session.id)?.refreshToken == "rt-replacing")
            await bed.endings.revocations.deliverDue()
            #expect(bed.provider.refreshes == 1 && bed.provider.revoked.isEmpty, "nothing revoked")
        }
    }

    /// A sign-in adding scopes that brought no refresh token of its own replaced the session's
    /// access token and scopes while a refresh ran: they stand, and the session takes the refresh
    /// token that refresh rotated (the one it held no longer works).
    @Test(arguments: StoreKind.allCases)
    func aRefreshOverlappingAMergeWithoutARefreshTokenKeepsTheMerge(_ kind: StoreKind) async throws {
        let (bed, session) = try await sessionDue(kind)
        try await bed.closing {
            replaceDuringNextRefresh(bed, session, accessToken: "at-merged", scopes: ["calendar"])
            let answered = try await bed.sessions.refresh(session.id, force: false, minimumValidity: 60)
            #expect(answered.accessToken == "at-merged" && answered.scopes.contains("calendar"), "the merge stands")
            let stored = try await bed.stored(session.id)
            #expect(stored?.scopes.contains("calendar") == true)
            #expect(stored?.refreshToken != session.refreshToken, "the rotated refresh token kept")
            bed.clock.advance(by: bed.settings.minRefreshIntervalSeconds + 1)
            let again = try await bed.sessions.refresh(session.id, force: true, minimumValidity: 60)
            #expect(again.accessToken != "at-merged", "and it works")
        }
    }

    /// The provider refused the refresh token a refresh used, which a sign-in adding scopes had
    /// replaced meanwhile: the session goes on with the new one, on either store.
    @Test(arguments: StoreKind.allCases)
    func aRefusedRefreshOfAReplacedRefreshTokenEndsNothing(_ kind: StoreKind) async throws {
        let (bed, session) = try await sessionDue(kind)
        try await bed.closing {
            bed.provider.failNextRefresh(status: 400, body: #"{"error":"invalid_grant"}"#)
            replaceDuringNextRefresh(bed, session, accessToken: "at-merged", refreshToken: "rt-merged")
            let answered = try await bed.sessions.refresh(session.id, force: false, minimumValidity: 60)
            #expect(answered.accessToken == "at-merged")
            #expect(try await bed.stored(session.id)?.refreshToken == "rt-merged", "the session goes on")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aForcedRefreshMomentsAfterAnotherIsRefusedWithAWait(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession().session
            _ = try await bed.sessions.refresh(session.id, force: true, minimumValidity: 60)
            bed.clock.advance(by: 10)
            do throws(RefreshFailure) {
                _ = try await bed.sessions.refresh(session.id, force: true, minimumValidity: 60)
                Issue.record("refreshed twice within the interval")
            } catch {
                guard case .tooSoon(let wait) = error else { Issue.record("\(error)"); return }
                #expect(wait == Int(bed.settings.minRefreshIntervalSeconds) - 10)
            }
            #expect(bed.provider.refreshes == 1)
        }
    }

    /// The API refused a token: a refresh, once; a second caller refused the same token moments
    /// later gets the token that refresh brought; one refused that new token too is told to wait.
    @Test(arguments: StoreKind.allCases)
    func aRefusedTokenIsReplacedOnceForEveryCallerItWasRefusedTo(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession().session
            let replaced = try await bed.sessions.replacing(session.accessToken, in: session.id)
            #expect(replaced.accessToken != session.accessToken && bed.provider.accepts(replaced.accessToken))
            bed.clock.advance(by: 10)
            #expect(try await bed.sessions.replacing(session.accessToken, in: session.id).accessToken == replaced.accessToken)
            do throws(RefreshFailure) {
                _ = try await bed.sessions.replacing(replaced.accessToken, in: session.id)
                Issue.record("refreshed twice within the interval")
            } catch {
                guard case .tooSoon(let wait) = error else { Issue.record("\(error)"); return }
                #expect(wait == Int(bed.settings.minRefreshIntervalSeconds) - 10)
            }
            #expect(bed.provider.refreshes == 1)
            bed.clock.advance(by: bed.settings.minRefreshIntervalSeconds)
            #expect(try await bed.sessions.replacing(session.accessToken, in: session.id).accessToken == replaced.accessToken,
                    "a caller refused the first token long after: the second, not a refresh")
            #expect(bed.provider.refreshes == 1)
            #expect(try await bed.sessions.replacing(replaced.accessToken, in: session.id).accessToken != replaced.accessToken)
            #expect(bed.provider.refreshes == 2)
        }
    }

    /// With no interval between refreshes, requests refused the same token still make one
    /// refresh: the token it brought is the answer to the others, however late they come.
    @Test(arguments: StoreKind.allCases)
    func withoutAnIntervalARefusedTokenIsStillReplacedOnce(_ kind: StoreKind) async throws {
        var settings = SessionSettings()
        settings.minRefreshIntervalSeconds = 0
        let bed = try await FlowTestBed(kind, settings: settings)
        try await bed.closing {
            let session = try await bed.newSession().session
            let tokens = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<6 { group.addTask { try await bed.sessions.replacing(session.accessToken, in: session.id).accessToken } }
                return try await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
            #expect(tokens.count == 1 && !tokens.contains(session.accessToken))
            #expect(try await bed.sessions.replacing(session.accessToken, in: session.id).accessToken == tokens.first)
            #expect(bed.provider.refreshes == 1)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func revokingEndsTheSessionThenAsksTheProviderAndIsIdempotent(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession().session
            #expect(try await bed.sessions.end(session.id, .revoked) == .succeeded)
            #expect((try await bed.stored(session.id)) == nil)
            #expect(bed.provider.revoked == [session.refreshToken, session.accessToken].compactMap { $0 })
            #expect(try await bed.sessions.end(session.id, .revoked) == nil)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func theProfileIsReadWithAFreshTokenRetriedOnceOnA401AndCached(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession(subject: "alice").session
            bed.provider.rejectNextUserinfo()
            let profile = try await bed.sessions.profile(of: session)
            #expect(profile["sub"] == .string("alice") && profile["provider"] == .string("idp"))
            #expect(bed.provider.refreshes == 1, "the 401 forces one refresh")
            // Cached for the session as the store now has it: with the token the refresh brought.
            let current = try #require(try await bed.stored(session.id))
            #expect(current.accessToken != session.accessToken)
            #expect(bed.sessions.cachedProfile(of: current) == profile)
            bed.clock.advance(by: bed.settings.profileCacheSeconds + 1)
            #expect(bed.sessions.cachedProfile(of: current) == nil)
        }
    }

    /// Profiles asked for together with a token the provider has stopped taking: each is read,
    /// after one refresh in all (they go through `replacing`, whose own tests show a refusal
    /// that comes after the refresh taking the token it brought).
    @Test(arguments: StoreKind.allCases)
    func profilesRefusedTogetherMakeOneRefresh(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession(subject: "alice").session
            bed.provider.forget(session.accessToken)
            let subjects = try await withThrowingTaskGroup(of: JSONValue?.self) { group in
                for _ in 0..<8 { group.addTask { try await bed.sessions.profile(of: session)["sub"] } }
                return try await group.reduce(into: [JSONValue?]()) { $0.append($1) }
            }
            #expect(subjects == Array(repeating: .string("alice"), count: 8))
            #expect(bed.provider.refreshes == 1)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aCachedProfileIsServedOnlyWithTheTokenItWasReadWith(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession(subject: "alice").session
            let profile = try await bed.sessions.profile(of: session)
            let stored = try #require(try await bed.stored(session.id))
            #expect(bed.sessions.cachedProfile(of: stored) == profile)
            // As a later grant finished elsewhere leaves it in the store: new scopes, or the same.
            var granted = stored
            granted.accessToken += "-next"
            #expect(bed.sessions.cachedProfile(of: granted) == nil)
            #expect(bed.sessions.cachedProfile(of: stored) == nil, "the entry is gone, not kept for the old token")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aProfileOfAnEndedSessionIsTheRefreshFailure(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession().session
            _ = try await bed.sessions.end(session.id, .revoked)
            do throws(ProfileFailure) {
                _ = try await bed.sessions.profile(of: session)
                Issue.record("a profile for a revoked session")
            } catch {
                guard case .refresh(.gone) = error else { Issue.record("\(error)"); return }
            }
        }
    }
}
