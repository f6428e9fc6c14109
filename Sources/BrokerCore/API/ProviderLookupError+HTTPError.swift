import HTTPServer

extension ProviderLookupError {
    /// The error the client sees.
    var httpError: HTTPError {
        switch self {
        case .unknown: .badRequest("Unknown provider.")
        case .discoveryFailed: .upstreamUnavailable("The provider's discovery document could not be fetched.")
        }
    }
}
