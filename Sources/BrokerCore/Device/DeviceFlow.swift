import BrokerCrypto
import Logging

/// The device authorization grant (RFC 8628) in front of any provider: a device asks for codes
/// (`start`), its user enters the user code at `/device` on another device (`find`) and refuses
/// (`deny`) or signs in at the provider (`signIn`, through the ordinary login flow, whose
/// completion approves the code), while the device polls (`poll`) until it collects a session.
/// Takes and returns domain values; the API layer reads requests and writes pages and answers.
struct DeviceFlow: Sendable {
    let settings: SessionSettings
    let login: LoginFlow
    let store: any StateStore
    let metrics: BrokerMetrics
    let now: BrokerClock

    /// Codes handed to a device.
    struct Codes: Sendable {
        /// The device's secret, `tbd_…`; only its hash is kept.
        let deviceCode: String
        /// Normalised (no dash); shown with a dash after four letters.
        let userCode: String
        let expiresIn: Double
        let interval: Double
    }

    /// Issues codes for `app` at `provider`, asking for the provider's configured scopes and
    /// `scopes`. Throws when they cannot be stored durably.
    func start(app: String, provider: ProviderConfig, scopes: [String]) async throws(StateWriteError) -> Codes {
        var all = provider.scopes
        for scope in scopes where !all.contains(scope) { all.append(scope) }
        let deviceCode = OpaqueToken.make(prefix: OpaqueToken.devicePrefix)
        // Two live codes sharing a user code is rare (a few in 10^10 per pair); draw again then.
        for _ in 0..<8 {
            let userCode = UserCode.make()
            let device = DeviceAuthorization(
                app: app, provider: provider.id, scopes: all, userCode: UserCode.hash(userCode),
                expiresAt: now() + settings.deviceCodeLifetimeSeconds, interval: settings.devicePollIntervalSeconds,
                lastPolledAt: nil, status: .pending
            )
            if try await store.issueDeviceCode(OpaqueToken.hash(deviceCode), device) {
                metrics.deviceCode(outcome: "issued")
                return Codes(deviceCode: deviceCode, userCode: userCode, expiresIn: settings.deviceCodeLifetimeSeconds,
                             interval: settings.devicePollIntervalSeconds)
            }
        }
        throw StateWriteError(description: "no free user code was drawn")
    }

    /// A device code waiting for its user.
    struct Waiting: Sendable {
        let code: SHA256Digest
        let device: DeviceAuthorization
        /// The user code, normalised.
        let userCode: String
    }

    /// The device code waiting under the user code a person typed; nil when there is none (or
    /// the text cannot be a user code).
    func find(typed: String) async throws(StateReadError) -> Waiting? {
        guard let userCode = UserCode.normalise(typed) else { return nil }
        guard let found = try await store.pendingDeviceCode(userCode: UserCode.hash(userCode), now: now()) else { return nil }
        return Waiting(code: found.code, device: found.device, userCode: userCode)
    }

    /// The device code `code` while it waits, when `typed` is its user code; nil otherwise.
    func waiting(_ code: SHA256Digest, typed: String) async throws(StateReadError) -> Waiting? {
        guard let userCode = UserCode.normalise(typed), let device = try await store.deviceCode(code, now: now()),
              device.userCode == UserCode.hash(userCode), device.isPending(at: now()) else { return nil }
        return Waiting(code: code, device: device, userCode: userCode)
    }

    /// The user refused: the code is spent, and the device is told `access_denied`. False when
    /// it was no longer waiting.
    func deny(_ waiting: Waiting) async throws(StateWriteError) -> Bool {
        let denied = try await store.decideDeviceCode(waiting.code, .deny(login: nil), now: now()).answer != nil
        if denied { metrics.deviceCode(outcome: "denied") }
        return denied
    }

    /// The user chose to go on: a login at the provider whose completion holds the grant on the
    /// code (``LoginFlow/complete(_:state:with:)``); the provider's authorization URL and the
    /// login's `state`, to which the API layer binds the browser.
    func signIn(_ waiting: Waiting, at provider: Provider) async throws(LoginStartError) -> (location: String, state: String) {
        let request = LoginRequest(
            provider: provider.id, app: waiting.device.app, scopes: waiting.device.scopes, loginHint: nil, prompt: nil,
            purpose: .device(waiting.code)
        )
        let state = OpaqueToken.make(prefix: OpaqueToken.statePrefix)
        return (try await login.begin(request, at: provider, state: state), state)
    }

