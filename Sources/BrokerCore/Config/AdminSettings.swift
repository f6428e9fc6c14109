/// `admin`: the admin API (docs/admin.md), off unless `admin.listen` or
/// `admin.token_file` is set. On a listener of its own (`listen`), or on the public listener,
/// where it always needs its bearer token (`token`): the loader refuses the public listener, or
/// an admin listener off loopback, without one.
public struct AdminSettings: Sendable {
    /// The admin API's own listener; nil: the public listener's `/admin/…` paths.
    public let listen: ListenAddress?
    /// The bearer token every admin call must carry; nil only on a loopback listener of its own.
    public let token: Secret?

    /// The shortest token accepted, in characters (`token-broker gen-key` makes 44).
    static let minimumTokenLength = 32

    public init(listen: ListenAddress?, token: Secret?) {
        self.listen = listen
        self.token = token
    }
}
