import BrokerCrypto
import Foundation
import Logging
import Postgres
import Synchronization
import TestWaiting
import Testing

@testable import BrokerCore

/// What only the PostgreSQL store has (the contract itself is StoreConformanceTests): the use
/// of cached sessions written back to the database, rows re-sealed under a new state key, and a
/// refresh lease that outlives its lock.
@Suite(.serialized)
struct PostgresStoreTests {
    static let lifetimes = SessionLifetimes(idle: 3600, absolute: 86_400)

    private func open(_ url: String, keys: StateKeys, clock: TestClock, leaseSeconds: Int = 10) async throws -> PostgresStateStore {
        try await PostgresStateStore.open(
            settings: PostgresSettings(url: url, password: Secret(PostgresTestCluster.password, source: "test"), poolSize: 2),
            keys: keys, lifetimes: Self.lifetimes, refreshLockWaitSeconds: leaseSeconds, clock: { clock.seconds },
            logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        )
    }

    private func session(_ name: String, clock: TestClock) -> Session {
        Session(
            id: OpaqueToken.hash("tbs_\(name)"), provider: "dev", app: "demo", subject: "user-\(name)",
            scopes: ["openid"], accessToken: "at-\(name)", accessTokenExpiresAt: clock.seconds + 600,
            refreshToken: "rt-\(name)", idTokenClaims: nil, createdAt: clock.seconds, signedInAt: clock.seconds, usedAt: clock.seconds
        )
    }

    private func keyIDs(_ url: String) async throws -> [Int64] {
        let pool = PostgresPool(options: .init(url: url, password: PostgresTestCluster.password), size: 1, acquireTimeout: .seconds(5))
        defer { pool.close() }
        let rows = try await pool.withConnection { connection throws(PostgresError) in
            try connection.execute("SELECT key_id FROM broker_sessions ORDER BY key_id")
        }
        return (0..<rows.count).compactMap { rows.int($0, 0) }
    }

