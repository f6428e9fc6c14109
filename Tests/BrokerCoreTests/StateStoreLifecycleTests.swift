import BrokerCrypto
import Foundation
import Testing

@testable import BrokerCore

/// The lifecycle of a grant in the `StateStore` contract (docs/lifecycle.md), over both stores
/// (PostgreSQL, where it says so, as two instances): a code's redemption and its effects in one
/// change; refusals that spend nothing until the limit; replays, expiries, sweeps and sign-outs
/// that end grants with their tokens queued for revocation; sign-outs remembered for sign-ins
/// under way; the revocation queue taken once and settled; and commits whose acknowledgements
/// are lost, answered as they happened.
@Suite(.serialized)
struct StateStoreLifecycleTests {
    private func grant(_ subject: String, sid: String? = nil, signedInAt: Double) -> Grant {
        let claims = sid.map { Array(#"{"sub":"\#(subject)","sid":"\#($0)"}"#.utf8) }
        return Grant(provider: "dev", subject: subject, scopes: ["openid"], accessToken: "at-\(subject)-\(UUID().uuidString)",
                     accessTokenExpiresAt: nil, refreshToken: "rt-\(subject)-\(UUID().uuidString)", idTokenClaims: claims,
                     signedInAt: signedInAt)
    }

    /// A code holding `grant` for the demo app, redeemable with `verifier` for a minute.
    private func handoff(_ grant: Grant, verifier: String, clock: TestClock) -> Handoff {
        Handoff(app: "demo", redirectURI: "http://127.0.0.1/cb", appChallenge: PKCE.challenge(for: verifier),
                expiresAt: clock.seconds + 60, status: .holding(grant))
    }

    /// Another instance on `store`'s state: a second one of a store several instances share; the
    /// embedded store itself (it has one instance per directory, which holds its memory).
    private func peer(of store: any StateStore, _ harness: any StoreHarness, _ kind: StoreKind) async throws -> any StateStore {
        kind == .embedded ? store : try await harness.open(clock: StoreConformanceTests.clock())
    }

    /// The access tokens of the revocations waiting and due now, taken and left to be taken again.
    private func queued(_ store: any StateStore, _ clock: TestClock) async throws -> [String] {
        try await store.dueRevocations(now: clock.seconds, limit: 100, claim: 0, id: nil).compactMap(\.accessToken).sorted()
    }

    @Test(arguments: StoreKind.allCases)
    func aCodeReleasesItsSessionInOneChangeAndAReplayEndsIt(_ kind: StoreKind) async throws {
        let harness = try kind.harness()
        let clock = StoreConformanceTests.clock()
        let store = try await harness.open(clock: clock)
        let verifier = PKCE.makeVerifier()
        let alice = grant("alice", signedInAt: clock.seconds)
        let code = OpaqueToken.hash("tbh_once")
        try await store.issueHandoff(code, handoff(alice, verifier: verifier, clock: clock))
        let redeemed = try await store.redeemHandoff(code, .demo(verifier: verifier, at: clock.seconds, session: "tbs_first"))
        guard case .released = redeemed.answer else { Issue.record("not released: \(redeemed.answer)"); return }
        #expect(redeemed.made?.id == OpaqueToken.hash("tbs_first") && redeemed.made?.accessToken == alice.accessToken && redeemed.ended.isEmpty)

        // A crash now (the store dropped unclosed): the session is there with the code spent.
        let restarted = try await harness.open(clock: clock)
        #expect(try await restarted.loadSession(OpaqueToken.hash("tbs_first"), now: clock.seconds)?.refreshToken == alice.refreshToken)
        let other = try await peer(of: restarted, harness, kind)
        let refused = try await other.redeemHandoff(code, .demo(verifier: PKCE.makeVerifier(), at: clock.seconds, session: "tbs_wrong"))
        guard case .refused(.wrongVerifier) = refused.answer, refused.ended.isEmpty else {
            Issue.record("a replay without the verifier was not refused, or ended something: \(refused.answer)")
            return
        }
        #expect(try await other.loadSession(OpaqueToken.hash("tbs_first"), now: clock.seconds) != nil, "a replay without the verifier ends nothing")
        let replayed = try await other.redeemHandoff(code, .demo(verifier: verifier, at: clock.seconds, session: "tbs_second"))
        guard case .replayed = replayed.answer else { Issue.record("not a replay: \(replayed.answer)"); return }
        #expect(replayed.ended.map(\.holder) == [.session(OpaqueToken.hash("tbs_first"))] && replayed.ended.first?.reason == .replayedCode)
        #expect(try await other.loadSession(OpaqueToken.hash("tbs_first"), now: clock.seconds) == nil)
        #expect(try await other.loadSession(OpaqueToken.hash("tbs_second"), now: clock.seconds) == nil, "a replay makes no session")
        #expect(try await queued(other, clock) == [alice.accessToken], "its tokens wait for the provider, in the same change")
        await other.close()
        await restarted.close()
        await store.close()
    }

    @Test(arguments: StoreKind.allCases)
    func aRefusalSpendsNothingUntilTheLimitThenTheGrantIsRevoked(_ kind: StoreKind) async throws {
        let harness = try kind.harness()
        let clock = StoreConformanceTests.clock()
        let store = try await harness.open(clock: clock)
        let verifier = PKCE.makeVerifier()
        let kept = OpaqueToken.hash("tbh_kept")
        try await store.issueHandoff(kept, handoff(grant("alice", signedInAt: clock.seconds), verifier: verifier, clock: clock))
        for attempt in [HandoffAttempt.demo(verifier: PKCE.makeVerifier(), at: clock.seconds), .demo(verifier: verifier, app: "other", at: clock.seconds)] {
            guard case .refused = try await store.redeemHandoff(kept, attempt).answer else { Issue.record("not refused"); return }
        }
        guard case .released = try await store.redeemHandoff(kept, .demo(verifier: verifier, at: clock.seconds)).answer else {
            Issue.record("two refusals spent the app's code")
            return
        }

        let bob = grant("bob", signedInAt: clock.seconds)
        let spent = OpaqueToken.hash("tbh_spent")
        try await store.issueHandoff(spent, handoff(bob, verifier: verifier, clock: clock))
        for _ in 1..<Handoff.refusalLimit {
            guard case .refused(.wrongVerifier) = try await store.redeemHandoff(spent, .demo(verifier: PKCE.makeVerifier(), at: clock.seconds)).answer else {
                Issue.record("not refused")
                return
            }
        }
        // The refusals so far are kept: after a crash, the next is the last.
        let reopened = try await harness.open(clock: clock)
        let last = try await reopened.redeemHandoff(spent, .demo(verifier: PKCE.makeVerifier(), at: clock.seconds))
        guard case .spent(.refusedTooOften) = last.answer else { Issue.record("the refusals did not add up across a restart: \(last.answer)"); return }
        #expect(last.ended.map(\.holder) == [.handoffCode] && last.ended.first?.reason == .refusedCode)
        #expect(try await queued(reopened, clock) == [bob.accessToken])
        let late = try await reopened.redeemHandoff(spent, .demo(verifier: verifier, at: clock.seconds, session: "tbs_late"))
        guard case .spent(.refusedTooOften) = late.answer, late.made == nil, late.ended.isEmpty else {
            Issue.record("a code refused too often released its grant to its app: \(late.answer)")
            return
        }
        await reopened.close()
        await store.close()
    }

    @Test(arguments: StoreKind.allCases)
    func whatExpiresEndsWithItsTokensQueuedOnce(_ kind: StoreKind) async throws {
        let clock = StoreConformanceTests.clock()
        let store = try await kind.harness().open(clock: clock)
        let verifier = PKCE.makeVerifier()
        let (late, swept, idle) = (grant("late", signedInAt: clock.seconds), grant("swept", signedInAt: clock.seconds), grant("idle", signedInAt: clock.seconds))
        try await store.issueHandoff(OpaqueToken.hash("tbh_late"), handoff(late, verifier: verifier, clock: clock))
        try await store.issueHandoff(OpaqueToken.hash("tbh_swept"), handoff(swept, verifier: verifier, clock: clock))
        let session = Session(id: OpaqueToken.hash("tbs_idle"), app: "demo", grant: idle, at: clock.seconds)
        #expect(try await store.save(session))
        clock.advance(by: 61)
        let redeemed = try await store.redeemHandoff(OpaqueToken.hash("tbh_late"), .demo(verifier: verifier, at: clock.seconds))
        guard case .spent(.expired) = redeemed.answer, redeemed.made == nil else { Issue.record("a late code released something"); return }
        #expect(redeemed.ended.map(\.reason) == [.codeExpired])
        #expect(await store.sweep().map(\.holder) == [.handoffCode], "the code never redeemed")
        clock.advance(by: StoreConformanceTests.lifetimes.idle)
        let ended = await store.sweep()
        #expect(ended.map(\.holder) == [.session(session.id)] && ended.first?.reason == .expired)
        #expect(await store.sweep().isEmpty, "ended once")
        #expect(try await queued(store, clock) == [late.accessToken, swept.accessToken, idle.accessToken].sorted())
        await store.close()
    }

    @Test(arguments: StoreKind.allCases)
    func aSignOutEndsTheGrantsHeldForItsUserAndNoOthers(_ kind: StoreKind) async throws {
        let harness = try kind.harness()
        let clock = StoreConformanceTests.clock()
        let store = try await harness.open(clock: clock)
        let other = try await peer(of: store, harness, kind)
        let verifier = PKCE.makeVerifier()
        let at = clock.seconds
        let codes = [("before", grant("alice", sid: "laptop", signedInAt: at - 10)), ("after", grant("alice", signedInAt: at + 10)),
                     ("bob", grant("bob", signedInAt: at - 10)), ("phone", grant("alice", sid: "phone", signedInAt: at - 10))]
        for (name, held) in codes { try await store.issueHandoff(OpaqueToken.hash("tbh_\(name)"), handoff(held, verifier: verifier, clock: clock)) }
        let device = OpaqueToken.hash("tbd_alice")
        #expect(try await store.issueDeviceCode(device, DeviceAuthorization(
            app: "demo", provider: "dev", scopes: ["openid"], userCode: UserCode.hash("BCDFGHJK"), expiresAt: at + 600, interval: 5,
            lastPolledAt: nil, status: .pending)))
        #expect(try await store.decideDeviceCode(device, .signedIn(grant("alice", signedInAt: at - 5), login: OpaqueToken.hash("tbst_l")), now: at).answer != nil)

