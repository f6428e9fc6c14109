import HTTPServer

extension LoginStartError {
    /// The error the client sees: 503 when the change or the provider can be retried, 502 when
    /// the provider refused or cannot serve this configuration.
    var httpError: HTTPError {
        switch self {
        case .unsaved(let error): error.httpError
        case .unsuitableProvider:
            .upstreamError("The provider does not offer what the broker's configuration of it relies on; the broker's log says what.")
        case .pushRefused(let error): error.httpError
        }
    }
}
