import BrokerCrypto

/// The broker's state: sessions, logins in progress and handoff codes.
///
/// The contract every implementation keeps (today `BrokerState`: memory + an encrypted journal
/// and snapshots on local disk; next, a shared store on PostgreSQL for several instances):
/// - Reads (`session`) never block on I/O: they are on the hot path (`GET /token`).
/// - A method marked `async throws` returns only once its change is durable — it survives a
///   crash of this process (`kill -9`) — or throws, and the caller then tells the client the
///   request failed. A client is never told about a session or token that a crash could lose.
/// - Changes to one key are applied and made durable in the order they were made.
/// - Logins in progress (`beginLogin`, `takeLogin`) are recorded without waiting: a crash may
///   lose one begun in the last moments; its user signs in again.
/// - Session tokens, handoff codes and `state` values are known only by their SHA-256 hashes.
/// - Expired entries are never returned; they are removed in the background.
protocol StateStore: Sendable {
    /// Runs `body` on the live session `id` without copying it (see `session` for a copy);
    /// nil when there is no such live session.
    func readSession<T: Sendable>(_ id: SHA256Digest, now: Double, _ body: (borrowing Session) -> T) -> T?
    /// Stores a new session; with `code`, also records that this handoff code created it (so a
    /// replay of the code can revoke it). Answers false when the code was replayed while the
    /// session was being made: the caller must revoke it.
    func saveSession(_ session: Session, createdBy code: SHA256Digest?) async throws(StateWriteError) -> Bool
    func updateSession(_ id: SHA256Digest, _ change: (inout Session) -> Void) async throws(StateWriteError) -> Session?
    func removeSession(_ id: SHA256Digest) async throws(StateWriteError) -> Session?

    func beginLogin(_ state: SHA256Digest, _ pending: PendingAuthorization)
    func takeLogin(_ state: SHA256Digest, now: Double) -> PendingAuthorization?
    func issueHandoff(_ code: SHA256Digest, _ handoff: Handoff) async throws(StateWriteError)
    func redeemHandoff(_ code: SHA256Digest, now: Double) async throws(StateWriteError) -> FlowStore.Redemption
}

extension StateStore {
    /// A copy of the live session `id`.
    func session(_ id: SHA256Digest, now: Double) -> Session? {
        readSession(id, now: now) { copy $0 }
    }
}
