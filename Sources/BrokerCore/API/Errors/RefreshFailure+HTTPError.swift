import HTTPServer

extension RefreshFailure {
    /// The error a client gets.
    var httpError: HTTPError {
        switch self {
        case .loginRequired: .loginRequired("The provider no longer honours this sign-in; start again at /authorize.")
        case .gone: .invalidToken("The session token is unknown, expired or revoked.")
        case .failed(let error): error.httpError
        case .unsaved: .unsaved
        case .tooSoon(let seconds):
            HTTPError(
                status: 429, code: "rate_limited",
                description: "This session's token was refreshed moments ago; use it, or retry later.",
                headers: [HTTPHeader("Retry-After", String(seconds))]
            )
        }
    }
}
