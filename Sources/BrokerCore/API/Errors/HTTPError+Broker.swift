import HTTPServer

/// The broker's own error answers: sessions, sign-ins, providers and saving.
extension HTTPError {
    /// 401 for a missing, unknown or expired session token (RFC 6750 §3).
    static func invalidToken(_ description: String) -> HTTPError {
        HTTPError(
            status: 401, code: "invalid_token", description: description,
            headers: [HTTPHeader("WWW-Authenticate", #"Bearer error="invalid_token""#)]
        )
    }

    /// 401: the provider no longer honours the grant; the session is gone and the app must start
    /// again at `/authorize`.
    static func loginRequired(_ description: String) -> HTTPError {
        HTTPError(
            status: 401, code: "login_required", description: description,
            headers: [HTTPHeader("WWW-Authenticate", #"Bearer error="invalid_token""#)]
        )
    }

    /// 409 at `GET /token`: the provider bound the session's access token to the broker's key
    /// (DPoP), so that it is of no use outside the broker; the API proxy uses it, once the
    /// provider has an `api_base_url`.
    static func providerTokenBound(provider: String, proxied: Bool) -> HTTPError {
        HTTPError(status: 409, code: "provider_token_bound", description: "The provider bound this session's access token to the broker's "
            + "DPoP key: it works only with the broker's proofs. Call the provider's API through /proxy/\(provider)/ instead"
            + (proxied ? "." : " (the provider needs an api_base_url in the broker's configuration)."))
    }

    /// 502: the provider answered with an error or something unreadable.
    static func upstreamError(_ description: String) -> HTTPError {
        HTTPError(status: 502, code: "upstream_error", description: description)
    }

    /// 503: a change could not be made durable; nothing the client could act on was lost.
    static let unsaved = HTTPError.serviceUnavailable(
        "temporarily_unavailable", "The broker could not save the change; retry shortly.", retryAfterSeconds: 5)

    /// 503: the provider could not be reached or did not answer in time.
    static func upstreamUnavailable(_ description: String) -> HTTPError {
        HTTPError(status: 503, code: "upstream_unavailable", description: description, headers: [HTTPHeader("Retry-After", "5")])
    }
}

extension StateReadError {
    /// A store that cannot be read now is a 503 for the client.
    var httpError: HTTPError {
        .serviceUnavailable("temporarily_unavailable", "The broker's state store cannot be read now; retry shortly.", retryAfterSeconds: 5)
    }
}

extension StateWriteError {
    /// A change that could not be made durable is a 503 for the client.
    var httpError: HTTPError { .unsaved }
}
