import BrokerCrypto

/// A device authorization (RFC 8628) from `POST /device/authorize` to the device's last poll at
/// `POST /token`: found by the hash of its device code, and while it waits for the user also by
/// the hash of its user code. Lives `sessions.device_code_lifetime_seconds`. ``poll(by:at:session:)``,
/// ``decide(_:at:)``, ``expire(at:)`` and ``end(_:)`` are the one rule for each step, which both
/// stores apply (docs/lifecycle.md).
struct DeviceAuthorization: Sendable {
    enum Status: Sendable {
        /// Waiting for the user to enter the code, and sign in or refuse.
        case pending
        /// The user signed in at the provider, in the browser that chose to (``DeviceRoutes``):
        /// the grant waits for them to confirm, on the broker, that this account is the one the
        /// device gets. `login` is the hash of that login's `state`, which the confirmation names.
        case signedIn(Grant, login: SHA256Digest)
        /// The user confirmed the account: the grant the device collects at its next poll.
        case approved(Grant)
        /// The user refused; the code is spent.
        case denied
        /// The device collected its session; the code never works again.
        case collected
        /// Its user signed out (or was signed out by an admin) before the device collected the
        /// grant, which was revoked.
        case signedOut
        /// It expired holding a grant nobody collected, which was revoked.
        case expired
    }

    let app: String
    let provider: String
    /// The scopes the sign-in asks for: the provider's configured ones and those the device asked for.
    let scopes: [String]
    /// The hash of the normalised user code (``UserCode``).
    let userCode: SHA256Digest
    let expiresAt: Double
    /// Seconds the device waits between polls; 5 more after each `slow_down` (RFC 8628 §3.5).
    var interval: Double
    /// When the device last polled; not made durable (after a restart the next poll is not too fast).
    var lastPolledAt: Double?
    var status: Status

    /// The grant the code holds for a device that has not collected it (signed in, or approved):
    /// when the code expires so, the grant is revoked at the provider.
    var uncollectedGrant: Grant? {
        switch status {
        case .signedIn(let grant, _), .approved(let grant): grant
        case .pending, .denied, .collected, .signedOut, .expired: nil
        }
    }

    /// A poll sooner than this before `interval` has passed is not yet too fast: clients sleep
    /// `interval` between polls, and their requests' travel times vary.
    static let pollTolerance = 1.0

    /// Whether the user can still act on it at `now`.
    func isPending(at now: Double) -> Bool {
        if case .pending = status { return expiresAt > now }
        return false
    }

    /// A poll at `now` by `app`: what the device is told, with the record changed accordingly
    /// (the grant taken as the session `session` names — bound to the key `keyThumbprint` names,
    /// when there is one — the interval grown, the time of the poll).
    mutating func poll(by app: String, at now: Double, session: SHA256Digest, keyThumbprint: String?) -> (DevicePoll, [GrantEffect]) {
        guard app == self.app else { return (.unknown, []) }
        switch status {
        case .collected:
            return (.collected, [])
        case .denied:
            return (.denied, [])
        case .signedOut:
            return (.signedOut, [])
        case .expired:
            return (.expired, [])
        case .approved(let grant):
            guard expiresAt > now else { return (.expired, []) }
            status = .collected
            lastPolledAt = now
            return (.approved(signIn: grant.signInID), [.makeSession(Session(id: session, app: app, grant: grant, keyThumbprint: keyThumbprint, at: now))])
        case .pending, .signedIn:
            return (wait(at: now), [])
        }
    }

    /// A poll before the user is done: pending, or too fast.
    private mutating func wait(at now: Double) -> DevicePoll {
        guard expiresAt > now else { return .expired }
        defer { lastPolledAt = now }
        if let last = lastPolledAt, now - last < interval - Self.pollTolerance {
            interval += 5
            return .slowDown(interval: interval)
        }
        return .pending
    }

    /// Records the user's decision at `now` when it fits the code's status, and returns the
    /// status it had; nil when it does not fit (expired, already decided, another login). An
    /// account refused at its confirmation has its grant revoked.
    mutating func decide(_ decision: DeviceDecision, at now: Double) -> (Status?, [GrantEffect]) {
        guard expiresAt > now else { return (nil, []) }
        let before = status
        switch (decision, status) {
        case (.signedIn(let grant, let login), .pending):
            status = .signedIn(grant, login: login)
        case (.confirm(let login), .signedIn(let grant, let expected)) where login == expected:
            status = .approved(grant)
        case (.deny(nil), .pending):
            status = .denied
        case (.deny(let login?), .signedIn(let grant, let expected)) where login == expected:
            status = .denied
            return (before, [.revoke(grant, held: .deviceCode, app: app, .deviceRefused)])
        default:
            return (nil, [])
        }
        return (before, [])
    }

    /// Past its lifetime at `now`: a grant it holds for a device that never collected it is
    /// revoked (a sweep, which forgets the code after the replay memory).
    mutating func expire(at now: Double) -> [GrantEffect] {
        guard expiresAt <= now, let grant = uncollectedGrant else { return [] }
        status = .expired
        return [.revoke(grant, held: .deviceCode, app: app, .codeExpired)]
    }

    /// Its user signed out (`signOut`): a grant it holds and `signOut` covers is revoked, and the
    /// device is told so at its next poll.
    mutating func end(_ signOut: SignOut) -> [GrantEffect] {
        guard let grant = uncollectedGrant, signOut.filter.matches(grant, app: app) else { return [] }
        status = .signedOut
        return [.revoke(grant, held: .deviceCode, app: app, signOut.reason)]
    }
}

/// A step of the user's at `/device` and at the provider.
enum DeviceDecision: Sendable {
    /// Signed in at the provider in the login whose `state` hashes to `login`: the grant waits
    /// for the account to be confirmed.
    case signedIn(Grant, login: SHA256Digest)
    /// Confirmed the account of the login `login` signed in with: the device may collect it.
    case confirm(login: SHA256Digest)
    /// Refused: while the code waits (nil), or at the account's confirmation of the login `login`.
    case deny(login: SHA256Digest?)
}

/// What a poll finds (RFC 8628 §3.5).
enum DevicePoll: Sendable {
    /// No such device code, or one issued to another app.
    case unknown
    case expired
    /// `authorization_pending`.
    case pending
    /// `slow_down`: polled sooner than the interval, which is now `interval`.
    case slowDown(interval: Double)
    /// `access_denied`: the user refused.
    case denied
    /// `access_denied`: the user signed out before the device collected the sign-in.
    case signedOut
    /// The user signed in and confirmed the account: the grant became the poll's session (a
    /// later poll finds the code collected); `signIn` is the sign-in's id, for the log.
    case approved(signIn: String?)
    /// The code was used already.
    case collected
}
