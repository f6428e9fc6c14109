import BrokerCrypto
import HTTPServer

extension Refresher.Outcome {
    /// The session, or the error a client gets.
    func session() throws(HTTPError) -> Session {
        switch self {
        case .fresh(let session): return session
        case .loginRequired: throw .loginRequired("The provider no longer honours this sign-in; start again at /authorize.")
        case .gone: throw .invalidToken("The session token is unknown, expired or revoked.")
        case .failed(let error): throw error.httpError
        case .unsaved: throw .unsaved
        case .tooSoon(let seconds):
            throw HTTPError(
                status: 429, code: "rate_limited",
                description: "This session's token was refreshed moments ago; use it, or retry later.",
                headers: [HTTPHeader("Retry-After", String(seconds))]
            )
        }
    }
}

extension Refresher {
    /// The session refreshed as `refresh` does, or the error its outcome means for a client.
    func session(_ id: SHA256Digest, force: Bool, minimumValidity: Double) async throws(HTTPError) -> Session {
        try await refresh(id, force: force, minimumValidity: minimumValidity).session()
    }
}
