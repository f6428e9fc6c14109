import BrokerCrypto

/// A device authorization (RFC 8628) from `POST /device/authorize` to the device's last poll at
/// `POST /token`: found by the hash of its device code, and while it waits for the user also by
/// the hash of its user code. Lives `sessions.device_code_lifetime_seconds`.
struct DeviceAuthorization: Sendable {
    enum Status: Sendable {
        /// Waiting for the user to enter the code, and sign in or refuse.
        case pending
        /// The user signed in: the grant the device collects at its next poll.
        case approved(Grant)
        /// The user refused; the code is spent.
        case denied
        /// The device collected its session; the code never works again.
        case collected
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

    /// A poll sooner than this before `interval` has passed is not yet too fast: clients sleep
    /// `interval` between polls, and their requests' travel times vary.
    static let pollTolerance = 1.0

    /// Whether the user can still act on it at `now`.
    func isPending(at now: Double) -> Bool {
        if case .pending = status { return expiresAt > now }
        return false
    }

    /// A poll at `now` by `app`: what the device is told, with the record changed accordingly
    /// (the grant taken, the interval grown, the time of the poll).
    mutating func poll(by app: String, at now: Double) -> DevicePoll {
        guard app == self.app else { return .unknown }
        switch status {
        case .collected:
            return .collected
        case .denied:
            return .denied
        case .approved(let grant):
            guard expiresAt > now else { return .expired }
            status = .collected
            lastPolledAt = now
            return .approved(grant)
        case .pending:
            guard expiresAt > now else { return .expired }
            defer { lastPolledAt = now }
            if let last = lastPolledAt, now - last < interval - Self.pollTolerance {
                interval += 5
                return .slowDown(interval: interval)
            }
            return .pending
        }
    }

    /// Records the user's decision while the code is pending at `now`; false when it is not.
    mutating func decide(_ decision: DeviceDecision, at now: Double) -> Bool {
        guard isPending(at: now) else { return false }
        switch decision {
        case .approve(let grant): status = .approved(grant)
        case .deny: status = .denied
        }
        return true
    }
}

/// The user's answer at `/device`, after the provider's sign-in for an approval.
enum DeviceDecision: Sendable {
    case approve(Grant)
    case deny
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
    /// The user signed in: the grant, taken (a later poll finds the code collected).
    case approved(Grant)
    /// The code was used already.
    case collected
}
