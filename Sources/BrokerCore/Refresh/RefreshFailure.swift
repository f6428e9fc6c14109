/// Why a caller who needed the session refreshed did not get it: every outcome of
/// ``Refresher/refresh(_:force:minimumValidity:)`` but a fresh session.
enum RefreshFailure: Error, Sendable {
    /// The provider ended the grant, or there is nothing to refresh with: the session is gone.
    case loginRequired
    /// The session does not exist (any more).
    case gone
    /// A transient or provider-side failure; the session is kept.
    case failed(ProviderCallError)
    /// The outcome could not be saved.
    case unsaved
    /// Forced within the minimum interval of the session's last refresh.
    case tooSoon(retryAfter: Int)
}

extension Refresher.Outcome {
    /// The fresh session, or why there is none.
    func session() throws(RefreshFailure) -> Session {
        switch self {
        case .fresh(let session): return session
        case .loginRequired: throw .loginRequired
        case .gone: throw .gone
        case .failed(let error): throw .failed(error)
        case .unsaved: throw .unsaved
        case .tooSoon(let seconds): throw .tooSoon(retryAfter: seconds)
        }
    }
}
