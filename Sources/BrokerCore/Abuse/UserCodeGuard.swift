import WireValues

/// The bound on guessing user codes at `/device` (RFC 8628 §5.1): wrong codes per minute for all
/// clients together (`device_code_misses_per_minute`), so that no number of addresses gets more
/// tries; and, so that a small group of clients cannot spend that budget for everyone, a share
/// of it per network (an IPv4 /24, an IPv6 /48: a tenth) and per client (an IPv4 address, an
/// IPv6 /64: a twentieth), which a client meets first.
///
/// Once the budget for everyone is spent, the networks that spent it — every network that sent
/// a wrong code lately — wait for it to refill; a network that sent none is still let through,
/// slowly (``Admission/slowed(_:)``): a person with the right code from an untouched network
/// gets in, while a guesser gets one slow try per network before its network counts as one
/// that spent the budget (docs/api.md, "Signing in a device").
struct UserCodeGuard: Sendable {
    private let everyone: RateLimiter
    private let network: RateLimiter
    private let client: RateLimiter

    /// How long an untouched network's code waits for its answer while the budget for everyone
    /// is spent.
    static let slowdownSeconds = 3.0

    /// `missesPerMinute` 0 means no limit.
    init(missesPerMinute: Int) {
        everyone = RateLimiter(perMinute: missesPerMinute)
        network = RateLimiter(perMinute: missesPerMinute == 0 ? 0 : max(1, missesPerMinute / 10))
        client = RateLimiter(perMinute: missesPerMinute == 0 ? 0 : max(1, missesPerMinute / 20))
    }

    /// Whether a code from an address may be looked up now.
    enum Admission: Equatable {
        case now
        /// After this many seconds: the budget for everyone is spent, and the address's network
        /// has sent no wrong code lately.
        case slowed(Double)
        /// Not before this many seconds.
        case refused(Double)
    }

    func admit(_ address: String, now: Double) -> Admission {
        let network = ClientKey.network(of: address)
        if let wait = client.wait(address, now: now) ?? self.network.wait(network, now: now) { return .refused(wait) }
        guard let wait = everyone.wait("all", now: now) else { return .now }
        return self.network.isUntouched(network, now: now) && client.isUntouched(address, now: now)
            ? .slowed(Self.slowdownSeconds) : .refused(wait)
    }

    /// Counts a wrong code from `address`. Its client's and network's shares count it even past
    /// their budget (codes tried together while they had room are each paid for, by them alone:
    /// ``RateLimiter/charge(_:now:)``); the budget for everyone is only spent down to empty, so
    /// that a burst from one network cannot put everyone's entries in debt.
    func miss(_ address: String, now: Double) {
        client.charge(address, now: now)
        network.charge(ClientKey.network(of: address), now: now)
        _ = everyone.take("all", now: now)
    }
}
