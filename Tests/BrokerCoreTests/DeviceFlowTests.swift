import BrokerCrypto
import Foundation
import Testing

@testable import BrokerCore

/// The device flow as a service (`DeviceFlow` with `LoginFlow`): codes, the person's sign-in
/// through the ordinary login flow, the account's confirmation, the device's polls — against the
/// in-process provider, over the in-memory store, with a clock the test moves.
struct DeviceFlowTests {
    private func devices(_ bed: FlowTestBed) -> DeviceFlow {
        DeviceFlow(settings: bed.settings, login: bed.login, store: bed.store, metrics: BrokerMetrics(), now: bed.clock.closure)
    }

    /// Starts codes for app `tv`, finds them by the typed user code and signs in at the provider:
    /// the device code, the login the provider's redirect completes, its code and its state.
    private func signIn(_ bed: FlowTestBed, _ flow: DeviceFlow) async throws -> (DeviceFlow.Codes, PendingAuthorization, String, String) {
        let codes = try await flow.start(app: "tv", provider: ScriptedProvider.config(), scopes: ["profile"])
        let waiting = try #require(try await flow.find(typed: UserCode.display(codes.userCode).lowercased()))
        #expect(waiting.device.scopes == ["openid", "email", "profile"] && waiting.device.app == "tv")
        let started = try await flow.signIn(waiting, at: try await bed.login.providers.resolve("idp"))
        let (code, state) = try bed.provider.signIn(started.location, subject: "alice")
        #expect(state == started.state)
        let pending = try #require(try await bed.login.takeLogin(state: state))
        #expect(pending.purpose == .device(OpaqueToken.hash(codes.deviceCode)))
        return (codes, pending, code, state)
    }

    private static func answer(_ code: String) -> CallbackAnswer {
        CallbackAnswer(code: code, error: nil, errorDescription: nil, issuer: nil)
    }

    @Test(arguments: StoreKind.allCases)
    func aDeviceSignedInThroughTheLoginFlowCollectsOneSession(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let flow = devices(bed)
            let (codes, pending, code, state) = try await signIn(bed, flow)
            await #expect(throws: DevicePollRefusal.pending) { try await flow.poll(deviceCode: codes.deviceCode, app: "tv") }
            let completion = await bed.login.complete(pending, state: state, with: Self.answer(code))
            #expect(completion == .device(OpaqueToken.hash(codes.deviceCode), .signedIn(account: "alice@example.test")))
            #expect(try await flow.find(typed: codes.userCode) == nil, "a signed-in code is no longer waiting for its code")
            bed.clock.advance(by: codes.interval)
            await #expect(throws: DevicePollRefusal.pending, "nothing to collect before the account is confirmed") {
                try await flow.poll(deviceCode: codes.deviceCode, app: "tv")
            }
            let device = OpaqueToken.hash(codes.deviceCode)
            #expect(try await flow.confirm(device, state: "tbst_another-login", approve: true) == false, "another login's confirmation")
            #expect(try await flow.confirm(device, state: state, approve: true))
            #expect(try await flow.confirm(device, state: state, approve: true) == false, "confirmed once")
            bed.clock.advance(by: codes.interval)
            await #expect(throws: DevicePollRefusal.unknownCode) { try await flow.poll(deviceCode: codes.deviceCode, app: "other") }
            let collected = try await flow.poll(deviceCode: codes.deviceCode, app: "tv")
            let token = try #require(collected.token)
            let stored = try #require((try await bed.stored(OpaqueToken.hash(token))))
            #expect(stored.subject == "alice" && stored.app == "tv" && stored.scopes.contains("profile") && bed.provider.accepts(stored.accessToken))
            await #expect(throws: DevicePollRefusal.used) { try await flow.poll(deviceCode: codes.deviceCode, app: "tv") }
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aCodeThatExpiredDuringTheSignInGetsNothingAndTheGrantIsRevoked(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let flow = devices(bed)
            let (codes, pending, code, state) = try await signIn(bed, flow)
            bed.clock.advance(by: bed.settings.deviceCodeLifetimeSeconds + 1)
            let completion = await bed.login.complete(pending, state: state, with: Self.answer(code))
            #expect(completion.refusal?.error == "expired_token", "not held after expiry")
            await bed.endings.revocations.deliverDue()
            #expect(!bed.provider.revoked.isEmpty, "the grant nobody will collect is revoked at the provider")
            await #expect(throws: DevicePollRefusal.expired) { try await flow.poll(deviceCode: codes.deviceCode, app: "tv") }
            #expect(bed.store.sessionCount == 0)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aRefusalAtTheProviderDeniesTheDevice(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let flow = devices(bed)
            let (codes, pending, _, state) = try await signIn(bed, flow)
            let answer = CallbackAnswer(code: nil, error: "access_denied", errorDescription: "no", issuer: nil)
            #expect(await bed.login.complete(pending, state: state, with: answer).refusal == LoginRefusal(error: "access_denied", description: "no"))
            await #expect(throws: DevicePollRefusal.denied) { try await flow.poll(deviceCode: codes.deviceCode, app: "tv") }
        }
    }

    @Test(arguments: StoreKind.allCases)
    func anAccountRefusedAtTheConfirmationDeniesTheDeviceAndIsRevoked(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let flow = devices(bed)
            let (codes, pending, code, state) = try await signIn(bed, flow)
            _ = await bed.login.complete(pending, state: state, with: Self.answer(code))
            #expect(bed.provider.revoked.isEmpty)
            #expect(try await flow.confirm(OpaqueToken.hash(codes.deviceCode), state: state, approve: false))
            await bed.endings.revocations.deliverDue()
            #expect(!bed.provider.revoked.isEmpty, "the grant nobody will collect is revoked at the provider")
            #expect(bed.audit.events("session.ended").map { $0["reason"] } == ["device_refused"])
            bed.clock.advance(by: codes.interval)
            await #expect(throws: DevicePollRefusal.denied) { try await flow.poll(deviceCode: codes.deviceCode, app: "tv") }
            #expect(bed.store.sessionCount == 0)
        }
    }
}
