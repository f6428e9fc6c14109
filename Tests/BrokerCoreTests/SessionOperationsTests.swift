import BrokerCrypto
import Foundation
import Testing
import WireValues

@testable import BrokerCore

/// The session operations as a service (`SessionOperations`): current token, refresh, revoke and
/// profile — against an in-process provider, over the in-memory store, with a clock the test moves.
struct SessionOperationsTests {
    private func current(_ bed: FlowTestBed, _ id: SHA256Digest, validFor validity: Double = 60) -> String {
        switch bed.sessions.current(id, validFor: validity, { session, _ in session.accessToken }) {
        case .fresh(let token): "fresh \(token)"
        case .refreshDue(let early): early ? "refresh early" : "refresh due"
        case .unknownSession: "unknown"
        }
    }

    @Test func theCurrentTokenIsServedUntilItIsDueThenRefreshed() async throws {
        let bed = await FlowTestBed()
        let session = try await bed.newSession().session
        #expect(current(bed, session.id) == "fresh \(session.accessToken)")
        #expect(current(bed, OpaqueToken.hash("tbs_unknown")) == "unknown")
        #expect(current(bed, session.id, validFor: 86_400) == "refresh early", "asked before it is due (min_ttl)")
        bed.clock.advance(by: 3600 - 59)
        #expect(current(bed, session.id, validFor: 86_400) == "refresh due")
        #expect(current(bed, session.id) == "refresh due")
        let refreshed = try await bed.sessions.refresh(session.id, force: false, minimumValidity: 60)
        #expect(refreshed.accessToken != session.accessToken && refreshed.refreshToken != session.refreshToken)
        #expect(current(bed, session.id) == "fresh \(refreshed.accessToken)" && bed.provider.accepts(refreshed.accessToken))
    }

    @Test func onlyInvalidGrantEndsTheSession() async throws {
        let bed = await FlowTestBed()
        let session = try await bed.newSession().session
        bed.clock.advance(by: 3600 + 1)
        for (status, body) in [(400, #"{"error":"temporarily_unavailable"}"#), (500, #"{"error":"server_error"}"#), (401, #"{"error":"invalid_client"}"#)] {
            bed.provider.failNextRefresh(status: status, body: body)
            await #expect(throws: RefreshFailure.self) { try await bed.sessions.refresh(session.id, force: false, minimumValidity: 60) }
            #expect(bed.store.session(session.id, now: bed.clock.seconds) != nil, "ended by \(body)")
        }
        bed.provider.failNextRefresh(status: 400, body: #"{"error":"invalid_grant"}"#)
        do {
            _ = try await bed.sessions.refresh(session.id, force: false, minimumValidity: 60)
            Issue.record("refreshed despite invalid_grant")
        } catch {
            guard case .loginRequired = error else { Issue.record("\(error)"); return }
        }
        #expect(bed.store.session(session.id, now: bed.clock.seconds) == nil)
    }

    @Test func aForcedRefreshMomentsAfterAnotherIsRefusedWithAWait() async throws {
        let bed = await FlowTestBed()
        let session = try await bed.newSession().session
        _ = try await bed.sessions.refresh(session.id, force: true, minimumValidity: 60)
        bed.clock.advance(by: 10)
        do {
            _ = try await bed.sessions.refresh(session.id, force: true, minimumValidity: 60)
            Issue.record("refreshed twice within the interval")
        } catch {
            guard case .tooSoon(let wait) = error else { Issue.record("\(error)"); return }
            #expect(wait == Int(bed.settings.minRefreshIntervalSeconds) - 10)
        }
        #expect(bed.provider.refreshes == 1)
    }

    @Test func revokingEndsTheSessionThenAsksTheProviderAndIsIdempotent() async throws {
        let bed = await FlowTestBed()
        let session = try await bed.newSession().session
        #expect(try await bed.sessions.revoke(session.id) == .succeeded)
        #expect(bed.store.session(session.id, now: bed.clock.seconds) == nil)
        #expect(bed.provider.revoked == [session.refreshToken, session.accessToken].compactMap { $0 })
        #expect(try await bed.sessions.revoke(session.id) == nil)
    }

    @Test func theProfileIsReadWithAFreshTokenRetriedOnceOnA401AndCached() async throws {
        let bed = await FlowTestBed()
        let session = try await bed.newSession(subject: "alice").session
        bed.provider.rejectNextUserinfo()
        let profile = try await bed.sessions.profile(of: session)
        #expect(profile["sub"] == .string("alice") && profile["provider"] == .string("idp"))
        #expect(bed.provider.refreshes == 1, "the 401 forces one refresh")
        #expect(bed.sessions.cachedProfile(session.id) == profile)
        bed.clock.advance(by: bed.settings.profileCacheSeconds + 1)
        #expect(bed.sessions.cachedProfile(session.id) == nil)
    }

    @Test func aProfileOfAnEndedSessionIsTheRefreshFailure() async throws {
        let bed = await FlowTestBed()
        let session = try await bed.newSession().session
        _ = try await bed.sessions.revoke(session.id)
        do {
            _ = try await bed.sessions.profile(of: session)
            Issue.record("a profile for a revoked session")
        } catch {
            guard case .refresh(.gone) = error else { Issue.record("\(error)"); return }
        }
    }
}
