import BrokerCrypto
import Foundation
import Logging
import Postgres
import Synchronization
import Testing

@testable import BrokerCore

/// A store implementation under the suite: `open` opens the store at one location, and opened
/// again there it is the store a restarted broker would find. With `lost`, the store's commits
/// lose their acknowledgements when the test says so.
protocol StoreHarness: Sendable {
    func open(clock: TestClock, lost: LostAcknowledgements?) async throws -> any StateStore
}

extension StoreHarness {
    func open(clock: TestClock) async throws -> any StateStore {
        try await open(clock: clock, lost: nil)
    }
}

/// Commits of a store under test whose acknowledgements are lost after they were made: the
/// embedded store's journal frames reach the disk and their syncs are reported failed,
/// PostgreSQL's COMMITs reach the server and their answers never come back.
final class LostAcknowledgements: Sendable {
    let journal = StateFileFaults()
    let database = PostgresFaults()

    /// The next `count` commits lose their acknowledgements.
    func next(_ count: Int = 1) {
        journal.failSyncs(count)
        database.loseCommitAcknowledgements(count)
    }

    /// Acknowledgements still to lose, in the store of `kind`.
    func remaining(in kind: StoreKind) -> Int {
        kind == .embedded ? journal.syncsToFail : database.acknowledgementsToLose
    }
}

/// The embedded store: memory, an encrypted journal and snapshots in a directory.
struct EmbeddedStoreHarness: StoreHarness {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID().uuidString)").path
    let keys = StateKeys(current: .generate())

    func open(clock: TestClock, lost: LostAcknowledgements?) throws -> any StateStore {
        try EmbeddedStateStore(
            settings: StateSettings(directory: directory), keys: keys, lifetimes: StoreConformanceTests.lifetimes,
            acceptDamage: false, clock: { clock.seconds }, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
            faults: lost?.journal
        )
    }
}

/// The PostgreSQL store on a database of its own in the tests' throwaway cluster; opened again,
/// it is another broker instance on the same database.
struct PostgresStoreHarness: StoreHarness {
    let url: String
    let keys = StateKeys(current: .generate())
    let lifetimes: SessionLifetimes

    init(lifetimes: SessionLifetimes = StoreConformanceTests.lifetimes) throws {
        url = try PostgresTestCluster.shared.get().createDatabase()
        self.lifetimes = lifetimes
    }

    func open(clock: TestClock, lost: LostAcknowledgements?) async throws -> any StateStore {
        try await PostgresStateStore.open(
            settings: PostgresSettings(url: url, password: Secret(PostgresTestCluster.password, source: "test"), poolSize: 2),
            keys: keys, lifetimes: lifetimes, refreshLockWaitSeconds: 10, clock: { clock.seconds },
            logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, faults: lost?.database
        )
    }
}

/// The stores every test below runs against.
enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case embedded
    case postgres

    var testDescription: String { rawValue }

    /// The stores several broker instances share (an embedded store has one instance per
    /// directory, which its lock enforces): the cases about several instances run on these
    /// alone rather than passing without checking anything on the others.
    static let sharedByInstances: [StoreKind] = [.postgres]

    func harness() throws -> any StoreHarness {
        switch self {
        case .embedded: EmbeddedStoreHarness()
        case .postgres: try PostgresStoreHarness()
        }
    }
}

/// The `StateStore` contract (State/StateStore.swift), which every store must pass: durability
/// and order per key, concurrent updates, single use of codes and replays, expiry and sweeping,
/// removal, and restarts — after a clean close and after a crash (the store dropped unclosed) —
/// with nothing acknowledged lost.
@Suite(.serialized)
struct StoreConformanceTests {
    static let lifetimes = SessionLifetimes(idle: 3600, absolute: 86_400)

    static func clock() -> TestClock { TestClock(Date(timeIntervalSince1970: 1_800_000_000)) }

