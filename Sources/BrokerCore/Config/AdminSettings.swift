public import WireValues

/// `admin`: the admin API (docs/admin.md), off unless `admin.listen` or
/// `admin.token_file` is set. On a listener of its own (`listen`), or on the public listener,
/// where it always needs its bearer token (`token`): the loader refuses the public listener, or
/// an admin listener off loopback, without one.
public struct AdminSettings: Sendable {
    /// The admin API's own listener; nil: the public listener's `/admin/…` paths.
    public let listen: ListenAddress?
    /// The bearer token every admin call must carry; nil only on a loopback listener of its own.
    public let token: Secret?
    /// The reverse proxies whose `X-Forwarded-For` names the client on the admin listener:
    /// its own (none by default), as the public listener's proxies are not the operators'.
    public let trustedProxies: [IPNetwork]
    /// `/metrics` on the admin listener only, not on the public one.
    public let metricsOnly: Bool

    /// The shortest token accepted, in characters (`token-broker gen-key` makes 44).
    static let minimumTokenLength = 32

    /// The hosts a token-less admin listener may bind: those a local client's `Host` names, which
    /// is all such a listener accepts (a rebound name arrives with its own).
    static let tokenlessHosts: Set<String> = ["127.0.0.1", "::1", "localhost"]

    public init(listen: ListenAddress?, token: Secret?, trustedProxies: [IPNetwork] = [], metricsOnly: Bool = false) {
        self.listen = listen
        self.token = token
        self.trustedProxies = trustedProxies
        self.metricsOnly = metricsOnly
    }
}