    @Test func aSessionUsedOnOneInstanceOutlivesItsFirstIdleExpiryEverywhere() async throws {
        let url = try PostgresTestCluster.shared.get().createDatabase()
        let keys = StateKeys(current: .generate())
        let clock = TestClock(Date(timeIntervalSince1970: 1_800_000_000))
        let first = try await open(url, keys: keys, clock: clock)
        let used = session("used", clock: clock)
        let unused = session("unused", clock: clock)
        #expect(try await first.save(used))
        #expect(try await first.save(unused))
        clock.advance(by: 30)
        first.noteUse(used.id, now: clock.seconds)
        await first.flushUse()
        #expect(first.cache.takeUsed().isEmpty, "a use within a minute is not written")
        clock.advance(by: 3000)
        #expect(first.readSession(used.id, now: clock.seconds) { $0.subject } == "user-used")
        first.noteUse(used.id, now: clock.seconds)
        await first.flushUse()
        clock.advance(by: 3000)
        let second = try await open(url, keys: keys, clock: clock)
        #expect(try await second.loadSession(used.id, now: clock.seconds)?.subject == "user-used",
                "used 3030 s after sign-in: live for another instance 6030 s after it")
        #expect(try await second.loadSession(unused.id, now: clock.seconds) == nil)
        await second.sweep()
        #expect(second.sessionCount == 1, "the sweep keeps the used session and removes the idle one")
        await first.close()
        await second.close()
    }

    /// A use whose write-back failed (the database out of reach) is written with the next one,
    /// not dropped: the sweep would take the session for an idle one that much sooner.
    @Test func aUseWhoseWriteBackFailedIsQueuedAgain() async throws {
        let url = try PostgresTestCluster.shared.get().createDatabase()
        let clock = TestClock(Date(timeIntervalSince1970: 1_800_000_000))
        let store = try await open(url, keys: StateKeys(current: .generate()), clock: clock)
        let used = session("requeued", clock: clock)
        #expect(try await store.save(used))
        clock.advance(by: 3000)
        store.noteUse(used.id, now: clock.seconds)
        store.pool.close()
        await store.flushUse()
        #expect(store.cache.takeUsed().map(\.0) == [used.id])
        await store.close()
    }

    @Test func rowsSealedUnderAnOlderKeyAreResealedUnderTheCurrentOne() async throws {
        let url = try PostgresTestCluster.shared.get().createDatabase()
        let old = SymmetricKey.generate()
        let new = SymmetricKey.generate()
        let clock = TestClock(Date(timeIntervalSince1970: 1_800_000_000))
        let before = try await open(url, keys: StateKeys(current: old), clock: clock)
        let sessions = (0..<3).map { session("s\($0)", clock: clock) }
        for session in sessions { #expect(try await before.save(session)) }
        await before.close()
        #expect(try await keyIDs(url) == Array(repeating: Int64(bitPattern: StateKeys.id(of: old)), count: 3))

        let rotated = try await open(url, keys: StateKeys(current: new, older: [old]), clock: clock)
        #expect(try await rotated.loadSession(sessions[0].id, now: clock.seconds)?.refreshToken == "rt-s0", "an old key's row opens")
        await rotated.reseal()
        #expect(try await keyIDs(url) == Array(repeating: Int64(bitPattern: StateKeys.id(of: new)), count: 3))
        await rotated.close()

        let newOnly = try await open(url, keys: StateKeys(current: new), clock: clock)
        for session in sessions {
            #expect(try await newOnly.loadSession(session.id, now: clock.seconds)?.accessToken == session.accessToken,
                    "without the old key, every row still opens")
        }
        await newOnly.close()
        let oldOnly = try await open(url, keys: StateKeys(current: old), clock: clock)
        await #expect(throws: StateReadError.self, "the old key alone opens nothing now") {
            try await oldOnly.loadSession(sessions[1].id, now: clock.seconds)
        }
        await oldOnly.close()
    }

    /// A rotation rolled out one instance at a time: an instance that has the next key first
    /// seals rows that one still on the old key alone cannot open. For that instance they are the
    /// store failing (a 503 to retry), never absent: "no such session" would end the session for
    /// its client, a refresh would revoke the grant it just got, a removal could not revoke it.
    /// Given the next key after its own (the first step of a rotation across instances,
    /// docs/operations.md), it opens them.
    @Test func aRowSealedUnderAKeyAnInstanceLacksIsAFailureThereNotAnAbsence() async throws {
        let url = try PostgresTestCluster.shared.get().createDatabase()
        let old = SymmetricKey.generate()
        let new = SymmetricKey.generate()
        let clock = TestClock(Date(timeIntervalSince1970: 1_800_000_000))
        let rotated = try await open(url, keys: StateKeys(current: new, older: [old]), clock: clock)
        let behind = try await open(url, keys: StateKeys(current: old), clock: clock)
        let session = session("rolled", clock: clock)
        #expect(try await rotated.save(session))

        await #expect(throws: StateReadError.self) { try await behind.loadSession(session.id, now: clock.seconds) }
        await #expect(throws: StateWriteError.self) {
            try await behind.updateSession(session.id, under: nil) { $0.accessToken = "changed where it cannot be read" }
        }
        await #expect(throws: StateWriteError.self, "not removed where its grant could not be revoked") {
            try await behind.endSession(session.id, .revoked, now: 0)
        }
        #expect(try await rotated.loadSession(session.id, now: clock.seconds)?.accessToken == session.accessToken, "the row is unchanged")

        // The same rule on every table: a login begun, and a device code issued, on the instance
        // with the new key.
        let state = OpaqueToken.hash("tbst_rolled")
        try await rotated.beginLogin(state, PendingAuthorization(
            provider: "dev", app: "demo", purpose: .app(AppReturn(redirectURI: "http://127.0.0.1/cb", state: nil, challenge: "c")),
            verifier: "v", nonce: "n", requestedScopes: ["openid"], expiresAt: clock.seconds + 600, beganAt: clock.seconds
        ))
        await #expect(throws: StateWriteError.self, "a login is not taken for a stale link") { try await behind.takeLogin(state, now: clock.seconds) }
        #expect(try await rotated.takeLogin(state, now: clock.seconds) != nil, "and is still there for an instance with the key")
        let device = OpaqueToken.hash("tbd_rolled")
        #expect(try await rotated.issueDeviceCode(device, DeviceAuthorization(
            app: "demo", provider: "dev", scopes: [], userCode: UserCode.hash("BCDFGHJK"), expiresAt: clock.seconds + 600, interval: 5,
            lastPolledAt: nil, status: .pending)))
        await #expect(throws: StateReadError.self) { try await behind.pendingDeviceCode(userCode: UserCode.hash("BCDFGHJK"), now: clock.seconds) }
        await #expect(throws: StateWriteError.self) {
            try await behind.pollDeviceCode(device, app: "demo", session: OpaqueToken.hash("tbs_x"), keyThumbprint: nil, now: clock.seconds)
        }
        await behind.close()

        let secondKeyAdded = try await open(url, keys: StateKeys(current: old, older: [new]), clock: clock)
        #expect(try await secondKeyAdded.loadSession(session.id, now: clock.seconds)?.refreshToken == session.refreshToken)
        await secondKeyAdded.close()
        await rotated.close()
    }

    /// The refresh lock goes with its connection (PostgreSQL restarting while the holder waits
    /// for the provider); the lease does not: another instance's refresh waits for the holder to
    /// finish, and never runs with the refresh token the holder may just have rotated.
    @Test func aRefreshLeaseOutlivesTheLossOfItsLock() async throws {
        let url = try PostgresTestCluster.shared.get().createDatabase()
        let keys = StateKeys(current: .generate())
        let clock = TestClock(Date(timeIntervalSince1970: 1_800_000_000))
        let first = try await open(url, keys: keys, clock: clock)
        let second = try await open(url, keys: keys, clock: clock)
        let session = session("leased", clock: clock)
        #expect(try await first.save(session))
        let events = Mutex<[String]>([])
        // The first holds its lease, its lock gone, until the second has asked for one — and a
        // moment more, while the second's request waits — so that the second asks while it is held.
        async let firstRefresh: Void = first.whileRefreshing(session.id) { _ in
            events.withLock { $0.append("first began") }
            try? await terminateAdvisoryLockHolders(url)
            try? await waitUntil("the second instance asks for the lease") { events.withLock { $0.contains("second asked") } }
            try? await Task.sleep(for: .milliseconds(500))
            events.withLock { $0.append("first ended") }
        }
        try await waitUntil("the first instance holds the lease") { events.withLock { $0.contains("first began") } }
        events.withLock { $0.append("second asked") }
        try await second.whileRefreshing(session.id) { _ in events.withLock { $0.append("second began") } }
        try await firstRefresh
        #expect(events.withLock { $0 } == ["first began", "second asked", "first ended", "second began"])
        #expect(try await leaseRows(url) == 0, "each refresh released its own lease")
        await first.close()
        await second.close()
    }

    /// A refresh whose lease ran out (its database was away longer) still offers its rotated
    /// tokens, but not while another instance holds a lease: that one refreshes from the row as
    /// it is, and its result is the session's. Nor does the first, ending, release the second's
    /// lease.
    @Test func pastItsLeaseARefreshDoesNotWriteOverAnotherInstancesLease() async throws {
        let url = try PostgresTestCluster.shared.get().createDatabase()
        let keys = StateKeys(current: .generate())
        let clock = TestClock(Date(timeIntervalSince1970: 1_800_000_000))
        let first = try await open(url, keys: keys, clock: clock, leaseSeconds: 1)
        let second = try await open(url, keys: keys, clock: clock)
        let session = session("overrun", clock: clock)
        #expect(try await first.save(session))
        let flags = Flags()
        let late: Result<Session?, StateWriteError> = try await first.whileRefreshing(session.id) { lease in
            try? await terminateAdvisoryLockHolders(url)
            try? await Task.sleep(for: .milliseconds(1500))
            let id = session.id
            Task {
                try await second.whileRefreshing(id) { _ in
                    flags.secondHolds.store(true, ordering: .releasing)
                    try? await waitUntil("the first instance's late refresh is done") { flags.firstDone.load(ordering: .acquiring) }
                }
            }
            try? await waitUntil("the second instance holds the lease") { flags.secondHolds.load(ordering: .acquiring) }
            do throws(StateWriteError) {
                return .success(try await first.updateSession(session.id, under: lease) { $0.accessToken = "written past the lease" })
            } catch {
                return .failure(error)
            }
        }
        let secondTookTheLease = flags.secondHolds.load(ordering: .acquiring)
        #expect(secondTookTheLease)
        #expect(throws: StateWriteError.self) { try late.get() }
        #expect(try await leaseRows(url) == 1, "the second instance's lease is kept")
        #expect(try await second.loadSession(session.id, now: clock.seconds)?.accessToken == session.accessToken)
        flags.firstDone.store(true, ordering: .releasing)
        await first.close()
        await second.close()
    }

    private final class Flags: Sendable {
        let secondHolds = Atomic(false)
        let firstDone = Atomic(false)
    }

    private func leaseRows(_ url: String) async throws -> Int {
        let pool = PostgresPool(options: .init(url: url, password: PostgresTestCluster.password), size: 1, acquireTimeout: .seconds(5))
        defer { pool.close() }
        let rows = try await pool.withConnection { connection throws(PostgresError) in
            try connection.execute("SELECT count(*) FROM broker_refresh_leases")
        }
        return rows.int(0, 0).map(Int.init) ?? -1
    }

    /// Ends every database session holding an advisory lock, as a restart of the server would.
    private func terminateAdvisoryLockHolders(_ url: String) async throws {
        let pool = PostgresPool(options: .init(url: url, password: PostgresTestCluster.password), size: 1, acquireTimeout: .seconds(5))
        defer { pool.close() }
        _ = try await pool.withConnection { connection throws(PostgresError) in
            try connection.execute("""
                SELECT pg_terminate_backend(pid) FROM pg_locks
                WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                """)
        }
    }
}