    private func session(_ name: String, clock: TestClock) -> Session {
        Session(
            id: OpaqueToken.hash("tbs_\(name)"), provider: "dev", app: "demo", subject: "user-\(name)",
            scopes: ["openid"], accessToken: "at-\(name)", accessTokenExpiresAt: clock.seconds + 600,
            refreshToken: "rt-\(name)", idTokenClaims: nil, createdAt: clock.seconds, signedInAt: clock.seconds, usedAt: clock.seconds
        )
    }

    @Test(arguments: StoreKind.allCases)
    func changesToOneSessionLandInTheirOrder(_ kind: StoreKind) async throws {
        let harness = try kind.harness()
        let clock = Self.clock()
        let store = try await harness.open(clock: clock)
        let first = session("order", clock: clock)
        #expect(try await store.save(first))
        for round in 1...20 {
            let changed = try await store.updateSession(first.id, under: nil) { $0.refreshToken = "rt-\(round)" }
            #expect(changed?.refreshToken == "rt-\(round)")
        }
        for reopened in [try await harness.open(clock: clock), try await closedAndReopened(store, harness, clock)] {
            #expect((try await reopened.loadSession(first.id, now: clock.seconds))?.refreshToken == "rt-20")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func concurrentUpdatesOfOneSessionAllLand(_ kind: StoreKind) async throws {
        let harness = try kind.harness()
        let clock = Self.clock()
        let store = try await harness.open(clock: clock)
        let first = session("concurrent", clock: clock)
        #expect(try await store.save(first))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for number in 0..<50 {
                group.addTask { _ = try await store.updateSession(first.id, under: nil) { $0.scopes.append("scope-\(number)") } }
            }
            try await group.waitForAll()
        }
        #expect((try await store.loadSession(first.id, now: clock.seconds))?.scopes.count == 51)
        let reopened = try await closedAndReopened(store, harness, clock)
        #expect(Set((try await reopened.loadSession(first.id, now: clock.seconds))?.scopes ?? []) == Set(["openid"] + (0..<50).map { "scope-\($0)" }))
    }

    @Test(arguments: StoreKind.allCases)
    func expiredEntriesAreNeverReturnedAndSweepRemovesThem(_ kind: StoreKind) async throws {
        let clock = Self.clock()
        let store = try await kind.harness().open(clock: clock)
        let old = session("old", clock: clock)
        #expect(try await store.save(old))
        let state = OpaqueToken.hash("state-1")
        try await store.beginLogin(state, PendingAuthorization(
            provider: "dev", app: "demo", purpose: .app(AppReturn(redirectURI: "http://127.0.0.1/cb", state: nil, challenge: "c")),
            verifier: "v", nonce: "n", requestedScopes: ["openid"], expiresAt: clock.seconds + 600, beganAt: clock.seconds
        ))
        clock.advance(by: Self.lifetimes.idle + 1)
        let fresh = session("fresh", clock: clock)
        #expect(try await store.save(fresh))
        #expect((try await store.loadSession(old.id, now: clock.seconds)) == nil, "an idle session past its lifetime")
        #expect(try await store.takeLogin(state, now: clock.seconds) == nil, "a login past its lifetime")
        #expect(store.sessionCount == 2)
        await store.sweep()
        #expect(store.sessionCount == 1)
        #expect((try await store.loadSession(fresh.id, now: clock.seconds)) != nil)
    }

    @Test(arguments: StoreKind.allCases)
    func aRemovedSessionStaysRemoved(_ kind: StoreKind) async throws {
        let harness = try kind.harness()
        let clock = Self.clock()
        let store = try await harness.open(clock: clock)
        let gone = session("gone", clock: clock)
        let kept = session("kept", clock: clock)
        #expect(try await store.save(gone))
        #expect(try await store.save(kept))
        #expect(try await store.endSession(gone.id, .revoked, now: 0)?.subject == "user-gone")
        #expect(try await store.endSession(gone.id, .revoked, now: 0) == nil, "removing twice finds nothing")
        #expect(try await store.updateSession(gone.id, under: nil) { $0.refreshToken = "revived" } == nil)
        for reopened in [try await harness.open(clock: clock), try await closedAndReopened(store, harness, clock)] {
            #expect((try await reopened.loadSession(gone.id, now: clock.seconds)) == nil)
            #expect((try await reopened.loadSession(kept.id, now: clock.seconds)) != nil)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aClosedStoreRefusesChanges(_ kind: StoreKind) async throws {
        let clock = Self.clock()
        let store = try await kind.harness().open(clock: clock)
        await store.close()
        await #expect(throws: StateWriteError.self) { try await store.save(session("late", clock: clock)) }
    }

    @Test(arguments: StoreKind.sharedByInstances)
    func aLoginIsTakenOnceWhicheverInstanceAsks(_ kind: StoreKind) async throws {
        let harness = try kind.harness()
        let clock = Self.clock()
        let first = try await harness.open(clock: clock)
        let second = try await harness.open(clock: clock)
        let state = OpaqueToken.hash("state-shared")
        try await first.beginLogin(state, PendingAuthorization(
            provider: "dev", app: "demo", purpose: .app(AppReturn(redirectURI: "http://127.0.0.1/cb", state: "s", challenge: "c")),
            verifier: "v", nonce: "n", requestedScopes: ["openid"], expiresAt: clock.seconds + 600, beganAt: clock.seconds
        ))
        async let fromFirst = first.takeLogin(state, now: clock.seconds)
        async let fromSecond = second.takeLogin(state, now: clock.seconds)
        let taken = [try await fromFirst, try await fromSecond].compactMap { $0 }
        #expect(taken.count == 1 && taken.first?.purpose == .app(AppReturn(redirectURI: "http://127.0.0.1/cb", state: "s", challenge: "c")))
    }

    @Test(arguments: StoreKind.sharedByInstances)
    func anotherInstancesChangesReachThisOnesMemory(_ kind: StoreKind) async throws {
        let harness = try kind.harness()
        let clock = Self.clock()
        let first = try await harness.open(clock: clock)
        let second = try await harness.open(clock: clock)
        let shared = session("shared", clock: clock)
        #expect(try await first.save(shared))
        #expect(second.session(shared.id, now: clock.seconds) == nil, "not in the second instance's memory yet")
        #expect(try await second.loadSession(shared.id, now: clock.seconds)?.refreshToken == "rt-shared")
        #expect(second.session(shared.id, now: clock.seconds) != nil, "kept after the load")
        _ = try await first.updateSession(shared.id, under: nil) { $0.accessToken = "at-rotated" }
        #expect(await eventually { second.session(shared.id, now: clock.seconds)?.accessToken != "at-shared" },
                "the second instance still serves the old token")
        #expect(try await second.loadSession(shared.id, now: clock.seconds)?.accessToken == "at-rotated")
        _ = try await second.endSession(shared.id, .revoked, now: 0)
        #expect(await eventually { first.session(shared.id, now: clock.seconds) == nil }, "the first instance still serves a removed session")
    }

    @Test(arguments: StoreKind.sharedByInstances)
    func oneRefreshLockHolderAtATimeAcrossInstances(_ kind: StoreKind) async throws {
        let harness = try kind.harness()
        let clock = Self.clock()
        let first = try await harness.open(clock: clock)
        let second = try await harness.open(clock: clock)
        let id = OpaqueToken.hash("tbs_locked")
        let holders = LockHolders()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for store in [first, second, first, second] {
                group.addTask {
                    try await store.whileRefreshing(id) { _ in
                        holders.count.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
                        try? await Task.sleep(for: .milliseconds(150))
                        holders.count.withLock { $0.now -= 1 }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(holders.count.withLock { $0.most } == 1)
    }

    /// Whether `condition` holds within two seconds.
    private func eventually(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<200 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    /// Closes `store` and opens it again, as a clean restart does.
    private func closedAndReopened(_ store: any StateStore, _ harness: any StoreHarness, _ clock: TestClock) async throws -> any StateStore {
        await store.close()
        return try await harness.open(clock: clock)
    }
}

/// How many callers held a lock at once, and the most at any time.
final class LockHolders: Sendable {
    let count = Mutex((now: 0, most: 0))
}
