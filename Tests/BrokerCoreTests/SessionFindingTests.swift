import BrokerCrypto
import Foundation
import Logging
import Postgres
import TestWaiting
import Testing

@testable import BrokerCore

/// `findSessions` and `spendOnce` (State/StateStore.swift) on every store: sessions found by
/// provider, app, subject and provider session, a page at a time, after a restart and (on
/// PostgreSQL) from another instance; a token accepted once whichever instance is asked. What
/// only PostgreSQL has — the blind index in its columns, rows from before it, a key rotation —
/// is at the end.
@Suite(.serialized)
struct SessionFindingTests {
    private func session(_ name: String, provider: String = "dev", app: String = "demo", subject: String, sid: String? = nil,
                         clock: TestClock) -> Session {
        Session(
            id: OpaqueToken.hash("tbs_\(name)"), provider: provider, app: app, subject: subject,
            scopes: ["openid"], accessToken: "at-\(name)", accessTokenExpiresAt: clock.seconds + 600,
            refreshToken: "rt-\(name)", idTokenClaims: nil, createdAt: clock.seconds, signedInAt: clock.seconds, usedAt: clock.seconds,
            providerSessionID: sid
        )
    }

    /// Alice has three sessions (two apps, two provider sessions), Bob one, and another
    /// provider has a user whose id is also "alice".
    private func population(_ clock: TestClock) -> [Session] {
        [
            session("a1", subject: "alice", sid: "sid-a", clock: clock),
            session("a2", app: "other", subject: "alice", sid: "sid-a", clock: clock),
            session("a3", subject: "alice", sid: "sid-b", clock: clock),
            session("b1", subject: "bob", sid: "sid-c", clock: clock),
            session("x1", provider: "corp", subject: "alice", clock: clock),
        ]
    }

    private func names(_ page: SessionPage) -> Set<String> { Set(page.sessions.map(\.accessToken)) }

