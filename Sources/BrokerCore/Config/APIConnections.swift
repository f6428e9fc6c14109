/// Whose calls share the API proxy's connections to a provider's API (`api_connections`).
public enum APIConnections: String, Sendable, Equatable, CaseIterable {
    /// Every session's, as gateways pool upstream connections: one pool per API, whose
    /// connections (and TLS sessions) serve any user's calls. A connection is reused only after
    /// an answer libcurl framed exactly, so nothing an API sends past one answer reaches another.
    case shared
    /// Each session's own: no connection ever carries two users' calls. Every new user's first
    /// call opens a connection (with TLS, a handshake) and the pool keeps at most a few thousand
    /// sessions' connections (half the open-file limit).
    case perSession = "per_session"
}
