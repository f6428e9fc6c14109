/// Whether the broker sends its authorization requests by Pushed Authorization Requests
/// (RFC 9126) first (`par`).
public enum PushedAuthorizationMode: String, Sendable, Hashable, CaseIterable {
    /// When the provider's discovery document has a `pushed_authorization_request_endpoint`.
    case auto
    /// Always; a provider without the endpoint is unusable (check-config and `/readyz` say why).
    case required
    /// Never; a provider that requires PAR (`require_pushed_authorization_requests`) is unusable.
    case off
}
