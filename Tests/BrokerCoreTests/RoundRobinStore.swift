import BrokerCrypto
import Synchronization

@testable import BrokerCore

/// Several broker instances on one shared store, behind a balancer without stickiness: each call
/// goes to the next instance in turn, so that every step of a flow — a login's begin and its
/// callback, a code's redemption, a refresh, the read after it — lands on another instance than
/// the step before, with that instance's own cache (FlowTestBed over PostgreSQL).
final class RoundRobinStore: StateStore {
    private let instances: [any StateStore]
    private let turn = Atomic<Int>(0)
    private let failNextLookup = Atomic<Bool>(false)
    private let failingQueues = Atomic<Int>(0)

    init(_ instances: [any StateStore]) {
        precondition(!instances.isEmpty)
        self.instances = instances
    }

    /// The next ``findSessions(_:after:limit:now:)`` fails, as with a database out of reach.
    func failNextSessionLookup() {
        failNextLookup.store(true, ordering: .relaxed)
    }

    /// The next `count` calls of ``queueRevocation(_:app:_:now:)`` fail, as with a database out of
    /// reach.
    func failRevocationQueueing(_ count: Int) {
        failingQueues.store(count, ordering: .relaxed)
    }

    /// The instance that takes the next call.
    private var next: any StateStore {
        instances[turn.wrappingAdd(1, ordering: .relaxed).oldValue % instances.count]
    }

    func readSession<T: Sendable>(_ id: SHA256Digest, now: Double, _ body: (borrowing Session) -> T) -> T? {
        next.readSession(id, now: now, body)
    }

    func noteUse(_ id: SHA256Digest, now: Double) {
        next.noteUse(id, now: now)
    }

    var holdsEverySession: Bool { instances.count == 1 && instances[0].holdsEverySession }

    func loadSession(_ id: SHA256Digest, now: Double) async throws(StateReadError) -> Session? {
        try await next.loadSession(id, now: now)
    }

    func whileRefreshing<T: Sendable>(_ id: SHA256Digest, _ refresh: (RefreshLease) async -> T) async throws(StateWriteError) -> T {
        try await next.whileRefreshing(id, refresh)
    }

    func updateSession(_ id: SHA256Digest, under lease: RefreshLease?, _ change: (inout Session) -> Void) async throws(StateWriteError) -> Session? {
        try await next.updateSession(id, under: lease, change)
    }

    func endSession(_ id: SHA256Digest, _ reason: EndReason, now: Double) async throws(StateWriteError) -> EndedGrant? {
        try await next.endSession(id, reason, now: now)
    }

    func importSessions(_ sessions: [Session]) async throws(StateWriteError) -> Int {
        try await next.importSessions(sessions)
    }

    func findSessions(_ filter: SessionFilter, after: SHA256Digest?, limit: Int, now: Double) async throws(StateReadError) -> SessionPage {
        if failNextLookup.exchange(false, ordering: .relaxed) { throw StateReadError(description: "out of reach (test)") }
        return try await next.findSessions(filter, after: after, limit: limit, now: now)
    }

    func beginLogin(_ state: SHA256Digest, _ pending: PendingAuthorization) async throws(StateWriteError) {
        try await next.beginLogin(state, pending)
    }

    func takeLogin(_ state: SHA256Digest, now: Double) async throws(StateWriteError) -> PendingAuthorization? {
        try await next.takeLogin(state, now: now)
    }

    func issueHandoff(_ code: SHA256Digest, _ handoff: Handoff) async throws(StateWriteError) {
        try await next.issueHandoff(code, handoff)
    }

    func redeemHandoff(_ code: SHA256Digest, _ attempt: HandoffAttempt) async throws(StateWriteError) -> Transition<HandoffRedemption> {
        try await next.redeemHandoff(code, attempt)
    }

    func issueDeviceCode(_ code: SHA256Digest, _ device: DeviceAuthorization) async throws(StateWriteError) -> Bool {
        try await next.issueDeviceCode(code, device)
    }

    func pendingDeviceCode(userCode: SHA256Digest, now: Double) async throws(StateReadError) -> (code: SHA256Digest, device: DeviceAuthorization)? {
        try await next.pendingDeviceCode(userCode: userCode, now: now)
    }

    func deviceCode(_ code: SHA256Digest, now: Double) async throws(StateReadError) -> DeviceAuthorization? {
        try await next.deviceCode(code, now: now)
    }

    func decideDeviceCode(_ code: SHA256Digest, _ decision: DeviceDecision, now: Double) async throws(StateWriteError) -> Transition<DeviceAuthorization.Status?> {
        try await next.decideDeviceCode(code, decision, now: now)
    }

    func pollDeviceCode(_ code: SHA256Digest, app: String, session: SHA256Digest, keyThumbprint: String?, now: Double) async throws(StateWriteError) -> Transition<DevicePoll> {
        try await next.pollDeviceCode(code, app: app, session: session, keyThumbprint: keyThumbprint, now: now)
    }

    func endSignIns(_ signOut: SignOut, now: Double) async throws(StateWriteError) -> [EndedGrant] {
        try await next.endSignIns(signOut, now: now)
    }

    func rememberSignOut(_ signOut: SignOut, until: Double) async throws(StateWriteError) {
        try await next.rememberSignOut(signOut, until: until)
    }

    func signOut(covering grant: Grant, now: Double) async throws(StateReadError) -> SignOut? {
        try await next.signOut(covering: grant, now: now)
    }

    func queueRevocation(_ grant: Grant, app: String, _ reason: EndReason, now: Double) async throws(StateWriteError) -> EndedGrant {
        if failingQueues.load(ordering: .relaxed) > 0 {
            failingQueues.wrappingSubtract(1, ordering: .relaxed)
            throw StateWriteError(description: "out of reach (test)")
        }
        return try await next.queueRevocation(grant, app: app, reason, now: now)
    }

    func dueRevocations(now: Double, limit: Int, claim: Double, id: SHA256Digest?) async throws(StateWriteError) -> [QueuedRevocation] {
        try await next.dueRevocations(now: now, limit: limit, claim: claim, id: id)
    }

    func settleRevocation(_ id: SHA256Digest, next revocation: QueuedRevocation?) async throws(StateWriteError) {
        try await next.settleRevocation(id, next: revocation)
    }

    func countRevocations() async throws(StateReadError) -> Int {
        try await next.countRevocations()
    }

    func countPendingSignIns() async throws(StateReadError) -> Int {
        try await next.countPendingSignIns()
    }

    func spendOnce(_ id: SHA256Digest, until: Double) async throws(StateWriteError) -> Bool {
        try await next.spendOnce(id, until: until)
    }

    func isSpent(_ id: SHA256Digest, now: Double) async throws(StateReadError) -> Bool {
        try await next.isSpent(id, now: now)
    }

    var sessionCount: Int { next.sessionCount }

    var writeFailure: String? { next.writeFailure }

    @discardableResult func sweep() async -> [EndedGrant] {
        await next.sweep()
    }

    func maintain(ended: @escaping @Sendable ([EndedGrant]) async -> Void) async {
        await next.maintain(ended: ended)
    }

    func close() async {
        for instance in instances { await instance.close() }
    }
}

extension StateStore {
    /// Stores `session` as it is, as a test sets the stage (``importSessions(_:)``): whether it was
    /// stored.
    @discardableResult
    func save(_ session: Session) async throws -> Bool {
        try await importSessions([session]) == 1
    }
}
