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

    init(_ instances: [any StateStore]) {
        precondition(!instances.isEmpty)
        self.instances = instances
    }

    /// The next ``findSessions(_:after:limit:now:)`` fails, as with a database out of reach.
    func failNextSessionLookup() {
        failNextLookup.store(true, ordering: .relaxed)
    }

    /// The instance that takes the next call.
    private var next: any StateStore {
        instances[turn.wrappingAdd(1, ordering: .relaxed).oldValue % instances.count]
    }

    func readSession<T: Sendable>(_ id: SHA256Digest, now: Double, _ body: (borrowing Session) -> T) -> T? {
        next.readSession(id, now: now, body)
    }

    var holdsEverySession: Bool { instances.count == 1 && instances[0].holdsEverySession }

    func loadSession(_ id: SHA256Digest, now: Double) async throws(StateReadError) -> Session? {
        try await next.loadSession(id, now: now)
    }

    func whileRefreshing<T: Sendable>(_ id: SHA256Digest, _ refresh: () async -> T) async throws(StateWriteError) -> T {
        try await next.whileRefreshing(id, refresh)
    }

    func saveSession(_ session: Session, createdBy code: SHA256Digest?) async throws(StateWriteError) -> Bool {
        try await next.saveSession(session, createdBy: code)
    }

    func findSessions(_ filter: SessionFilter, after: SHA256Digest?, limit: Int, now: Double) async throws(StateReadError) -> SessionPage {
        if failNextLookup.exchange(false, ordering: .relaxed) { throw StateReadError(description: "out of reach (test)") }
        return try await next.findSessions(filter, after: after, limit: limit, now: now)
    }

    func spendOnce(_ id: SHA256Digest, until: Double) async throws(StateWriteError) -> Bool {
        try await next.spendOnce(id, until: until)
    }

    func isSpent(_ id: SHA256Digest, now: Double) async throws(StateReadError) -> Bool {
        try await next.isSpent(id, now: now)
    }

    func updateSession(_ id: SHA256Digest, _ change: (inout Session) -> Void) async throws(StateWriteError) -> Session? {
        try await next.updateSession(id, change)
    }

    func removeSession(_ id: SHA256Digest) async throws(StateWriteError) -> Session? {
        try await next.removeSession(id)
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

    func redeemHandoff(
        _ code: SHA256Digest, now: Double, check: @escaping @Sendable (Handoff) -> HandoffRefusal?
    ) async throws(StateWriteError) -> HandoffRedemption {
        try await next.redeemHandoff(code, now: now, check: check)
    }

    func issueDeviceCode(_ code: SHA256Digest, _ device: DeviceAuthorization) async throws(StateWriteError) -> Bool {
        try await next.issueDeviceCode(code, device)
    }

    func pendingDeviceCode(userCode: SHA256Digest, now: Double) async throws(StateReadError) -> (code: SHA256Digest, device: DeviceAuthorization)? {
        try await next.pendingDeviceCode(userCode: userCode, now: now)
    }

    func decideDeviceCode(_ code: SHA256Digest, _ decision: DeviceDecision, now: Double) async throws(StateWriteError) -> DeviceAuthorization.Status? {
        try await next.decideDeviceCode(code, decision, now: now)
    }

    func pollDeviceCode(_ code: SHA256Digest, app: String, now: Double) async throws(StateWriteError) -> DevicePoll {
        try await next.pollDeviceCode(code, app: app, now: now)
    }

    var sessionCount: Int { next.sessionCount }

    var writeFailure: String? { next.writeFailure }

    @discardableResult func sweep() async -> [Grant] {
        await next.sweep()
    }

    func maintain(abandoned: @escaping @Sendable ([Grant]) async -> Void) async {
        await next.maintain(abandoned: abandoned)
    }

    func close() async {
        for instance in instances { await instance.close() }
    }
}
