import BrokerCrypto
import Testing

@testable import BrokerCore

/// The PostgreSQL store's cache of sessions (State/Postgres/SessionCache.swift): a load that read
/// a row before it changed on another instance never puts it back after the change's notification,
/// nor after the cache forgot what it was told (its notification connection lost; its record of
/// invalidations full).
struct SessionCacheTests {
    private let lifetimes = SessionLifetimes(idle: 3600, absolute: 86_400)

    private func session(_ name: String, accessToken: String) -> Session {
        Session(id: OpaqueToken.hash("tbs_\(name)"), provider: "dev", app: "demo", subject: name, scopes: ["openid"],
                accessToken: accessToken, accessTokenExpiresAt: nil, refreshToken: nil, idTokenClaims: nil, createdAt: 0, signedInAt: 0, usedAt: 0)
    }

    private func accessToken(_ cache: SessionCache, _ session: Session) -> String? {
        cache.read(session.id, now: 10) { $0.accessToken }
    }

    @Test func aLoadBegunAfterTheLastChangeIsKept() {
        let cache = SessionCache(capacity: 1000, lifetimes: lifetimes)
        let loaded = session("a", accessToken: "v2")
        cache.invalidate(loaded.id, below: 2)
        cache.insert(loaded, version: 2, since: cache.currentGeneration)
        #expect(accessToken(cache, loaded) == "v2")
        cache.insert(session("a", accessToken: "v1"), version: 1, since: cache.currentGeneration, written: true)
        #expect(accessToken(cache, loaded) == "v2", "an older version never replaces a newer one")
    }

    @Test func aLoadBegunBeforeItsSessionChangedIsNotKept() {
        let cache = SessionCache(capacity: 1000, lifetimes: lifetimes)
        let stale = session("a", accessToken: "v1")
        let began = cache.currentGeneration
        cache.invalidate(stale.id, below: 2)
        cache.insert(stale, version: 1, since: began)
        #expect(accessToken(cache, stale) == nil)
    }

    @Test func aLoadBegunBeforeTheCacheWasClearedIsNotKept() {
        let cache = SessionCache(capacity: 1000, lifetimes: lifetimes)
        let stale = session("a", accessToken: "v1")
        let began = cache.currentGeneration
        // The notification connection dropped: a change to the session may have gone unheard.
        cache.clear()
        cache.insert(stale, version: 1, since: began)
        #expect(accessToken(cache, stale) == nil)
        cache.insert(stale, version: 1, since: cache.currentGeneration)
        #expect(accessToken(cache, stale) == "v1", "a load begun after the clear is kept")
    }

    @Test func anOwnWriteIsKeptDespiteItsOwnNotification() {
        let cache = SessionCache(capacity: 1000, lifetimes: lifetimes)
        let written = session("a", accessToken: "v2")
        let began = cache.currentGeneration
        // The write's own notification can come before its caller resumes.
        cache.invalidate(written.id, below: 2)
        cache.insert(written, version: 2, since: began, written: true)
        #expect(accessToken(cache, written) == "v2")
    }

    @Test func anOwnWriteNeverPutsBackWhatAnotherInstanceChangedOrRemovedSince() {
        let cache = SessionCache(capacity: 1000, lifetimes: lifetimes)
        let written = session("a", accessToken: "v2")
        let began = cache.currentGeneration
        // Another instance ended the session right after this one's write committed, and its
        // notification came first: a removal notifies the largest version.
        cache.invalidate(written.id, below: .max)
        cache.insert(written, version: 2, since: began, written: true)
        #expect(accessToken(cache, written) == nil, "the ended session stays out")
        let other = session("b", accessToken: "v2")
        let otherBegan = cache.currentGeneration
        cache.invalidate(other.id, below: 3) // changed again (v3) elsewhere
        cache.insert(other, version: 2, since: otherBegan, written: true)
        #expect(accessToken(cache, other) == nil, "nor an older version than one notified")
    }

    @Test func aLoadBegunBeforeItsShardForgotItsInvalidationIsNotKept() {
        let cache = SessionCache(capacity: 1000, lifetimes: lifetimes, shardCount: 1)
        let stale = session("a", accessToken: "v1")
        let began = cache.currentGeneration
        cache.invalidate(stale.id, below: 2)
        // More than the cache remembers: it forgets them all, that one too.
        for n in 0..<150_000 { cache.invalidate(OpaqueToken.hash("tbs_other\(n)"), below: 2) }
        cache.insert(stale, version: 1, since: began)
        #expect(accessToken(cache, stale) == nil)
    }
}
