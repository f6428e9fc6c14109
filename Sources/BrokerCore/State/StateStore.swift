import BrokerCrypto

/// The broker's state: sessions, logins in progress, handoff codes and device codes. The only place where
/// state changes and is made durable; everything above it calls these methods.
///
/// Two implementations: `EmbeddedStateStore` (`State/Embedded/`: memory, with an encrypted journal
/// and snapshots on local disk, or memory only in development mode) and `PostgresStateStore`
/// (`State/Postgres/`: sealed rows in a database several broker instances share). Every
/// implementation keeps this contract:
///
/// - **Reads never wait for I/O.** `readSession` is on the hot path (`GET /token`) and answers
///   from memory. With several instances, a read may see another instance's change a moment
///   late (the bound is the store's to document); every change below is decided at the store,
///   never on a stale read. `loadSession` reads the store itself.
/// - **Durable before it returns.** A method marked `async throws` returns only once its change
///   survives a crash of this process and of the machine (synced to stable storage, or
///   committed), or throws `StateWriteError` — and then the caller tells its client that the
///   request failed. A client is never told of a session, token or code that a crash could lose.
/// - **One order per key.** Changes to one session or one code are applied and made durable in
///   the order they were made; concurrent `updateSession` calls on one session each see the
///   others' effects (none is lost), across instances too.
/// - **Single use is global.** A login (`takeLogin`), a handoff code (`redeemHandoff`) and a
///   device code's grant (`pollDeviceCode`) are taken once, whichever instance asks first; every
///   later attempt sees it taken.
/// - **Logins in progress are cheap.** `beginLogin` and `takeLogin` do not wait for durability
///   (a crash may lose a login begun in the last moments, and its user signs in again), only for
///   every instance to see them.
/// - **Only hashes.** Session tokens, handoff codes, device and user codes and `state` values
///   are known by their SHA-256 hashes; tokens inside a session are stored encrypted wherever they leave memory.
/// - **Expiry.** Expired entries are never returned; `sweep` removes them, over the store's own
///   clock, and `maintain` calls it periodically.
protocol StateStore: Sendable {
    // MARK: Sessions

    /// Runs `body` on the live session `id` in this instance's memory without copying it
    /// (``session(_:now:)`` copies); nil when it is not there at `now`. Never waits for I/O.
    /// When ``holdsEverySession`` is false, nil is not final: ``loadSession(_:now:)`` looks in the
    /// store itself.
    func readSession<T: Sendable>(_ id: SHA256Digest, now: Double, _ body: (borrowing Session) -> T) -> T?
    /// Whether every live session is in this instance's memory, so that a nil from
    /// ``readSession(_:now:_:)`` means there is no such session (the embedded store); a store
    /// shared by several instances keeps a bounded cache and answers false.
    var holdsEverySession: Bool { get }
    /// The live session `id` from the store itself, never from memory that may lag behind another
    /// instance's change (a shared store: its database), kept in memory afterwards; nil when there
    /// is none. Waits for I/O; throws when the store cannot be read now.
    func loadSession(_ id: SHA256Digest, now: Double) async throws(StateReadError) -> Session?
    /// Runs `refresh` while holding session `id`'s refresh lock, which at most one caller holds at
    /// a time across every instance sharing the store; a lock whose holder dies is released with
    /// it. The caller re-reads the session under the lock (``loadSession(_:now:)``): another
    /// instance may have refreshed it while this one waited. With one instance (the embedded
    /// store) the ``Refresher``'s own single-flight is that lock, and `refresh` runs at once.
    /// Throws when the lock cannot be had (the store is out of reach).
    func whileRefreshing<T: Sendable>(_ id: SHA256Digest, _ refresh: () async -> T) async throws(StateWriteError) -> T
    /// Stores a new session, durably. With `code`, also records that this handoff code created
    /// it, so that a replay of the code can revoke it. Answers false when the code was replayed
    /// while the session was being made: the caller must then remove the session.
    func saveSession(_ session: Session, createdBy code: SHA256Digest?) async throws(StateWriteError) -> Bool
    /// Applies `change` to the session `id` and makes the result durable; the session as
    /// changed, or nil when there is none. `change` runs on the current value at the store (with
    /// several instances: inside the store's own serialisation of that session), so concurrent
    /// changes compose.
    func updateSession(_ id: SHA256Digest, _ change: (inout Session) -> Void) async throws(StateWriteError) -> Session?
    /// Removes the session `id` durably; the removed session, or nil when there was none.
    func removeSession(_ id: SHA256Digest) async throws(StateWriteError) -> Session?

    /// The live sessions `filter` matches (a ``SessionFilter/isValid`` one), every instance's,
    /// in the order of their ids after `after`, at most `limit` of them: for the admin API and
    /// back-channel logout. Reads the store itself (a shared store: its database, finding a
    /// subject or provider session by its ``BlindIndex``); throws when it cannot be read now.
    func findSessions(_ filter: SessionFilter, after: SHA256Digest?, limit: Int, now: Double) async throws(StateReadError) -> SessionPage

    // MARK: Logins and handoff codes

