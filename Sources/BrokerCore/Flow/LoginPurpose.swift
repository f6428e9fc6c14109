import BrokerCrypto

/// What a login is for, decided when it begins and acted on when it completes
/// (``LoginFlow/complete(_:state:with:)``): one value, so that a login cannot be both a device's
/// and an app's, nor an app's without a way back to it.
enum LoginPurpose: Sendable, Equatable {
    /// A sign-in for an app: the grant goes behind a handoff code sent to the app.
    case app(AppReturn)
    /// Incremental authorization: the grant merges into this session (same user only), and the
    /// handoff code sent to the app stands for it.
    case incremental(AppReturn, session: SHA256Digest)
    /// A device login (RFC 8628): the grant waits on this device code for its person to confirm
    /// the account.
    case device(SHA256Digest)
}

/// Where an app's login returns: the app's redirect URI exactly as it sent it, its own `state`
/// (returned untouched), and its S256 PKCE challenge (checked when the code is redeemed).
struct AppReturn: Sendable, Equatable {
    let redirectURI: String
    let state: String?
    let challenge: String
}

extension LoginPurpose {
    /// Its kind, for the log: `app`, `incremental` or `device`.
    var name: String {
        switch self {
        case .app: "app"
        case .incremental: "incremental"
        case .device: "device"
        }
    }
}
