import BrokerCrypto
import Foundation
import Testing

@testable import BrokerCore

/// Device codes (RFC 8628) in the `StateStore` contract, over both stores: found by the user
/// code while pending, decided once, collected once (also after a crash, and across instances),
/// polled too fast, expired and swept.
@Suite(.serialized)
struct DeviceCodeStoreTests {
    private static let grant = Grant(provider: "dev", subject: "s", scopes: ["openid"], accessToken: "at-device",
                                     accessTokenExpiresAt: nil, refreshToken: "rt-device", idTokenClaims: nil, signedInAt: 0)
    /// The session a poll that collects the grant makes.
    private static let polled = OpaqueToken.hash("tbs_polled")
    /// The hash of the `state` of the login that signed the device in.
    private static let login = OpaqueToken.hash("tbst_the-login")

    private func device(_ userCode: String, clock: TestClock, lifetime: Double = 600) -> DeviceAuthorization {
        DeviceAuthorization(app: "tv", provider: "dev", scopes: ["openid"], userCode: UserCode.hash(userCode),
                            expiresAt: clock.seconds + lifetime, interval: 5, lastPolledAt: nil, status: .pending)
    }

    @Test(arguments: StoreKind.allCases)
    func aDeviceCodeIsDecidedOnceAndCollectedOnceAcrossARestart(_ kind: StoreKind) async throws {
        let harness = try kind.harness()
        let clock = StoreConformanceTests.clock()
        let store = try await harness.open(clock: clock)
        let code = OpaqueToken.hash("tbd_one")
        #expect(try await store.issueDeviceCode(code, device("BCDFGHJK", clock: clock)))
        #expect(try await store.issueDeviceCode(OpaqueToken.hash("tbd_two"), device("BCDFGHJK", clock: clock)) == false,
                "a second live code with the same user code")
        let found = try await store.pendingDeviceCode(userCode: UserCode.hash("BCDFGHJK"), now: clock.seconds)
        #expect(found?.code == code && found?.device.app == "tv")
        #expect(try await store.pendingDeviceCode(userCode: UserCode.hash("BCDFGHJX"), now: clock.seconds) == nil)
        guard case .pending = try await store.pollDeviceCode(code, app: "tv", session: Self.polled, keyThumbprint: nil, now: clock.seconds).answer else {
            Issue.record("a new code was not pending")
            return
        }
        #expect(try await store.decideDeviceCode(code, .signedIn(Self.grant, login: Self.login), now: clock.seconds).answer != nil)
        #expect(try await store.decideDeviceCode(code, .deny(login: nil), now: clock.seconds).answer == nil, "refused at /device after the sign-in")
        #expect(try await store.pendingDeviceCode(userCode: UserCode.hash("BCDFGHJK"), now: clock.seconds) == nil,
                "a signed-in code is no longer found by its user code")
        guard case .pending = try await store.pollDeviceCode(code, app: "tv", session: Self.polled, keyThumbprint: nil, now: clock.seconds + 6).answer else {
            Issue.record("a grant was collected before its account was confirmed")
            return
        }
        // The person was asked to confirm the account: a crash loses nothing of what they were shown.
        let beforeConfirmation = try await harness.open(clock: clock)
        #expect(try await beforeConfirmation.decideDeviceCode(code, .confirm(login: OpaqueToken.hash("tbst_other")), now: clock.seconds).answer == nil,
                "another login's confirmation")
        guard case .signedIn(_, let login)? = try await beforeConfirmation.decideDeviceCode(code, .confirm(login: Self.login), now: clock.seconds).answer else {
            Issue.record("the sign-in was lost in the crash, or not confirmed")
            return
        }
        #expect(login == Self.login)
        #expect(try await beforeConfirmation.decideDeviceCode(code, .deny(login: Self.login), now: clock.seconds).answer == nil, "decided twice")

        // The user was told "signed in": a crash (the store dropped unclosed) loses nothing.
        let afterCrash = try await harness.open(clock: clock)
        guard case .unknown = try await afterCrash.pollDeviceCode(code, app: "other", session: Self.polled, keyThumbprint: nil, now: clock.seconds).answer else {
            Issue.record("another app's poll was answered")
            return
        }
        let collecting = try await afterCrash.pollDeviceCode(code, app: "tv", session: Self.polled, keyThumbprint: nil, now: clock.seconds + 6)
        guard case .approved = collecting.answer else {
            Issue.record("the approval was lost in the crash")
            return
        }
        #expect(collecting.made?.refreshToken == "rt-device" && collecting.made?.id == Self.polled, "the poll made the session")
        #expect(try await afterCrash.loadSession(Self.polled, now: clock.seconds + 6)?.refreshToken == "rt-device", "in the same change")
        guard case .collected = try await afterCrash.pollDeviceCode(code, app: "tv", session: Self.polled, keyThumbprint: nil, now: clock.seconds + 12).answer else {
            Issue.record("a collected code gave its grant again")
            return
        }
        await afterCrash.close()
        let reopened = try await harness.open(clock: clock)
        guard case .collected = try await reopened.pollDeviceCode(code, app: "tv", session: Self.polled, keyThumbprint: nil, now: clock.seconds + 18).answer else {
            Issue.record("a collected code worked again after a restart")
            return
        }
        await reopened.close()
        await store.close()
    }

    @Test(arguments: StoreKind.allCases)
    func pollingTooFastSlowsDownAndACodeExpires(_ kind: StoreKind) async throws {
        let clock = StoreConformanceTests.clock()
        let harness = try kind.harness()
        let store = try await harness.open(clock: clock)
        let code = OpaqueToken.hash("tbd_fast")
        #expect(try await store.issueDeviceCode(code, device("CDFGHJKL", clock: clock, lifetime: 60)))
        let start = clock.seconds
        guard case .pending = try await store.pollDeviceCode(code, app: "tv", session: Self.polled, keyThumbprint: nil, now: start).answer else { Issue.record("first poll"); return }
        guard case .slowDown(let first) = try await store.pollDeviceCode(code, app: "tv", session: Self.polled, keyThumbprint: nil, now: start + 1).answer else {
            Issue.record("a poll one second later was not slow_down")
            return
        }
        guard case .slowDown(let second) = try await store.pollDeviceCode(code, app: "tv", session: Self.polled, keyThumbprint: nil, now: start + 2).answer else {
            Issue.record("the next fast poll was not slow_down")
            return
        }
        #expect(first == 10 && second == 15)
        guard case .pending = try await store.pollDeviceCode(code, app: "tv", session: Self.polled, keyThumbprint: nil, now: start + 2 + 15).answer else {
            Issue.record("a poll after the grown interval was not pending")
            return
        }
        clock.advance(by: 61)
        guard case .expired = try await store.pollDeviceCode(code, app: "tv", session: Self.polled, keyThumbprint: nil, now: clock.seconds).answer else {
            Issue.record("a code past its lifetime was not expired")
            return
        }
        #expect(try await store.decideDeviceCode(code, .signedIn(Self.grant, login: Self.login), now: clock.seconds).answer == nil, "signed in after expiry")
        await store.sweep()
        guard case .expired = try await store.pollDeviceCode(code, app: "tv", session: Self.polled, keyThumbprint: nil, now: clock.seconds).answer else {
            Issue.record("a poll after the sweep was not told the code expired")
            return
        }
        #expect(try await store.pendingDeviceCode(userCode: UserCode.hash("CDFGHJKL"), now: clock.seconds) == nil,
                "an expired code is not found by its user code")
        let again = OpaqueToken.hash("tbd_again")
        #expect(try await store.issueDeviceCode(again, device("CDFGHJKL", clock: clock)),
                "an expired code's user code can be drawn again")
        // The expired code, polled late and decided, leaves the user code to the new one; so does
        // a restart.
        _ = try await store.pollDeviceCode(code, app: "tv", session: Self.polled, keyThumbprint: nil, now: clock.seconds)
        _ = try await store.decideDeviceCode(code, .deny(login: nil), now: clock.seconds)
        #expect(try await store.pendingDeviceCode(userCode: UserCode.hash("CDFGHJKL"), now: clock.seconds)?.code == again)
        await store.close()
        let reopened = try await harness.open(clock: clock)
        #expect(try await reopened.pendingDeviceCode(userCode: UserCode.hash("CDFGHJKL"), now: clock.seconds)?.code == again,
                "after a restart")
        await reopened.close()
    }

    @Test(arguments: StoreKind.allCases)
    func aSweepEndsTheGrantsOfCodesThatExpiredUncollected(_ kind: StoreKind) async throws {
        let clock = StoreConformanceTests.clock()
        let store = try await kind.harness().open(clock: clock)
        func grant(_ name: String) -> Grant {
            Grant(provider: "dev", subject: "s", scopes: ["openid"], accessToken: "at-\(name)", accessTokenExpiresAt: nil,
                  refreshToken: "rt-\(name)", idTokenClaims: nil, signedInAt: 0)
        }
        let signedIn = OpaqueToken.hash("tbd_signed-in"), approved = OpaqueToken.hash("tbd_approved")
        let collected = OpaqueToken.hash("tbd_collected"), pending = OpaqueToken.hash("tbd_pending")
        for (code, userCode) in [(signedIn, "BCDFGHJK"), (approved, "CDFGHJKL"), (collected, "DFGHJKLM"), (pending, "FGHJKLMN")] {
            #expect(try await store.issueDeviceCode(code, device(userCode, clock: clock)))
        }
        for (code, name) in [(signedIn, "signed-in"), (approved, "approved"), (collected, "collected")] {
            #expect(try await store.decideDeviceCode(code, .signedIn(grant(name), login: Self.login), now: clock.seconds).answer != nil)
        }
        for code in [approved, collected] {
            #expect(try await store.decideDeviceCode(code, .confirm(login: Self.login), now: clock.seconds).answer != nil)
        }
        guard case .approved = try await store.pollDeviceCode(collected, app: "tv", session: Self.polled, keyThumbprint: nil, now: clock.seconds).answer else {
            Issue.record("an approved code was not collected")
            return
        }
        #expect(await store.sweep().isEmpty, "nothing has expired yet")
        clock.advance(by: 601)
        let ended = await store.sweep().filter { $0.holder == .deviceCode }
        #expect(ended.count == 2 && ended.allSatisfy { $0.reason == .codeExpired })
        let queued = try await store.dueRevocations(now: clock.seconds, limit: 10, claim: 60, id: nil).compactMap(\.accessToken).sorted()
        #expect(queued == ["at-approved", "at-signed-in"], "their tokens wait in the revocation queue")
        // Remembered after the sweep, for the replay memory: a device that polls late is told
        // `expired_token` (RFC 8628 §3.5), which makes its client start again, not `invalid_grant`.
        for code in [signedIn, approved, pending] {
            guard case .expired = try await store.pollDeviceCode(code, app: "tv", session: Self.polled, keyThumbprint: nil, now: clock.seconds).answer else {
                Issue.record("a poll after the sweep was not told the code expired")
                return
            }
        }
        #expect(try await store.pendingDeviceCode(userCode: UserCode.hash("FGHJKLMN"), now: clock.seconds) == nil)
        #expect(await store.sweep().isEmpty, "ended once")
        #expect(try await store.countRevocations() == 2, "revoked once")
        clock.advance(by: EmbeddedStateStore.replayMemory)
        #expect(await store.sweep().isEmpty)
        for code in [signedIn, approved, collected, pending] {
            guard case .unknown = try await store.pollDeviceCode(code, app: "tv", session: Self.polled, keyThumbprint: nil, now: clock.seconds).answer else {
                Issue.record("a code was remembered past the replay memory")
                return
            }
        }
        #expect(try await store.countRevocations() == 2)
        await store.close()
    }

    @Test(arguments: StoreKind.allCases)
    func aRefusedCodeIsSpent(_ kind: StoreKind) async throws {
        let clock = StoreConformanceTests.clock()
        let store = try await kind.harness().open(clock: clock)
        let code = OpaqueToken.hash("tbd_no")
        #expect(try await store.issueDeviceCode(code, device("DFGHJKLM", clock: clock)))
        #expect(try await store.decideDeviceCode(code, .deny(login: nil), now: clock.seconds).answer != nil)
        #expect(try await store.pendingDeviceCode(userCode: UserCode.hash("DFGHJKLM"), now: clock.seconds) == nil)
        #expect(try await store.decideDeviceCode(code, .signedIn(Self.grant, login: Self.login), now: clock.seconds).answer == nil)
        guard case .denied = try await store.pollDeviceCode(code, app: "tv", session: Self.polled, keyThumbprint: nil, now: clock.seconds).answer else {
            Issue.record("a refused code was not access_denied")
            return
        }
        await store.close()
    }

    @Test(arguments: StoreKind.sharedByInstances)
    func aGrantIsCollectedOnceWhicheverInstancePolls(_ kind: StoreKind) async throws {
        let harness = try kind.harness()
        let clock = StoreConformanceTests.clock()
        let first = try await harness.open(clock: clock)
        let second = try await harness.open(clock: clock)
        let code = OpaqueToken.hash("tbd_shared")
        #expect(try await first.issueDeviceCode(code, device("FGHJKLMN", clock: clock)))
        #expect(try await second.pendingDeviceCode(userCode: UserCode.hash("FGHJKLMN"), now: clock.seconds)?.code == code)
        #expect(try await second.decideDeviceCode(code, .signedIn(Self.grant, login: Self.login), now: clock.seconds).answer != nil)
        #expect(try await first.decideDeviceCode(code, .confirm(login: Self.login), now: clock.seconds).answer != nil)
        let polls = try await withThrowingTaskGroup(of: DevicePoll.self) { group in
            for store in [first, second, first, second] {
                group.addTask { try await store.pollDeviceCode(code, app: "tv", session: Self.polled, keyThumbprint: nil, now: clock.seconds).answer }
            }
            return try await group.reduce(into: [DevicePoll]()) { $0.append($1) }
        }
        #expect(polls.filter { if case .approved = $0 { true } else { false } }.count == 1)
        await first.close()
        await second.close()
    }
}

