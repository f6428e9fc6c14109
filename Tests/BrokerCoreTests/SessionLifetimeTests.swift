import Testing

@testable import BrokerCore

struct SessionLifetimeTests {
    private func session(_ name: String, created: Double, used: Double) -> Session {
        Session(id: OpaqueToken.hash(name), provider: "dev", app: "demo", subject: name, scopes: [], accessToken: "at",
                accessTokenExpiresAt: nil, refreshToken: nil, idTokenClaims: nil, createdAt: created, signedInAt: created, usedAt: used)
    }

    @Test func idleAndAbsoluteLifetimesEndSessions() {
        let store = SessionTable(log: NoChangeLog(), lifetimes: SessionLifetimes(idle: 100, absolute: 1000))
        _ = store.put(session("tbs_idle", created: 0, used: 0))
        _ = store.put(session("tbs_old", created: 0, used: 950))
        _ = store.put(session("tbs_live", created: 500, used: 990))
        #expect(store.read(OpaqueToken.hash("tbs_idle"), now: 1001) { $0.id } == nil, "unused for longer than the idle lifetime")
        #expect(store.read(OpaqueToken.hash("tbs_old"), now: 1001) { $0.id } == nil, "older than the absolute lifetime")
        #expect(store.read(OpaqueToken.hash("tbs_live"), now: 1001) { $0.id } != nil)
        #expect(Set(store.expired(now: 1001)) == [OpaqueToken.hash("tbs_idle"), OpaqueToken.hash("tbs_old")])
    }

    /// A use marks the session used (at most once a minute), in the store itself; a read alone
    /// does not (a request refused after its read keeps no session alive).
    @Test func aUseMarksTheSessionUsedAndAReadDoesNot() {
        let store = SessionTable(log: NoChangeLog(), lifetimes: SessionLifetimes(idle: 100, absolute: 1000))
        let id = OpaqueToken.hash("tbs_used")
        _ = store.put(session("tbs_used", created: 0, used: 0))
        #expect(store.read(id, now: 90) { $0.usedAt } == 0, "a read marks nothing")
        store.noteUse(id, now: 50)
        #expect(store.read(id, now: 50) { $0.usedAt } == 0, "within a minute of the last mark")
        store.noteUse(id, now: 90)
        #expect(store.read(id, now: 90) { $0.usedAt } == 90)
        #expect(store.read(id, now: 180) { $0.subject } == "tbs_used", "idle for 90 s of 100, not 180")
        store.noteUse(id, now: 180)
        #expect(store.capture().flatMap(\.values).first?.session.usedAt == 180)
        #expect(store.read(id, now: 281) { $0.subject } == nil, "read, never used again: idle past its lifetime")
    }
}
