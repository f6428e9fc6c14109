import WireValues

/// The bound on guessing user codes at `/device` (RFC 8628 §5.1): wrong codes per minute for all
/// clients together (`device_code_misses_per_minute`), so that no number of addresses gets more
/// tries; and, so that a small group of clients cannot spend that budget for everyone, a share
/// of it per network (an IPv4 /24, an IPv6 /48: a tenth) and per client (an IPv4 address, an
/// IPv6 /64: a twentieth), which a client meets first. Spending the whole budget then takes
/// clients in ten networks or more (docs/api.md, "Signing in a device").
struct UserCodeGuard: Sendable {
    private let everyone: RateLimiter
    private let network: RateLimiter
    private let client: RateLimiter

    /// `missesPerMinute` 0 means no limit.
    init(missesPerMinute: Int) {
        everyone = RateLimiter(perMinute: missesPerMinute)
        network = RateLimiter(perMinute: missesPerMinute == 0 ? 0 : max(1, missesPerMinute / 10))
        client = RateLimiter(perMinute: missesPerMinute == 0 ? 0 : max(1, missesPerMinute / 20))
    }

    /// Nil when `address` may try a code now; otherwise the seconds until it may.
    func wait(_ address: String, now: Double) -> Double? {
        client.wait(address, now: now) ?? network.wait(ClientKey.network(of: address), now: now) ?? everyone.wait("all", now: now)
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