        let bySession = try await other.endSignIns(SignOut(provider: "dev", subject: nil, providerSessionID: "phone", signedInBefore: at, reason: .backChannelLogout), now: at)
        #expect(bySession.count == 1 && bySession.first?.holder == .handoffCode && bySession.first?.reason == .backChannelLogout)
        let ended = try await other.endSignIns(SignOut(provider: "dev", subject: "alice", providerSessionID: nil, signedInBefore: at, reason: .admin), now: at)
        #expect(ended.map(\.holder.name).sorted() == ["device_code", "handoff_code"] && ended.allSatisfy { $0.reason == .admin && $0.subject == "alice" })
        #expect(try await other.endSignIns(SignOut(provider: "dev", subject: "alice", providerSessionID: nil, signedInBefore: at, reason: .admin), now: at).isEmpty,
                "ended once")
        for name in ["before", "phone"] {
            guard case .spent(.signedOut) = try await store.redeemHandoff(OpaqueToken.hash("tbh_\(name)"), .demo(verifier: verifier, at: at)).answer else {
                Issue.record("\(name): a code the sign-out ended released its grant")
                return
            }
        }
        for name in ["after", "bob"] {
            guard case .released = try await store.redeemHandoff(OpaqueToken.hash("tbh_\(name)"), .demo(verifier: verifier, at: at, session: "tbs_\(name)")).answer else {
                Issue.record("\(name): a sign-in the sign-out does not cover was ended")
                return
            }
        }
        guard case .signedOut = try await store.pollDeviceCode(device, app: "demo", session: OpaqueToken.hash("tbs_device"), keyThumbprint: nil, now: at).answer else {
            Issue.record("the device was not told of the sign-out")
            return
        }
        let revoked = Set(try await queued(store, clock))
        #expect(revoked == Set([codes[0].1.accessToken, codes[3].1.accessToken]).union(revoked.filter { $0.hasPrefix("at-alice") }) && revoked.count == 3,
                "the two codes' grants and the device's, and nothing of bob's or of the sign-in after")
        await other.close()
        await store.close()
    }

    @Test(arguments: StoreKind.allCases)
    func aSignOutIsRememberedForTheSignInsUnderWay(_ kind: StoreKind) async throws {
        let harness = try kind.harness()
        let clock = StoreConformanceTests.clock()
        let store = try await harness.open(clock: clock)
        let other = try await peer(of: store, harness, kind)
        let at = clock.seconds
        try await store.rememberSignOut(SignOut(provider: "dev", subject: "alice", providerSessionID: nil, signedInBefore: at, reason: .admin), until: at + 600)
        try await store.rememberSignOut(SignOut(provider: "dev", subject: nil, providerSessionID: "sid-carol", signedInBefore: at, reason: .backChannelLogout),
                                        until: at + 600)
        let covering = try await other.signOut(covering: grant("alice", signedInAt: at - 1), now: at)
        #expect(covering?.subject == "alice" && covering?.reason == .admin && covering?.signedInBefore == at)
        #expect(try await other.signOut(covering: grant("alice", signedInAt: at + 1), now: at) == nil, "signed in after it")
        #expect(try await other.signOut(covering: grant("bob", signedInAt: at - 1), now: at) == nil, "another user")
        let carol = try await other.signOut(covering: grant("carol", sid: "sid-carol", signedInAt: at - 1), now: at)
        #expect(carol?.providerSessionID == "sid-carol" && carol?.subject == nil && carol?.reason == .backChannelLogout)
        #expect(try await other.signOut(covering: grant("carol", sid: "sid-other", signedInAt: at - 1), now: at) == nil, "another provider session")
        // A logout naming both the user and one provider session covers that session's sign-ins,
        // not the user's others.
        try await store.rememberSignOut(SignOut(provider: "dev", subject: "dave", providerSessionID: "sid-laptop", signedInBefore: at,
                                                reason: .backChannelLogout), until: at + 600)
        #expect(try await other.signOut(covering: grant("dave", sid: "sid-laptop", signedInAt: at - 1), now: at)?.providerSessionID == "sid-laptop")
        #expect(try await other.signOut(covering: grant("dave", sid: "sid-phone", signedInAt: at - 1), now: at) == nil, "the phone's session stands")
        try await store.rememberSignOut(SignOut(provider: "dev", subject: "alice", providerSessionID: nil, signedInBefore: at + 30, reason: .backChannelLogout),
                                        until: at + 60)
        #expect(try await other.signOut(covering: grant("alice", signedInAt: at + 1), now: at)?.signedInBefore == at + 30, "the later of the two")
        #expect(try await other.signOut(covering: grant("alice", signedInAt: at - 1), now: at + 601) == nil, "forgotten after its time")
        await other.close()
        await store.close()
    }

    @Test(arguments: StoreKind.allCases)
    func aQueuedRevocationIsTakenOnceAndSettled(_ kind: StoreKind) async throws {
        let harness = try kind.harness()
        let clock = StoreConformanceTests.clock()
        let store = try await harness.open(clock: clock)
        let (first, second) = (grant("first", signedInAt: clock.seconds), grant("second", signedInAt: clock.seconds))
        let ended = try await store.queueRevocation(first, app: "demo", .notHeld, now: clock.seconds)
        #expect(ended.holder == .none && ended.reason == .notHeld && ended.subject == "first")
        _ = try await store.queueRevocation(second, app: "demo", .notHeld, now: clock.seconds)
        _ = try await store.queueRevocation(second, app: "demo", .notHeld, now: clock.seconds)
        #expect(try await store.countRevocations() == 2, "the same tokens queued twice are one entry")
        let taken = try await store.dueRevocations(now: clock.seconds, limit: 10, claim: 60, id: nil)
        #expect(Set(taken.compactMap(\.refreshToken)) == [first.refreshToken, second.refreshToken])
        let other = try await peer(of: store, harness, kind)
        #expect(try await other.dueRevocations(now: clock.seconds, limit: 10, claim: 60, id: nil).isEmpty, "taken: nobody else takes them")
        #expect(try await other.dueRevocations(now: clock.seconds, limit: 10, claim: 60, id: ended.revocation).count == 1,
                "one its client waits for is taken all the same")
        let retried = try #require(taken.first { $0.id != ended.revocation })
        try await store.settleRevocation(ended.revocation, next: nil)
        try await store.settleRevocation(retried.id, next: retried.retried(refreshToken: nil, accessToken: retried.accessToken, at: clock.seconds))
        #expect(try await store.countRevocations() == 1)
        #expect(try await store.dueRevocations(now: clock.seconds, limit: 10, claim: 60, id: nil).isEmpty, "not due before its backoff")
        await store.close()
        if kind != .embedded { await other.close() }
        clock.advance(by: QueuedRevocation.backoff(after: 1))
        let restarted = try await harness.open(clock: clock)
        let again = try await restarted.dueRevocations(now: clock.seconds, limit: 10, claim: 60, id: nil)
        #expect(again.count == 1 && again.first?.refreshToken == nil && again.first?.accessToken == second.accessToken && again.first?.attempts == 1,
                "what is left of it, after a restart")
        try await restarted.settleRevocation(retried.id, next: nil)
        try await restarted.settleRevocation(retried.id, next: retried)
        #expect(try await restarted.countRevocations() == 0, "a settled revocation is not put back by a late delivery")
        await restarted.close()
    }

    @Test(arguments: StoreKind.allCases)
    func aCommitWhoseAcknowledgementIsLostIsAnsweredAsItHappened(_ kind: StoreKind) async throws {
        let harness = try kind.harness()
        let clock = StoreConformanceTests.clock()
        let lost = LostAcknowledgements()
        let store = try await harness.open(clock: clock, lost: lost)
        let verifier = PKCE.makeVerifier()
        let alice = grant("alice", signedInAt: clock.seconds)
        let code = OpaqueToken.hash("tbh_lost")
        try await store.issueHandoff(code, handoff(alice, verifier: verifier, clock: clock))
        lost.next()
        let redeemed = try await store.redeemHandoff(code, .demo(verifier: verifier, at: clock.seconds, session: "tbs_lost"))
        #expect(lost.remaining(in: kind) == 0, "the acknowledgement was lost")
        guard case .released = redeemed.answer, redeemed.made?.id == OpaqueToken.hash("tbs_lost") else {
            Issue.record("a redemption whose acknowledgement was lost was not answered with its session: \(redeemed.answer)")
            return
        }
        #expect(try await harness.open(clock: clock).loadSession(OpaqueToken.hash("tbs_lost"), now: clock.seconds) != nil, "committed")

        lost.next()
        let ended = try await store.endSession(OpaqueToken.hash("tbs_lost"), .revoked, now: clock.seconds)
        #expect(lost.remaining(in: kind) == 0)
        #expect(ended?.subject == "alice", "the ending is answered with what it ended")
        let afterEnding = try await harness.open(clock: clock)
        #expect(try await afterEnding.countRevocations() == 1, "its revocation queued, once")
        #expect(try await afterEnding.loadSession(OpaqueToken.hash("tbs_lost"), now: clock.seconds) == nil)

        let device = OpaqueToken.hash("tbd_lost")
        #expect(try await store.issueDeviceCode(device, DeviceAuthorization(
            app: "demo", provider: "dev", scopes: ["openid"], userCode: UserCode.hash("BCDFGHJK"), expiresAt: clock.seconds + 600,
            interval: 5, lastPolledAt: nil, status: .approved(grant("dora", signedInAt: clock.seconds)))))
        lost.next()
        let polled = try await store.pollDeviceCode(device, app: "demo", session: OpaqueToken.hash("tbs_device"), keyThumbprint: nil, now: clock.seconds)
        #expect(lost.remaining(in: kind) == 0)
        guard case .approved = polled.answer, polled.made?.subject == "dora" else { Issue.record("the device's poll lost its session"); return }
        #expect(try await harness.open(clock: clock).loadSession(OpaqueToken.hash("tbs_device"), now: clock.seconds) != nil)
        await store.close()
    }

    /// A change the embedded store could not write (the disk failed past its retries) is undone in
    /// memory, as PostgreSQL rolls one back: the client told to retry (503) redeems its code, and
    /// a back-channel logout's sender retries its token, rather than finding them spent.
    @Test func aChangeThatCouldNotBeWrittenIsUndone() async throws {
        let harness = EmbeddedStoreHarness()
        let clock = StoreConformanceTests.clock()
        let faults = LostAcknowledgements()
        let store = try harness.open(clock: clock, lost: faults)
        let verifier = PKCE.makeVerifier()
        let code = OpaqueToken.hash("tbh_unwritten")
        try await store.issueHandoff(code, handoff(grant("alice", signedInAt: clock.seconds), verifier: verifier, clock: clock))
        faults.journal.failSyncs(Journal.retryPatience.count + 1)
        await #expect(throws: StateWriteError.self) {
            try await store.redeemHandoff(code, .demo(verifier: verifier, at: clock.seconds, session: "tbs_first"))
        }
        #expect(try await store.loadSession(OpaqueToken.hash("tbs_first"), now: clock.seconds) == nil, "no session of the failed attempt")
        let retried = try await store.redeemHandoff(code, .demo(verifier: verifier, at: clock.seconds, session: "tbs_retry"))
        guard case .released = retried.answer, retried.made?.id == OpaqueToken.hash("tbs_retry") else {
            Issue.record("the retry was not answered with its session: \(retried.answer)")
            return
        }
        #expect(retried.ended.isEmpty, "nothing ended, nothing revoked")

        // An incremental sign-in's code, which stands for the session the app holds.
        let merged = OpaqueToken.hash("tbh_merged")
        try await store.issueHandoff(merged, Handoff(app: "demo", redirectURI: "http://127.0.0.1/cb", appChallenge: PKCE.challenge(for: verifier),
                                                      expiresAt: clock.seconds + 60, status: .merged(into: OpaqueToken.hash("tbs_retry"), boundTo: nil, provider: "dev", providerBound: false)))
        faults.journal.failSyncs(Journal.retryPatience.count + 1)
        await #expect(throws: StateWriteError.self) {
            try await store.redeemHandoff(merged, .demo(verifier: verifier, at: clock.seconds, session: "tbs_unused"))
        }
        let mergedAgain = try await store.redeemHandoff(merged, .demo(verifier: verifier, at: clock.seconds, session: "tbs_unused"))
        guard case .merged(OpaqueToken.hash("tbs_retry")) = mergedAgain.answer, mergedAgain.ended.isEmpty else {
            Issue.record("the retry of a merged code was not answered with its session: \(mergedAgain.answer)")
            return
        }

        let token = OpaqueToken.hash("logout-jti")
        faults.journal.failSyncs(Journal.retryPatience.count + 1)
        await #expect(throws: StateWriteError.self) { try await store.spendOnce(token, until: clock.seconds + 600) }
        #expect(try await store.spendOnce(token, until: clock.seconds + 600), "the sender's retry counts")
        #expect(try await !store.spendOnce(token, until: clock.seconds + 600), "and is spent once")
        await store.close()
        let restarted = try harness.open(clock: clock, lost: nil)
        #expect(try await restarted.loadSession(OpaqueToken.hash("tbs_retry"), now: clock.seconds) != nil)
        #expect(try await restarted.loadSession(OpaqueToken.hash("tbs_first"), now: clock.seconds) == nil)
        await restarted.close()
    }
}