/// User codes (RFC 8628 §6.1) and the polling rules, without a store.
struct DeviceCodeRuleTests {
    @Test func userCodesAreEightConsonantsTypedAnyWay() {
        #expect(UserCode.normalise("bcdf-ghjk") == "BCDFGHJK")
        #expect(UserCode.normalise(" BCDF GHJK ") == "BCDFGHJK")
        #expect(UserCode.normalise("BCDFGHJK") == "BCDFGHJK")
        #expect(UserCode.normalise("BCDA-GHJK") == nil, "a vowel")
        #expect(UserCode.normalise("BCDF-GHJ") == nil, "seven letters")
        #expect(UserCode.normalise("BCDF-GHJK1") == nil)
        #expect(UserCode.display("BCDFGHJK") == "BCDF-GHJK")
        var seen = Set<Character>()
        for _ in 0..<500 {
            let code = UserCode.make()
            #expect(UserCode.normalise(code) == code)
            seen.formUnion(code)
        }
        #expect(seen == Set(UserCode.alphabet), "every letter is drawn")
    }

    @Test func aPollWithinTheToleranceIsNotTooFast() {
        var device = DeviceAuthorization(app: "tv", provider: "dev", scopes: [], userCode: UserCode.hash("BCDFGHJK"),
                                         expiresAt: 1_000, interval: 5, lastPolledAt: nil, status: .pending)
        let session = OpaqueToken.hash("tbs_polled")
        guard case .pending = device.poll(by: "tv", at: 100, session: session, keyThumbprint: nil).0 else { Issue.record("first poll"); return }
        guard case .pending = device.poll(by: "tv", at: 104.2, session: session, keyThumbprint: nil).0 else { Issue.record("4.2 s after is within the 1 s tolerance"); return }
        guard case .slowDown(let interval) = device.poll(by: "tv", at: 105, session: session, keyThumbprint: nil).0 else { Issue.record("0.8 s after"); return }
        #expect(interval == 10 && device.interval == 10)
        device.status = .approved(Grant(provider: "dev", subject: "s", scopes: [], accessToken: "a", accessTokenExpiresAt: nil,
                                        refreshToken: nil, idTokenClaims: nil, signedInAt: 0))
        let (collected, effects) = device.poll(by: "tv", at: 105.1, session: session, keyThumbprint: nil)
        guard case .approved = collected, case .makeSession(let made)? = effects.first, made.id == session else {
            Issue.record("an approved code is collected even when polled fast")
            return
        }
    }
}
