/// A thin client registered with the broker: one entry of the `apps` section.
public struct AppConfig: Sendable, Equatable {
    /// The app's id, the key under `apps`.
    public let id: String
    /// The redirect URIs the app may use, in the order written.
    public let redirectURIs: [RedirectURI]
    /// The providers the app may use; `nil` means every configured provider.
    public let providers: [String]?
    /// Whether the app may sign in devices (RFC 8628: `POST /device/authorize`); such an app
    /// needs no redirect URI.
    public let deviceFlow: Bool
    /// What a person is shown for the app (`display_name`, such as `Acme for TV`), or nil for its id.
    public let displayName: String?
    /// Whether the app's session tokens must be bound to a key of the app's (DPoP, RFC 9449).
    public let dpop: AppDPoP
    /// Whether the app's DPoP proofs must carry a nonce the broker gave out (RFC 9449 §8).
    public let dpopNonce: Bool

    /// Creates an app. The loader validates its input; this initializer does not.
    public init(id: String, redirectURIs: [RedirectURI], providers: [String]? = nil, deviceFlow: Bool = false, displayName: String? = nil,
                dpop: AppDPoP = .optional, dpopNonce: Bool = false) {
        self.id = id
        self.dpop = dpop
        self.dpopNonce = dpopNonce
        self.displayName = displayName
        self.redirectURIs = redirectURIs
        self.providers = providers
        self.deviceFlow = deviceFlow
    }

    /// The app's name for a person: its display name, else its id.
    public var shownName: String { displayName ?? id }

    /// Whether the app may use the provider with id `provider`.
    public func allows(provider: String) -> Bool {
        providers?.contains(provider) ?? true
    }

    /// The registered redirect URI that `candidate` matches, if any: an exact string match, or
    /// for a loopback URI the same URI on any port (RFC 8252 §7.3).
    public func matchRegistered(_ candidate: String) -> RedirectURI? {
        redirectURIs.first { $0.matches(candidate) }
    }
}

/// Whether an app binds its session tokens to a key (`dpop`).
public enum AppDPoP: String, Sendable, Hashable, CaseIterable {
    /// A token request with a DPoP proof makes a bound session; one without, a bearer session.
    case optional
    /// A token request without a DPoP proof is refused: every session of the app is bound.
    case required
}
