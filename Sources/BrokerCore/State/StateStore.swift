import BrokerCrypto

/// The broker's state: sessions, logins in progress, handoff codes, device codes, the queue of
/// revocations owed to providers and recent sign-outs. The only place where state changes and is
/// made durable; everything above it calls these methods. A grant's steps are decided on the
/// values (``Handoff/redeem(_:)``, ``DeviceAuthorization/poll(by:at:session:)``…), whose
/// ``GrantEffect``s every store carries out in the same change; a store only loads and persists
/// (docs/lifecycle.md).
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
///   A commit whose acknowledgement is lost is confirmed (or written again) before the method
///   returns or throws, so that what it returns is what happened.
/// - **One change per step.** A step and its effects (a code redeemed and the session it
///   released; a session ended and its tokens queued for revocation) are durable together or
///   not at all.
/// - **Nothing dropped unrevoked.** Every grant that leaves — ended, expired, refused, swept —
///   leaves its tokens in the revocation queue, in the change that removes it.
/// - **One order per key.** Changes to one session or one code are applied and made durable in
///   the order they were made; concurrent `updateSession` calls on one session each see the
///   others' effects (none is lost), across instances too.
/// - **Single use is global.** A login (`takeLogin`), a handoff code (`redeemHandoff`), a
///   device code's grant (`pollDeviceCode`) and a queued revocation (`dueRevocations`, for the
///   time of a delivery) are taken once, whichever instance asks first; every later attempt sees
///   it taken.
/// - **Logins in progress are cheap.** `beginLogin` and `takeLogin` do not wait for durability
///   (a crash may lose a login begun in the last moments, and its user signs in again), only for
///   every instance to see them.
/// - **Only hashes.** Session tokens, handoff codes, device and user codes and `state` values
///   are known by their SHA-256 hashes; tokens inside a session are stored encrypted wherever they leave memory.
/// - **Expiry.** Expired entries are never returned; `sweep` ends them (revocations queued), over
///   the store's own clock, and `maintain` calls it periodically.
/// - **Sealed rows, one rule.** A record sealed under a state key this instance lacks is the store
///   failing here (a 503 to retry, the key id logged), never an absence; one that does not open
///   under a key it has (altered outside the broker) is logged and treated as absent.
protocol StateStore: Sendable {
    // MARK: Sessions

    /// Runs `body` on the live session `id` in this instance's memory without copying it
    /// (``session(_:now:)`` copies); nil when it is not there at `now`. Never waits for I/O.
    /// When ``holdsEverySession`` is false, nil is not final: ``loadSession(_:now:)`` looks in the
    /// store itself.
    func readSession<T: Sendable>(_ id: SHA256Digest, now: Double, _ body: (borrowing Session) -> T) -> T?
    /// Marks the live session `id` in this instance's memory used at `now`, for its idle
    /// lifetime: called once a request presenting it is admitted (its holder checked), never by
    /// a read, so that a refused request keeps no session alive. Never waits for I/O.
    func noteUse(_ id: SHA256Digest, now: Double)
    /// Whether every live session is in this instance's memory, so that a nil from
    /// ``readSession(_:now:_:)`` means there is no such session (the embedded store); a store
    /// shared by several instances keeps a bounded cache and answers false.
    var holdsEverySession: Bool { get }
    /// The live session `id` from the store itself, never from memory that may lag behind another
    /// instance's change (a shared store: its database), kept in memory afterwards; nil when there
    /// is none. Waits for I/O; throws when the store cannot be read now.
    func loadSession(_ id: SHA256Digest, now: Double) async throws(StateReadError) -> Session?
    /// Runs `refresh` while holding session `id`'s refresh lease, which at most one caller holds
    /// at a time across every instance sharing the store; a lease whose holder dies runs out.
    /// The caller re-reads the session under it (``loadSession(_:now:)``): another instance may
    /// have refreshed it meanwhile; and passes the lease to the update that stores what the
    /// refresh brought (``updateSession(_:under:_:)``). With one instance (the embedded store)
    /// the ``Refresher``'s own single-flight is the lease, and `refresh` runs at once. Throws
    /// when the lease cannot be had (the store is out of reach).
    func whileRefreshing<T: Sendable>(_ id: SHA256Digest, _ refresh: (RefreshLease) async -> T) async throws(StateWriteError) -> T
    /// Applies `change` to the session `id` and makes the result durable; the session as
    /// changed, or nil when there is none. `change` runs on the current value at the store (with
    /// several instances: inside the store's own serialisation of that session), so concurrent
    /// changes compose. Under a refresh's `lease`, the write keeps trying through a lost
    /// connection while the lease holds, and past it only while no other refresh holds one.
    func updateSession(_ id: SHA256Digest, under lease: RefreshLease?, _ change: (inout Session) -> Void) async throws(StateWriteError) -> Session?
    /// Ends the session `id` for `reason`: removed, its tokens queued for revocation, in one
    /// change; what ended, or nil when there was no such session (ending is idempotent).
    func endSession(_ id: SHA256Digest, _ reason: EndReason, now: Double) async throws(StateWriteError) -> EndedGrant?
    /// Stores sessions copied from elsewhere (`state import`), each unless one with its id is
    /// there, in one change: how many were stored.
    func importSessions(_ sessions: [Session]) async throws(StateWriteError) -> Int

    /// The live sessions `filter` matches (a ``SessionFilter/isValid`` one), every instance's,
    /// in the order of their ids after `after`, at most `limit` of them: for the admin API and
    /// sign-outs. Reads the store itself (a shared store: its database, finding a subject or
    /// provider session by its ``BlindIndex``); throws when it cannot be read now.
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
    /// A redemption of `code` (``Handoff/redeem(_:)``), applied once whichever instance is
    /// asked, with its effects (the session it releases, the session a replay ends, the grant
    /// a spent code drops) in the same change.
    func redeemHandoff(_ code: SHA256Digest, _ attempt: HandoffAttempt) async throws(StateWriteError) -> Transition<HandoffRedemption>