    /// Records a login in progress under the hash of its `state`: visible to every instance when
    /// it returns (the provider may send the browser back to any of them), but not necessarily
    /// durable. Throws when the store is out of reach.
    func beginLogin(_ state: SHA256Digest, _ pending: PendingAuthorization) async throws(StateWriteError)
    /// Takes the login begun under `state`: once, whichever instance asks, and not after it
    /// expired. Throws when the store is out of reach.
    func takeLogin(_ state: SHA256Digest, now: Double) async throws(StateWriteError) -> PendingAuthorization?
    /// Stores a handoff code durably: the app is about to be given it.
    func issueHandoff(_ code: SHA256Digest, _ handoff: Handoff) async throws(StateWriteError)
    /// Marks `code` redeemed, durably (whatever happens next, it never works again), and says
    /// what it was. `check` says whether the request may have what the code holds (nil) or why
    /// not, in the same step: a code refused (or expired) at its first redemption is kept as
    /// having released nothing (no session bound to it, so a replay ends none), and a replay ends
    /// the session only when the replaying request passes it too — a request without the verifier
    /// cannot end a user's session by replaying a code it saw.
    func redeemHandoff(
        _ code: SHA256Digest, now: Double, check: @escaping @Sendable (Handoff) -> HandoffRefusal?
    ) async throws(StateWriteError) -> HandoffRedemption

    // MARK: Device codes (RFC 8628)

    /// Stores a device authorization durably under the hash of its device code (the device is
    /// about to be given it). False, with nothing stored, when a live authorization already has
    /// its user code: the caller draws another.
    func issueDeviceCode(_ code: SHA256Digest, _ device: DeviceAuthorization) async throws(StateWriteError) -> Bool
    /// The device authorization waiting for its user under this user code at `now` (pending and
    /// not expired) and its device code's hash; nil otherwise. Reads the store itself.
    func pendingDeviceCode(userCode: SHA256Digest, now: Double) async throws(StateReadError) -> (code: SHA256Digest, device: DeviceAuthorization)?
    /// Records the user's decision (``DeviceAuthorization/decide(_:at:)``), durably: the user is
    /// about to be told what became of the device. The status the code had before; nil when the
    /// decision did not fit it (expired, already decided, another login's confirmation).
    func decideDeviceCode(_ code: SHA256Digest, _ decision: DeviceDecision, now: Double) async throws(StateWriteError) -> DeviceAuthorization.Status?
    /// A poll by the device (``DeviceAuthorization/poll(by:at:)``), applied once whichever
    /// instance is asked; durable when it collects the grant (whatever happens next, the code
    /// never hands it out again).
    func pollDeviceCode(_ code: SHA256Digest, app: String, now: Double) async throws(StateWriteError) -> DevicePoll

    // MARK: Tokens accepted once

    /// Records that the token known by `id` (a hash of its issuer and `jti`: a back-channel
    /// logout token) was accepted, durably and for every instance, remembered until `until`
    /// (Unix seconds; past it the token is refused for its age). True the first time; false when
    /// it was already accepted, whichever instance accepted it. Spent once its work is done: a
    /// token whose work failed is then not spent, whatever failed, and its sender's retry counts.
    func spendOnce(_ id: SHA256Digest, until: Double) async throws(StateWriteError) -> Bool
    /// Whether the token known by `id` was accepted (``spendOnce(_:until:)``) and is remembered at
    /// `now`.
    func isSpent(_ id: SHA256Digest, now: Double) async throws(StateReadError) -> Bool

    // MARK: Operations

    /// Live sessions, for the metrics (with several instances: all of them).
    var sessionCount: Int { get }
    /// Why the store cannot make changes durable now (a full disk, a read-only directory, a
    /// database out of reach), for `/readyz`; nil when it can.
    var writeFailure: String? { get }
    /// Removes expired sessions, logins and codes at the store clock's now (with several
    /// instances: one of them at a time). Returns the grants that expired on device codes their
    /// device never collected (signed in, or approved and never polled for): nobody can use them
    /// any more, and the caller revokes them at the provider.
    @discardableResult func sweep() async -> [Grant]
    /// Keeps the store in shape until the calling task is cancelled: sweeps (the grants a sweep
    /// returns go to `abandoned`), and whatever else the implementation needs
    /// (`EmbeddedStateStore`: snapshots that retire journals).
    func maintain(abandoned: @escaping @Sendable ([Grant]) async -> Void) async
    /// Makes everything durable and releases the store; later changes fail.
    func close() async
}

/// Why a change could not be made durable. The change is in memory; the client is told the
/// broker could not complete the request.
public struct StateWriteError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

/// The store could not be read now (a database out of reach); nothing was changed.
public struct StateReadError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

extension StateStore {
    /// A copy of the live session `id` in this instance's memory (see ``readSession(_:now:_:)``).
    func session(_ id: SHA256Digest, now: Double) -> Session? {
        readSession(id, now: now) { copy $0 }
    }

    /// The live session `id`, wherever it is: this instance's memory, else — a store shared by
    /// several instances, whose cache may not hold it (never loaded here, or dropped by another
    /// instance's change) — the store itself. The one way a flow reads a session: any step of a
    /// login or a refresh may land on any instance. Only `GET /token`'s hot path reads memory
    /// alone, on the server thread. Throws when the store cannot be read now.
    func findSession(_ id: SHA256Digest, now: Double) async throws(StateReadError) -> Session? {
        if let session = session(id, now: now) { return session }
        return holdsEverySession ? nil : try await loadSession(id, now: now)
    }
}

extension StateStore {
    /// How long every store remembers a redeemed handoff code past its expiry, to recognise a
    /// replay and revoke the session the code created.
    static var replayMemory: Double { 600 }
}
