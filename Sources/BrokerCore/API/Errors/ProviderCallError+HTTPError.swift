import HTTPServer

extension ProviderCallError {
    /// The error the client sees: 503 when the provider could not be reached, 502 otherwise.
    var httpError: HTTPError {
        if case .unavailable = self { return .upstreamUnavailable(description) }
        return .upstreamError(description)
    }
}
