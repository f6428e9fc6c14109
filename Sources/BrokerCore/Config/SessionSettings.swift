/// How long sessions, logins, handoff codes and device codes live, and when tokens are refreshed: the
/// `sessions` section. Every value is in seconds.
public struct SessionSettings: Sendable, Equatable {
    /// A session not used for this long ends.
    public var idleLifetimeSeconds: Double
    /// A session ends this long after sign-in, however much it is used. Never shorter than
    /// ``idleLifetimeSeconds``.
    public var absoluteLifetimeSeconds: Double
    /// `GET /token` refreshes an access token that expires within this.
    public var refreshSkewSeconds: Double
    /// A session's token is refreshed at the provider at most once in this many seconds while it
    /// has not expired, however a client insists (`POST /refresh`, a `min_ttl` above the
    /// provider's lifetime); 0 removes the bound.
    public var minRefreshIntervalSeconds: Double
    /// How long a `GET /profile` answer is cached; 0 turns the cache off.
    public var profileCacheSeconds: Double
    /// Time from `GET /authorize` to the provider's redirect back to `/callback`: the life of the
    /// broker's `state`.
    public var loginLifetimeSeconds: Double
    /// Time the app has to redeem a handoff code at `POST /token`.
    public var handoffLifetimeSeconds: Double
    /// Time a device code and its user code can be used (RFC 8628 `expires_in`).
    public var deviceCodeLifetimeSeconds: Double
    /// Time a device waits between polls (RFC 8628 `interval`).
    public var devicePollIntervalSeconds: Double
    /// Time a queued revocation is retried while its provider does not confirm it; then it is
    /// given up, with an audit event.
    public var revocationRetrySeconds: Double

    /// Creates session settings; the defaults are those of the embedded configuration, written
    /// here only.
    public init(idleLifetimeSeconds: Double = 2_592_000, absoluteLifetimeSeconds: Double = 7_776_000,
                refreshSkewSeconds: Double = 60, profileCacheSeconds: Double = 60,
                loginLifetimeSeconds: Double = 600, handoffLifetimeSeconds: Double = 60,
                minRefreshIntervalSeconds: Double = 30, deviceCodeLifetimeSeconds: Double = 600,
                devicePollIntervalSeconds: Double = 5, revocationRetrySeconds: Double = 604_800) {
        self.idleLifetimeSeconds = idleLifetimeSeconds
        self.absoluteLifetimeSeconds = absoluteLifetimeSeconds
        self.refreshSkewSeconds = refreshSkewSeconds
        self.profileCacheSeconds = profileCacheSeconds
        self.loginLifetimeSeconds = loginLifetimeSeconds
        self.handoffLifetimeSeconds = handoffLifetimeSeconds
        self.minRefreshIntervalSeconds = minRefreshIntervalSeconds
        self.deviceCodeLifetimeSeconds = deviceCodeLifetimeSeconds
        self.devicePollIntervalSeconds = devicePollIntervalSeconds
        self.revocationRetrySeconds = revocationRetrySeconds
    }

    /// Accepted range of `idle_lifetime_seconds`: one minute to five years.
    static let idleLifetimeSecondsRange = 60.0...157_680_000.0
    /// Accepted range of `absolute_lifetime_seconds` (also at least `idle_lifetime_seconds`).
    static let absoluteLifetimeSecondsRange = 60.0...157_680_000.0
    /// Accepted range of `refresh_skew_seconds`: up to one hour.
    static let refreshSkewSecondsRange = 0.0...3_600.0
    /// Accepted range of `min_refresh_interval_seconds`: off, or up to one hour.
    static let minRefreshIntervalSecondsRange = 0.0...3_600.0
    /// Accepted range of `profile_cache_seconds`: off, or up to one hour.
    static let profileCacheSecondsRange = 0.0...3_600.0
    /// Accepted range of `login_lifetime_seconds`: ten seconds to one hour.
    static let loginLifetimeSecondsRange = 10.0...3_600.0
    /// Accepted range of `handoff_lifetime_seconds`: five seconds to ten minutes.
    static let handoffLifetimeSecondsRange = 5.0...600.0
    /// Accepted range of `device_code_lifetime_seconds`: ten seconds to one hour.
    static let deviceCodeLifetimeSecondsRange = 10.0...3_600.0
    /// Accepted range of `device_poll_interval_seconds`: one second to a minute.
    static let devicePollIntervalSecondsRange = 1.0...60.0
    /// Accepted range of `revocation_retry_seconds`: a minute to ninety days.
    static let revocationRetrySecondsRange = 60.0...7_776_000.0
}

extension SessionSettings {
    /// How long sessions live, as the stores and the answers that say when a session ends use it.
    var lifetimes: SessionLifetimes { SessionLifetimes(idle: idleLifetimeSeconds, absolute: absoluteLifetimeSeconds) }
}