    @Test(arguments: StoreKind.allCases)
    func sessionsAreFoundByEveryFilterAndAfterARestart(_ kind: StoreKind) async throws {
        let harness = try kind.harness()
        let clock = StoreConformanceTests.clock()
        let store = try await harness.open(clock: clock)
        for session in population(clock) { #expect(try await store.save(session)) }
        let now = clock.seconds
        let cases: [(SessionFilter, Set<String>)] = [
            (SessionFilter(provider: "dev", subject: "alice"), ["at-a1", "at-a2", "at-a3"]),
            (SessionFilter(provider: "corp", subject: "alice"), ["at-x1"]),
            (SessionFilter(provider: "dev", subject: "carol"), []),
            (SessionFilter(app: "other"), ["at-a2"]),
            (SessionFilter(provider: "corp"), ["at-x1"]),
            (SessionFilter(provider: "dev", providerSessionID: "sid-a"), ["at-a1", "at-a2"]),
            (SessionFilter(provider: "dev", subject: "alice", providerSessionID: "sid-b"), ["at-a3"]),
            (SessionFilter(provider: "dev", subject: "bob", providerSessionID: "sid-a"), []),
            (SessionFilter(provider: "corp", providerSessionID: "sid-a"), []),
            (SessionFilter(), ["at-a1", "at-a2", "at-a3", "at-b1", "at-x1"]),
        ]
        for (filter, expected) in cases {
            #expect(names(try await store.findSessions(filter, after: nil, limit: 100, now: now)) == expected, "\(filter)")
        }
        await store.close()
        let reopened = try await harness.open(clock: clock)
        for (filter, expected) in cases {
            #expect(names(try await reopened.findSessions(filter, after: nil, limit: 100, now: now)) == expected, "after a restart: \(filter)")
        }
        _ = try await reopened.endSession(OpaqueToken.hash("tbs_a1"), .revoked, now: 0)
        #expect(names(try await reopened.findSessions(SessionFilter(provider: "dev", subject: "alice"), after: nil, limit: 100, now: now))
                == ["at-a2", "at-a3"], "a removed session is not found")
        clock.advance(by: StoreConformanceTests.lifetimes.idle + 1)
        #expect(try await reopened.findSessions(SessionFilter(), after: nil, limit: 100, now: clock.seconds).sessions.isEmpty,
                "an expired session is not found")
    }

    @Test(arguments: StoreKind.allCases)
    func pagesFollowEachOtherWithoutGapOrRepeat(_ kind: StoreKind) async throws {
        let clock = StoreConformanceTests.clock()
        let store = try await kind.harness().open(clock: clock)
        for number in 0..<25 { _ = try await store.save(session("p\(number)", subject: "paged", clock: clock)) }
        _ = try await store.save(session("other", subject: "someone", clock: clock))
        var seen: [SHA256Digest] = []
        var after: SHA256Digest?
        var pages = 0
        repeat {
            let page = try await store.findSessions(SessionFilter(provider: "dev", subject: "paged"), after: after, limit: 10, now: clock.seconds)
            #expect(page.sessions.count <= 10)
            seen += page.sessions.map(\.id)
            after = page.next
            pages += 1
        } while after != nil && pages < 10
        #expect(pages == 3)
        #expect(seen.count == 25 && Set(seen).count == 25)
        #expect(seen.map(\.hex) == seen.map(\.hex).sorted(), "in the order of their ids")
    }

    @Test(arguments: StoreKind.allCases)
    func aTokenIsSpentOnceEvenAfterARestart(_ kind: StoreKind) async throws {
        let harness = try kind.harness()
        let clock = StoreConformanceTests.clock()
        let store = try await harness.open(clock: clock)
        let token = OpaqueToken.hash("jti-1")
        #expect(try await store.isSpent(token, now: clock.seconds) == false)
        #expect(try await store.spendOnce(token, until: clock.seconds + 300))
        #expect(try await store.isSpent(token, now: clock.seconds))
        #expect(try await store.spendOnce(token, until: clock.seconds + 300) == false)
        #expect(try await store.spendOnce(OpaqueToken.hash("jti-2"), until: clock.seconds + 300), "another token is its own")
        await store.close()
        let reopened = try await harness.open(clock: clock)
        #expect(try await reopened.spendOnce(token, until: clock.seconds + 300) == false, "remembered across a restart")
        #expect(try await reopened.isSpent(token, now: clock.seconds))
        clock.advance(by: 301)
        #expect(try await reopened.isSpent(token, now: clock.seconds) == false, "not past its time")
        await reopened.sweep()
        #expect(try await reopened.spendOnce(token, until: clock.seconds + 300), "forgotten once past its time")
    }

    @Test(arguments: StoreKind.sharedByInstances)
    func anotherInstanceFindsSessionsSpendsTokensAndSeesAnEndedSessionGone(_ kind: StoreKind) async throws {
        let harness = try kind.harness()
        let clock = StoreConformanceTests.clock()
        let first = try await harness.open(clock: clock)
        let second = try await harness.open(clock: clock)
        let alice = session("shared", subject: "alice", sid: "sid-s", clock: clock)
        _ = try await first.save(alice)
        #expect(first.session(alice.id, now: clock.seconds) != nil, "cached where it was made")
        let found = try await second.findSessions(SessionFilter(provider: "dev", providerSessionID: "sid-s"), after: nil, limit: 10, now: clock.seconds)
        #expect(found.sessions.map(\.id) == [alice.id])
        #expect(try await second.endSession(alice.id, .revoked, now: 0)?.subject == "alice")
        try await waitUntil("the first instance's cache lets go of the session the second ended") {
            first.session(alice.id, now: clock.seconds) == nil
        }
        #expect(try await first.findSession(alice.id, now: clock.seconds) == nil)
        let token = OpaqueToken.hash("jti-shared")
        #expect(try await first.spendOnce(token, until: clock.seconds + 300))
        #expect(try await second.spendOnce(token, until: clock.seconds + 300) == false, "spent on the other instance")
    }

    @Test func anOldRecordWithoutItsProviderSessionTakesItFromTheClaims() throws {
        let clock = StoreConformanceTests.clock()
        var old = session("old", subject: "alice", clock: clock)
        old.idTokenClaims = Array(#"{"sub":"alice","sid":"from-claims"}"#.utf8)
        // As written before fields 13 and 14 existed: the session's fields without them (a session
        // without a sid ends with an empty field 13 today, then its sign-in time in 14).
        var fields = FieldWriter()
        old.encode(into: &fields)
        #expect(Array(fields.bytes.suffix(12).prefix(4)) == [13, 0, 14, 8])
        let before = Array(fields.bytes.dropLast(12))
        var whole: [UInt8] = []
        StateRecord.session(old).encode(into: &whole)
        var bytes = [whole[0]] // the record's kind
        FieldWriter.appendVarint(UInt64(before.count), to: &bytes)
        bytes += before
        var scopes = ScopeTable()
        var decoded: Session?
        try StateRecord.decodeAll(bytes[...], scopes: &scopes) { if case .session(let session) = $0 { decoded = session } }
        #expect(decoded?.providerSessionID == "from-claims")
        #expect(decoded?.signedInAt == old.createdAt, "without field 14, signed in when it was made")
        bytes = []
        StateRecord.session(old).encode(into: &bytes)
        try StateRecord.decodeAll(bytes[...], scopes: &scopes) { if case .session(let session) = $0 { decoded = session } }
        #expect(decoded?.providerSessionID == nil, "an empty field 13 is no sid, whatever the claims say")
        old.providerSessionID = "written"
        bytes = []
        StateRecord.session(old).encode(into: &bytes)
        try StateRecord.decodeAll(bytes[...], scopes: &scopes) { if case .session(let session) = $0 { decoded = session } }
        #expect(decoded?.providerSessionID == "written", "field 13 when it is there")
    }

    @Test func aSignInKeepsTheIDTokensSessionAndAnIncrementalGrantUpdatesIt() {
        let grant = { (claims: String?) in
            Grant(provider: "dev", subject: "alice", scopes: ["openid"], accessToken: "at", accessTokenExpiresAt: nil, refreshToken: "rt",
                  idTokenClaims: claims.map { Array($0.utf8) }, signedInAt: 0)
        }
        var session = Session(id: OpaqueToken.hash("tbs_x"), app: "demo", grant: grant(#"{"sub":"alice","sid":"one"}"#), at: 0)
        #expect(session.providerSessionID == "one")
        session.take(grant(nil), scopes: .replace)
        #expect(session.providerSessionID == "one", "a refresh without an ID token keeps it")
        session.take(grant(#"{"sub":"alice","sid":"two"}"#), scopes: .add)
        #expect(session.providerSessionID == "two")
        #expect(Session(id: OpaqueToken.hash("tbs_y"), app: "demo", grant: grant(#"{"sub":"alice"}"#), at: 0).providerSessionID == nil)
    }

    // MARK: PostgreSQL's blind index

    private func rawRows(_ url: String, _ statement: String) async throws -> PostgresRows {
        let pool = PostgresPool(options: .init(url: url, password: PostgresTestCluster.password), size: 1, acquireTimeout: .seconds(5))
        defer { pool.close() }
        return try await pool.withConnection { connection throws(PostgresError) in try connection.execute(statement) }
    }

    private func openPostgres(_ url: String, keys: StateKeys, clock: TestClock) async throws -> PostgresStateStore {
        try await PostgresStateStore.open(
            settings: PostgresSettings(url: url, password: Secret(PostgresTestCluster.password, source: "test"), poolSize: 2),
            keys: keys, lifetimes: StoreConformanceTests.lifetimes, refreshLockWaitSeconds: 10, clock: { clock.seconds },
            logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        )
    }

    @Test func theIndexColumnsHoldKeyedHashesNeverTheSubjectOrSession() async throws {
        let url = try PostgresTestCluster.shared.get().createDatabase()
        let keys = StateKeys(current: .generate())
        let clock = StoreConformanceTests.clock()
        let store = try await openPostgres(url, keys: keys, clock: clock)
        let alice = session("indexed", subject: "alice@example.com", sid: "provider-session-1", clock: clock)
        _ = try await store.save(alice)
        let rows = try await rawRows(url, "SELECT subject_index, sid_index FROM broker_sessions")
        let index = BlindIndex(stateKeys: keys)
        #expect(rows.bytes(0, 0) == index.value(.subject, provider: "dev", "alice@example.com"))
        #expect(rows.bytes(0, 1) == index.value(.providerSession, provider: "dev", "provider-session-1"))
        #expect(rows.bytes(0, 0) != index.value(.subject, provider: "corp", "alice@example.com"), "per provider")
        #expect(rows.bytes(0, 0) != BlindIndex(stateKeys: StateKeys(current: .generate())).value(.subject, provider: "dev", "alice@example.com"),
                "under a key only the state keys give")
        #expect(index.value(.subject, provider: "dev", "x") != index.value(.providerSession, provider: "dev", "x"), "per kind")
        let everything = try await rawRows(url, "SELECT string_agg(t::text, ' ') FROM broker_sessions t").string(0, 0) ?? ""
        #expect(!everything.contains("alice") && !everything.contains("provider-session"), "neither value is in the row in the clear")
        #expect(!everything.isEmpty)
        await store.close()
    }

    @Test func aDatabaseAtSchemaVersion3WithSessionsIsMigratedAndItsSessionsFound() async throws {
        let url = try PostgresTestCluster.shared.get().createDatabase()
        let keys = StateKeys(current: .generate())
        let clock = StoreConformanceTests.clock()
        let alice = session("before-4", subject: "alice", sid: "sid-old", clock: clock)
        // The database as a broker of schema version 3 left it: its tables, and a session row
        // with the columns it knew.
        let sealed = try RowSealer(keys: keys).seal(.session(alice), table: "sessions", key: alice.id)
        let pool = PostgresPool(options: .init(url: url, password: PostgresTestCluster.password), size: 1, acquireTimeout: .seconds(5))
        let keyID = Int64(bitPattern: keys.currentID)
        try await pool.transaction { connection throws(PostgresError) in
            try connection.execute("CREATE TABLE broker_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
            for version in 1...3 {
                for statement in PostgresSchema.migrations[version - 1] { try connection.execute(statement) }
                try connection.execute("INSERT INTO broker_schema (version) VALUES ($1)", [.int(Int64(version))])
            }
            try connection.execute("""
                INSERT INTO broker_sessions (id, version, key_id, sealed, provider, app, created_at, used_at, expires_at)
                VALUES ($1, 1, $2, $3, 'dev', 'demo', $4, $4, $5)
                """, [.bytes(alice.id.bytes), .int(keyID), .bytes(sealed), .double(clock.seconds), .double(clock.seconds + 3600)])
        }
        pool.close()
        let store = try await openPostgres(url, keys: keys, clock: clock)
        #expect(try await rawRows(url, "SELECT max(version) FROM broker_schema").int(0, 0) == Int64(PostgresSchema.latest))
        let bySubject = SessionFilter(provider: "dev", subject: "alice")
        let bySession = SessionFilter(provider: "dev", providerSessionID: "sid-old")
        #expect(try await store.findSessions(bySubject, after: nil, limit: 10, now: clock.seconds).sessions.map(\.id) == [alice.id])
        #expect(try await store.findSessions(bySession, after: nil, limit: 10, now: clock.seconds).sessions.map(\.id) == [alice.id])
        #expect(try await store.spendOnce(OpaqueToken.hash("jti-after-migration"), until: clock.seconds + 60))
        await store.reseal()
        #expect(try await rawRows(url, "SELECT subject_index IS NOT NULL AND sid_index IS NOT NULL FROM broker_sessions").bool(0, 0) == true)
        #expect(try await store.findSessions(bySubject, after: nil, limit: 10, now: clock.seconds).sessions.map(\.id) == [alice.id])
        await store.close()
    }

    @Test func rowsFromBeforeTheIndexAreFoundAndThenIndexedAndAKeyRotationHidesNothing() async throws {
        let url = try PostgresTestCluster.shared.get().createDatabase()
        let oldKey = SymmetricKey.generate()
        let clock = StoreConformanceTests.clock()
        let before = try await openPostgres(url, keys: StateKeys(current: oldKey), clock: clock)
        for session in population(clock) { _ = try await before.save(session) }
        await before.close()
        // As a database migrated from version 3 holds them: no index at all.
        _ = try await rawRows(url, "UPDATE broker_sessions SET subject_index = NULL, sid_index = NULL")
        let rotated = StateKeys(current: .generate(), older: [oldKey])
        let store = try await openPostgres(url, keys: rotated, clock: clock)
        let alice = SessionFilter(provider: "dev", subject: "alice")
        let sidA = SessionFilter(provider: "dev", providerSessionID: "sid-a")
        #expect(names(try await store.findSessions(alice, after: nil, limit: 100, now: clock.seconds)) == ["at-a1", "at-a2", "at-a3"])
        #expect(names(try await store.findSessions(sidA, after: nil, limit: 100, now: clock.seconds)) == ["at-a1", "at-a2"])
        await store.reseal()
        #expect(try await rawRows(url, "SELECT count(*) FROM broker_sessions WHERE subject_index IS NULL").int(0, 0) == 0, "re-sealing indexed them")
        #expect(names(try await store.findSessions(alice, after: nil, limit: 100, now: clock.seconds)) == ["at-a1", "at-a2", "at-a3"])
        #expect(names(try await store.findSessions(sidA, after: nil, limit: 100, now: clock.seconds)) == ["at-a1", "at-a2"])
        await store.close()
        // Indexed under the old key (an instance not yet given the new one wrote it): found by the new.
        let oldInstance = try await openPostgres(url, keys: StateKeys(current: oldKey), clock: clock)
        _ = try await oldInstance.save(session("late", subject: "alice", clock: clock))
        await oldInstance.close()
        let reopened = try await openPostgres(url, keys: rotated, clock: clock)
        #expect(names(try await reopened.findSessions(alice, after: nil, limit: 100, now: clock.seconds)) == ["at-a1", "at-a2", "at-a3", "at-late"])
        await reopened.close()
    }
}