    // MARK: Device codes (RFC 8628)

    /// Stores a device authorization durably under the hash of its device code (the device is
    /// about to be given it). False, with nothing stored, when a live authorization already has
    /// its user code: the caller draws another.
    func issueDeviceCode(_ code: SHA256Digest, _ device: DeviceAuthorization) async throws(StateWriteError) -> Bool
    /// The device authorization waiting for its user under this user code at `now` (pending and
    /// not expired) and its device code's hash; nil otherwise. Reads the store itself.
    func pendingDeviceCode(userCode: SHA256Digest, now: Double) async throws(StateReadError) -> (code: SHA256Digest, device: DeviceAuthorization)?
    /// The device authorization under `code` at `now` (not expired), whatever its status; nil
    /// otherwise. Reads the store itself.
    func deviceCode(_ code: SHA256Digest, now: Double) async throws(StateReadError) -> DeviceAuthorization?
    /// Records the user's decision (``DeviceAuthorization/decide(_:at:)``) with its effects,
    /// durably: the user is about to be told what became of the device. The status the code had
    /// before; nil when the decision did not fit it (expired, already decided, another login's).
    func decideDeviceCode(_ code: SHA256Digest, _ decision: DeviceDecision, now: Double) async throws(StateWriteError) -> Transition<DeviceAuthorization.Status?>
    /// A poll by the device (``DeviceAuthorization/poll(by:at:session:)``), applied once whichever
    /// instance is asked; when it collects the grant, the session `session` names is made in the
    /// same change, durably.
    func pollDeviceCode(_ code: SHA256Digest, app: String, session: SHA256Digest, keyThumbprint: String?, now: Double) async throws(StateWriteError) -> Transition<DevicePoll>

    // MARK: Sign-outs

    /// Ends the grants held behind handoff and device codes that `signOut` covers
    /// (``Handoff/end(_:)``, ``DeviceAuthorization/end(_:)``), on every instance, their
    /// revocations queued in the same change.
    func endSignIns(_ signOut: SignOut, now: Double) async throws(StateWriteError) -> [EndedGrant]
    /// Remembers `signOut` until `until`, for every instance: a sign-in under way when it came
    /// (at the provider's page, or exchanging its code) ends when it lands (``signOut(covering:now:)``).
    func rememberSignOut(_ signOut: SignOut, until: Double) async throws(StateWriteError)
    /// The remembered sign-out that covers `grant` (its user's, by subject or provider session,
    /// signed in before then), the latest if several; nil when none does.
    func signOut(covering grant: Grant, now: Double) async throws(StateReadError) -> SignOut?

    // MARK: Revocations owed to providers

    /// Queues the revocation of a grant that reached no holder (``EndReason/notHeld``), durably.
    func queueRevocation(_ grant: Grant, app: String, _ reason: EndReason, now: Double) async throws(StateWriteError) -> EndedGrant
    /// Takes up to `limit` queued revocations due at `now`, for a delivery of at most `claim`
    /// seconds: no other caller, here or on another instance, takes them meanwhile. With `id`,
    /// that one only, due or not, taken or not (a revocation its client waits for).
    func dueRevocations(now: Double, limit: Int, claim: Double, id: SHA256Digest?) async throws(StateWriteError) -> [QueuedRevocation]
    /// Settles a delivery of the revocation `id`: removed when `next` is nil (the provider
    /// confirmed, or it was given up), else — while it is still queued — `next` kept (what is
    /// left, due later) for anyone to take.
    func settleRevocation(_ id: SHA256Digest, next: QueuedRevocation?) async throws(StateWriteError)
    /// How many revocations wait in the queue (with several instances: all of them).
    func countRevocations() async throws(StateReadError) -> Int
    /// How many sign-ins are under way (with several instances: all of them): logins in
    /// progress and device codes, counted until the sweep forgets them.
    func countPendingSignIns() async throws(StateReadError) -> Int

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
    /// Ends what expired at the store clock's now — sessions past their lifetimes, handoff codes
    /// never redeemed, device codes never collected — with their revocations queued, and forgets
    /// logins, spent codes and tokens (with several instances: one of them at a time). The
    /// grants it ended.
    @discardableResult func sweep() async -> [EndedGrant]
    /// Keeps the store in shape until the calling task is cancelled: sweeps (the grants a sweep
    /// ends go to `ended`), and whatever else the implementation needs
    /// (`EmbeddedStateStore`: snapshots that retire journals).
    func maintain(ended: @escaping @Sendable ([EndedGrant]) async -> Void) async
    /// Makes everything durable and releases the store; later changes fail.
    func close() async
}

/// A session's refresh lease as the refresh that holds it knows it
/// (``StateStore/whileRefreshing(_:_:)``), passed to the update that stores what the refresh
/// brought (``StateStore/updateSession(_:under:_:)``).
struct RefreshLease: Sendable {
    let session: SHA256Digest
    /// The lease as a store shared by instances holds it; nil with one instance, whose
    /// refresher's single flight is the lease.
    let held: Held?

    /// A lease in a store shared by instances.
    struct Held: Sendable {
        /// No later than the lease's end, by this instance's clock.
        let until: ContinuousClock.Instant
        /// What names the lease in the store (PostgreSQL: its row's `held_until`, exactly as the
        /// database wrote it).
        let record: Double
    }
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
    /// replay and end the session the code released.
    static var replayMemory: Double { 600 }
}
