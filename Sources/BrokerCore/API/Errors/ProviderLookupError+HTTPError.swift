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

extension ProviderDirectory {
    /// The provider `id` for a route: the lookup's error as the client sees it.
    func provider(_ id: String) async throws(HTTPError) -> Provider {
        do throws(ProviderLookupError) {
            return try await resolve(id)
        } catch {
            throw error.httpError
        }
    }
}
