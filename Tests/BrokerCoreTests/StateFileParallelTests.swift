import BrokerCrypto
import Foundation
import Logging
import Synchronization
import Testing

@testable import BrokerCore

/// State files of many batches (``FrameWalk/batchBytes``), decoded on every core and written
/// from parts encoded on every core: every record comes back whole and in the file's order, and
/// damage stops a reading where a reading front to back stops.
@Suite(.serialized)
struct StateFileParallelTests {
    private let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
    private let now = Date().timeIntervalSince1970

    private func directory() -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("state-\(UUID().uuidString)").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    private func session(_ number: Int) -> Session {
        Session(
            id: OpaqueToken.hash("tbs_\(number)"), provider: "dev", app: "demo", subject: "user-\(number)",
            scopes: number % 3 == 0 ? ["openid"] : ["openid", "email"], accessToken: "at-\(number)-" + String(repeating: "a", count: 300),
            accessTokenExpiresAt: now + 3600, refreshToken: number % 5 == 0 ? nil : "rt-\(number)",
            idTokenClaims: Array(#"{"sub":"user-\#(number)"}"#.utf8), createdAt: now, signedInAt: now, usedAt: now
        )
    }

    private func open(_ path: String, _ keys: StateKeys) throws(StateOpenError) -> EmbeddedStateStore {
        try EmbeddedStateStore(settings: StateSettings(directory: path), keys: keys, lifetimes: SessionLifetimes(idle: 1e9, absolute: 1e9),
                               acceptDamage: false, clock: { Date().timeIntervalSince1970 }, logger: logger)
    }

    private func encoded(_ session: Session?) -> [UInt8] {
        var bytes: [UInt8] = []
        session.map { StateRecord.session($0).encode(into: &bytes) }
        return bytes
    }

    /// A state directory whose snapshot holds `count` sessions, in many batches.
    private func snapshotOfMany(_ count: Int, _ keys: StateKeys) async throws -> (path: String, sessions: [Session]) {
        let path = directory()
        let state = try open(path, keys)
        let sessions = (0..<count).map(session)
        #expect(try await state.importSessions(sessions) == count)
        try await state.snapshot()
        let walk = FrameWalk(try PositionalFile(SnapshotWriter.path(path)), kind: .snapshot, version: StateFileHeader.version)
        #expect(walk.batches.count >= 6, "\(walk.batches.count) batches")
        return (path, sessions)
    }

    @Test func aSnapshotOfManyBatchesIsReadBackWholeAndEqual() async throws {
        let keys = StateKeys(current: .generate())
        let (path, sessions) = try await snapshotOfMany(6000, keys)
        var state = try open(path, keys)
        try await state.save(session(6000))
        _ = try await state.updateSession(session(7).id, under: nil) { $0.refreshToken = "rotated" }
        _ = try await state.endSession(session(8).id, .revoked, now: now)
        state = try open(path, keys) // the snapshot, then the journal after it
        #expect(state.sessions.count == 6000)
        let changed = [session(7).id, session(8).id]
        let differing = sessions.filter { !changed.contains($0.id) && encoded(state.session($0.id, now: now)) != encoded($0) }
        #expect(differing.isEmpty, "\(differing.count) sessions differ")
        #expect(state.session(session(7).id, now: now)?.refreshToken == "rotated")
        #expect(state.session(session(8).id, now: now) == nil)
        #expect(encoded(state.session(session(6000).id, now: now)) == encoded(session(6000)))
    }

    /// Damage in a frame of a later batch: every record before that frame is applied, in order,
    /// none after it, and the error names that frame — not damage the walk of prefixes found
    /// further on. The same with the frames decoded on four threads and on the calling thread
    /// alone, whatever the machine's cores.
    @Test(arguments: [4, 1]) func damageStopsTheReadingAfterEveryFrameBeforeIt(threads: Int) async throws {
        let keys = StateKeys(current: .generate())
        let (path, _) = try await snapshotOfMany(6000, keys)
        let original = [UInt8](try Data(contentsOf: URL(fileURLWithPath: SnapshotWriter.path(path))))
        let walk = FrameWalk(try PositionalFile(SnapshotWriter.path(path)), kind: .snapshot, version: StateFileHeader.version)
        let damagedFrame = walk.frames[walk.batches[2].lowerBound + 1]
        let laterFrame = walk.frames[walk.batches[4].lowerBound]

        func read(_ bytes: [UInt8]) -> (ids: [SHA256Digest], error: StateLoadError?) {
            let file = directory() + "/snapshot.tbs"
            _ = FileManager.default.createFile(atPath: file, contents: Data(bytes))
            var ids: [SHA256Digest] = []
            do {
                _ = try StateFileReader.read(file, kind: .snapshot, keys: keys, threads: threads) { record in
                    if case .session(let session) = record { ids.append(session.id) }
                }
                return (ids, nil)
            } catch {
                return (ids, error)
            }
        }
        let whole = read(original)
        #expect(whole.error == nil && whole.ids.count == 6000)
        // A reading front to back of the file cut where the damaged frame begins.
        let before = read(Array(original.prefix(damagedFrame.offset)))
        #expect(before.error?.reason.contains("end marker is missing") == true)
        #expect(!before.ids.isEmpty && before.ids == Array(whole.ids.prefix(before.ids.count)))

        var damaged = original
        damaged[damagedFrame.offset + walk.prefixSize + 40] ^= 0x01
        damaged[laterFrame.offset] ^= 0x01 // its length, which then fails its check
        let found = read(damaged)
        #expect(found.ids == before.ids)
        #expect(found.error?.offset == damagedFrame.offset)
        #expect(found.error?.reason == "frame \(damagedFrame.index) fails authentication: the file is damaged")
    }

    @Test func orderedWorkHandsItemsOverInOrderAndStopsAtAThrow() throws {
        var taken: [Int] = []
        OrderedWork.run(items: 1000, threads: 4, makeWorker: { { $0 * 2 } }) { taken.append($0) }
        #expect(taken == (0..<1000).map { $0 * 2 })

        struct Stop: Error {}
        let begun = Counter()
        #expect(throws: Stop.self) {
            try OrderedWork.run(items: 1000, threads: 4, makeWorker: { { index in begun.add(); return index } }) { (index: Int) throws(Stop) in
                if index == 10 { throw Stop() }
            }
        }
        let atReturn = begun.value
        #expect(atReturn <= 11 + 4 * OrderedWork.window, "items begun past the caller's window")
        Thread.sleep(forTimeInterval: 0.05)
        #expect(begun.value == atReturn, "no thread goes on after the run ends")
    }

    /// A thread the system refuses (a container's limit on processes) leaves its share to the
    /// threads that started, or, when none did, to the calling thread: the work is done, in order.
    @Test func orderedWorkGetsDoneWhenThreadsCannotStart() {
        let attempts = Counter()
        var taken: [Int] = []
        OrderedWork.run(items: 200, threads: 4, start: { body in
            attempts.add()
            return attempts.value == 1 && OrderedWork.startThread(body) // the first starts, the others are refused
        }, makeWorker: { { $0 } }) { taken.append($0) }
        #expect(taken == Array(0..<200) && attempts.value == 4)
        taken = []
        OrderedWork.run(items: 200, threads: 4, start: { _ in false }, makeWorker: { { $0 } }) { taken.append($0) }
        #expect(taken == Array(0..<200))
    }

    private final class Counter: Sendable {
        private let count = Mutex(0)
        func add() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }
}