    /// Where the confirmation of the login of `state` on the device code `code` stands: the
    /// account to ask about while the code waits for it, else what became of the device.
    enum Confirmation: Sendable {
        /// Signed in as `account`, not confirmed yet.
        case ask(account: String, app: String, provider: String)
        /// Confirmed: the device has, or will collect, its session.
        case confirmed
        /// Refused: the device gets nothing.
        case refused
        /// Expired, signed out, or another login's: nothing to confirm.
        case over
    }

    /// Where the confirmation of the login of `state` on `code` stands (a page a person may reload).
    func confirmation(_ code: SHA256Digest, state: String) async throws(StateReadError) -> Confirmation {
        guard let device = try await store.deviceCode(code, now: now()) else { return .over }
        switch device.status {
        case .signedIn(let grant, let login) where login == OpaqueToken.hash(state):
            return .ask(account: grant.accountName, app: device.app, provider: device.provider)
        case .approved, .collected:
            return .confirmed
        case .denied:
            return .refused
        case .pending, .signedIn, .signedOut, .expired:
            return .over
        }
    }

    /// The person who signed in with the login of `state` confirmed (`approve`) the account the
    /// device is to get, or refused it (its grant is then revoked at the provider, in the same
    /// change). False when the code holds no grant of that login (expired, already decided,
    /// another login's).
    func confirm(_ code: SHA256Digest, state: String, approve: Bool) async throws(StateWriteError) -> Bool {
        let login = OpaqueToken.hash(state)
        let decision: DeviceDecision = approve ? .confirm(login: login) : .deny(login: login)
        let decided = try await store.decideDeviceCode(code, decision, now: now())
        self.login.endings.announce(decided.ended)
        guard decided.answer != nil else { return false }
        metrics.deviceCode(outcome: approve ? "approved" : "denied")
        return true
    }

    /// A poll by `app` with `deviceCode`: a new session once the user has signed in and confirmed
    /// the account (made in the same change as the poll, durable before its token is returned),
    /// else why not yet or not at all.
    func poll(deviceCode: String, app: String, keyThumbprint: String? = nil) async throws(DevicePollRefusal) -> RedeemedSession {
        let token = OpaqueToken.make(prefix: OpaqueToken.sessionPrefix)
        let polled: Transition<DevicePoll>
        do {
            polled = try await store.pollDeviceCode(OpaqueToken.hash(deviceCode), app: app, session: OpaqueToken.hash(token), keyThumbprint: keyThumbprint, now: now())
        } catch {
            throw .unsaved
        }
        let poll = polled.answer
        if case .unknown = poll {} else { metrics.deviceCode(outcome: "polled") }
        switch poll {
        case .unknown: throw .unknownCode
        case .collected: throw .used
        case .expired:
            metrics.deviceCode(outcome: "expired")
            throw .expired
        case .pending: throw .pending
        case .slowDown(let interval): throw .slowDown(interval: interval)
        case .denied: throw .denied
        case .signedOut: throw .signedOut
        case .approved(let signIn):
            guard let session = polled.made else { throw .unsaved }
            metrics.deviceCode(outcome: "collected")
            login.logger.notice("sign-in completed", metadata: SignInLog.metadata(signIn, [
                "provider": "\(session.provider)", "app": "\(session.app)", "session": "\(session.id.hex)",
            ]))
            return RedeemedSession(session: session, token: token)
        }
    }
}

/// Why a device's poll got no session (RFC 8628 §3.5).
enum DevicePollRefusal: Error, Sendable, Equatable {
    case unknownCode
    /// The code already gave its session.
    case used
    case expired
    case pending
    case slowDown(interval: Double)
    case denied
    /// The user signed out before the device collected the sign-in.
    case signedOut
    /// The store could not record the poll now.
    case unsaved
}
