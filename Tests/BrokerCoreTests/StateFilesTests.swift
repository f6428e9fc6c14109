import BrokerCrypto
import Foundation
import Logging
import Testing

@testable import BrokerCore

/// Snapshots and journals: round trips, crashes, damage at every region, keys and rotation.
@Suite(.serialized)
struct StateFilesTests {
    private let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
    private let lifetimes = SessionLifetimes(idle: 1e9, absolute: 1e9)
    private let now = Date().timeIntervalSince1970

    private func directory() -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("state-\(UUID().uuidString)").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    private func session(_ number: Int, refresh: String? = "rt") -> Session {
        Session(
            id: OpaqueToken.hash("tbs_\(number)"), provider: "dev", app: "demo", subject: "user-\(number)",
            scopes: ["openid", "email"], accessToken: "at-\(number)", accessTokenExpiresAt: now + 3600,
            refreshToken: refresh.map { "\($0)-\(number)" }, idTokenClaims: Array(#"{"sub":"user"}"#.utf8),
            createdAt: now, signedInAt: now, usedAt: now
        )
    }

    private func open(_ path: String, _ keys: StateKeys, acceptDamage: Bool = false) throws(StateOpenError) -> EmbeddedStateStore {
        try EmbeddedStateStore(settings: StateSettings(directory: path), keys: keys, lifetimes: lifetimes, acceptDamage: acceptDamage, clock: { Date().timeIntervalSince1970 }, logger: logger)
    }

    /// A state directory with a journal of three frames (three saved sessions), nothing else.
    private func journalWithThreeFrames(_ keys: StateKeys) async throws -> (String, String) {
        let path = directory()
        let state = try open(path, keys)
        for number in 1...3 { try await state.save(session(number)) }
        return (path, Journal.path(path, generation: 1))
    }

    @Test func journalAndSnapshotRoundTrip() async throws {
        let keys = StateKeys(current: .generate())
        let path = directory()
        var state = try open(path, keys)
        for number in 1...50 { try await state.save(session(number)) }
        _ = try await state.endSession(session(7).id, .revoked, now: now)
        _ = try await state.updateSession(session(8).id, under: nil) { $0.refreshToken = "rotated" }
        let verifier = PKCE.makeVerifier()
        try await state.issueHandoff(OpaqueToken.hash("tbh_x"), Handoff(app: "demo", redirectURI: "x:/cb", appChallenge: PKCE.challenge(for: verifier),
                                                                     expiresAt: now + 60, status: .merged(into: session(9).id, boundTo: "jkt-9", provider: "dev", providerBound: false)))
        try await state.issueHandoff(OpaqueToken.hash("tbh_y"), Handoff(app: "demo", redirectURI: "x:/cb", appChallenge: PKCE.challenge(for: verifier),
                                                                     expiresAt: now + 60, status: .merged(into: session(10).id, boundTo: nil, provider: "dev", providerBound: true)))
        state = try open(path, keys) // a crash: no snapshot, the journal alone
        #expect(state.sessions.count == 49)
        #expect(state.session(session(7).id, now: now) == nil)
        #expect(state.session(session(8).id, now: now)?.refreshToken == "rotated")
        #expect(state.session(session(9).id, now: now)?.idTokenClaims == session(9).idTokenClaims)
        try await state.snapshot()
        try await state.save(session(100))
        state = try open(path, keys) // snapshot + the newer journal
        #expect(state.sessions.count == 50)
        #expect(state.session(session(100).id, now: now)?.accessToken == "at-100")
        var attempt = HandoffAttempt.demo(verifier: verifier, redirectURI: "x:/cb", at: now)
        let unproved = try await state.redeemHandoff(OpaqueToken.hash("tbh_x"), attempt).answer
        guard case .refused(.wrongKey) = unproved else {
            Issue.record("the key the code's session is bound to did not survive: \(unproved)")
            return
        }
        var atIssuer = attempt
        atIssuer.issuer = "dev"
        guard case .refused(.boundSessionAtIssuer) = try await state.redeemHandoff(OpaqueToken.hash("tbh_y"), atIssuer).answer else {
            Issue.record("that the code's session has its provider token bound did not survive")
            return
        }
        attempt.keyThumbprint = "jkt-9"
        let redemption = try await state.redeemHandoff(OpaqueToken.hash("tbh_x"), attempt).answer
        guard case .merged(session(9).id) = redemption else {
            Issue.record("the handoff code did not survive: \(redemption)")
            return
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: path)
        #expect(names.filter { $0.hasPrefix("journal-") }.count <= 2, "snapshots retire the journals they cover: \(names)")
    }

    /// A frame whose write or sync fails is cut off and written again in its place; one that
    /// keeps failing is reported failed (its change in memory only), and the frames after it
    /// follow the last good one — not a hole where the failed one was, which the next start
    /// would take for damage.
    @Test func aFailedFrameIsWrittenAgainInItsPlaceAndLaterFramesFollowIt() async throws {
        let keys = StateKeys(current: .generate())
        let path = directory()
        let faults = StateFileFaults()
        let state = try EmbeddedStateStore(settings: StateSettings(directory: path), keys: keys, lifetimes: lifetimes, acceptDamage: false,
                                           clock: { Date().timeIntervalSince1970 }, logger: logger, faults: faults)
        try await state.save(session(1))
        faults.failSyncs(1)
        try await state.save(session(2))
        #expect(faults.syncsToFail == 0, "written again after its failure")
        faults.failSyncs(Journal.retryPatience.count + 1)
        await #expect(throws: StateWriteError.self, "a frame that keeps failing is reported") { try await state.save(session(3)) }
        try await state.save(session(4))
        let reopened = try open(path, keys)
        #expect([1, 2, 4].allSatisfy { reopened.session(session($0).id, now: now) != nil }, "every acknowledged change, and no damage")
        #expect(reopened.session(session(3).id, now: now) == nil, "the failed one was never acknowledged")
    }

    @Test func tornLastJournalRecordIsDroppedAndReported() async throws {
        let keys = StateKeys(current: .generate())
        let (_, journal) = try await journalWithThreeFrames(keys)
        let original = try Data(contentsOf: URL(fileURLWithPath: journal))
        let size = original.count
        let tornAt = lastFrameOffset(original)
        for cut in [1, 10, 40] {
            let copy = directory()
            let copied = Journal.path(copy, generation: 1)
            try FileManager.default.copyItem(atPath: journal, toPath: copied)
            try StateFileIO.truncate(copied, to: size - cut)
            let output = LogOutput.memory()
            let logger = Logger(label: "test") { LogLineHandler(label: $0, level: .info, style: .json, output: output) }
            let state = try EmbeddedStateStore(settings: StateSettings(directory: copy), keys: keys, lifetimes: lifetimes, acceptDamage: false, clock: { Date().timeIntervalSince1970 }, logger: logger)
            #expect(state.sessions.count == 2, "cut \(cut)")
            let report = try #require(output.lines.first { $0.contains("dropped a torn journal record") }, "cut \(cut)")
            #expect(report.contains(copied))
            #expect(report.contains(#""offset":\#(tornAt),"#), "numbers as numbers")
            #expect(report.contains(#""size":\#(size - cut - tornAt)}"#))
        }
    }

    /// Found by fuzzing: a file ending in 1–3 stray bytes (a crash while a frame's length was
    /// written) trapped instead of being a torn tail (journal) or a truncated file (snapshot).
    @Test func strayBytesAfterTheLastFrame() async throws {
        let keys = StateKeys(current: .generate())
        let (path, journal) = try await journalWithThreeFrames(keys)
        let journalBytes = try Data(contentsOf: URL(fileURLWithPath: journal))
        let state = try open(path, keys)
        try await state.snapshot()
        for count in 1...3 {
            let copy = directory()
            var bytes = journalBytes
            bytes.append(contentsOf: [UInt8](repeating: 1, count: count))
            try bytes.write(to: URL(fileURLWithPath: Journal.path(copy, generation: 1)))
            #expect(try open(copy, keys).sessions.count == 3, "\(count) stray bytes after a journal are a torn tail")
            let snapshotCopy = directory()
            var snapshot = try Data(contentsOf: URL(fileURLWithPath: SnapshotWriter.path(path)))
            snapshot.append(contentsOf: [UInt8](repeating: 1, count: count))
            try snapshot.write(to: URL(fileURLWithPath: SnapshotWriter.path(snapshotCopy)))
            #expect(throws: StateOpenError.self, "\(count) stray bytes after a snapshot") { try open(snapshotCopy, keys) }
        }
    }

    /// A flipped bit anywhere in a journal, the last frame and its length included, is damage
    /// that stops the start with the file and an offset at or before the flip — never a torn
    /// tail that would silently drop acknowledged changes.
    @Test func aBitFlipAtAnyOffsetOfAJournalStopsTheStart() async throws {
        let keys = StateKeys(current: .generate())
        let (_, journal) = try await journalWithThreeFrames(keys)
        let original = try Data(contentsOf: URL(fileURLWithPath: journal))
        for offset in 0..<original.count {
            for bit in [offset % 8, 7 - offset % 8] {
                var damaged = original
                damaged[offset] ^= UInt8(1) << bit
                let copy = directory()
                try damaged.write(to: URL(fileURLWithPath: Journal.path(copy, generation: 1)))
                do {
                    let state = try open(copy, keys)
                    Issue.record("a flip of bit \(bit) at \(offset) was not noticed: \(state.sessions.count) sessions loaded")
                } catch {
                    #expect(error.description.contains("journal-00000001.tbj at offset"), "\(error)")
                    if offset >= StateFileHeader.size {
                        let reported = try #require(Int(error.description.split(separator: " at offset ")[1].prefix { $0.isNumber }))
                        #expect(reported <= offset && reported >= StateFileHeader.size, "flip at \(offset) reported at \(reported)")
                    }
                }
            }
        }
    }

    /// A journal cut at any length keeps every frame that ends before the cut (each was synced,
    /// and so possibly acknowledged) and reports the cut-short rest as the torn tail.
    @Test func aJournalCutAtAnyLengthKeepsEveryCompleteFrame() async throws {
        let keys = StateKeys(current: .generate())
        let (_, journal) = try await journalWithThreeFrames(keys)
        let original = [UInt8](try Data(contentsOf: URL(fileURLWithPath: journal)))
        let ends = frameEnds(original)
        #expect(ends.count == 3)
        let path = directory() + "/journal-00000001.tbj"
        for length in StateFileHeader.size...original.count {
            _ = FileManager.default.createFile(atPath: path, contents: Data(original.prefix(length)))
            var sessions = 0
            let scan = try StateFileReader.read(path, kind: .journal, keys: keys) { _ in sessions += 1 }
            let complete = ends.filter { $0 <= length }
            #expect(sessions == complete.count, "cut at \(length)")
            let kept = complete.last ?? StateFileHeader.size
            if kept == length {
                #expect(scan.tornTail == nil, "cut at \(length)")
            } else {
                #expect(scan.tornTail?.offset == kept && scan.tornTail?.size == length - kept, "cut at \(length)")
            }
        }
    }

    /// Journals follow their snapshot without a gap: a snapshot or a journal missing before one
    /// that is there is damage, not a fresh start.
    @Test func aMissingSnapshotOrJournalIsDamage() async throws {
        let keys = StateKeys(current: .generate())
        let (path, _) = try await journalWithThreeFrames(keys)
        var state = try open(path, keys)
        try await state.snapshot() // snapshot generation 3 covers journals 1 and 2
        try await state.save(session(4))
        state = try open(path, keys) // journal 4 starts
        try await state.save(session(5))

        /// A copy of the directory without `missing`, and the error its start gives.
        func startWithout(_ missing: String) throws -> (copy: String, error: String) {
            let copy = directory()
            for name in try FileManager.default.contentsOfDirectory(atPath: path) where name != missing {
                try FileManager.default.copyItem(atPath: "\(path)/\(name)", toPath: "\(copy)/\(name)")
            }
            do {
                _ = try open(copy, keys)
                return (copy, "started")
            } catch {
                return (copy, error.description)
            }
        }
        let gap = try startWithout("journal-00000003.tbj")
        #expect(gap.error.contains("journal-00000003.tbj at offset 0: the file is missing, but \(gap.copy)/journal-00000004.tbj follows it"), "\(gap.error)")
        let (noSnapshot, error) = try startWithout(SnapshotWriter.fileName)
        #expect(error.contains("snapshot.tbs at offset 0: the file is missing, but \(noSnapshot)/journal-00000003.tbj follows it"), "\(error)")
        let accepted = try open(noSnapshot, keys, acceptDamage: true)
        #expect(accepted.startedPastDamage)
        #expect(accepted.sessions.count == 2, "journals 3 and 4 hold sessions 4 and 5")

        let intact = try open(path, keys)
        #expect(intact.sessions.count == 5)
        #expect(!intact.startedPastDamage)
    }

    /// A file the system will not read is not damage: the start stops naming it, and even
    /// `--accept-damaged-state` leaves it where it is. (Root reads any file whatever its mode,
    /// so the snapshot here is a directory: opened, never read.)
    @Test func anUnreadableFileStopsTheStartAndIsNeverSetAside() async throws {
        let keys = StateKeys(current: .generate())
        let (path, _) = try await journalWithThreeFrames(keys)
        try FileManager.default.createDirectory(atPath: SnapshotWriter.path(path), withIntermediateDirectories: false)
        for acceptDamage in [false, true] {
            do {
                _ = try open(path, keys, acceptDamage: acceptDamage)
                Issue.record("started past an unreadable snapshot (accepting damage: \(acceptDamage))")
            } catch {
                #expect(error.description.contains("\(SnapshotWriter.path(path)) at offset 0: cannot read"), "\(error)")
                #expect(error.description.contains("is not damage, and is never set aside"), "\(error)")
                #expect(!error.description.contains("--accept-damaged-state"), "\(error)")
            }
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: path)
        #expect(names.contains(SnapshotWriter.fileName) && names.contains("journal-00000001.tbj") && !names.contains { $0.contains(".damaged-") }, "\(names)")
        let inspected = #expect(throws: StateInspectionError.self) { try StateInspection.describe(StateSettings(directory: path, keys: keys)) }
        #expect(inspected?.description.contains("bytes, UNREADABLE: \(SnapshotWriter.path(path)) at offset 0: cannot read") == true,
                "\(String(describing: inspected))")
    }

    /// Past a damaged snapshot, whose generation is unknown, the journals are read from the
    /// first one there: no journal is said to be missing before it.
    @Test func pastADamagedSnapshotNoJournalIsSaidToBeMissing() async throws {
        let keys = StateKeys(current: .generate())
        let (path, _) = try await journalWithThreeFrames(keys)
        var state = try open(path, keys)
        try await state.snapshot()
        try await state.save(session(4))
        state = try open(path, keys)
        try await state.save(session(5))
        var damaged = try Data(contentsOf: URL(fileURLWithPath: SnapshotWriter.path(path)))
        damaged[StateFileHeader.size + 3] ^= 0x01
        try damaged.write(to: URL(fileURLWithPath: SnapshotWriter.path(path)))
        var sessions = 0
        let report = try StateRecovery.load(directory: path, keys: keys, acceptDamage: true) { record in
            if case .session = record { sessions += 1 }
        }
        #expect(report.damaged.map(\.path) == [SnapshotWriter.path(path)], "\(report.damaged)")
        #expect(sessions == 2, "the journals after the snapshot hold sessions 4 and 5")
    }

    /// A journal the snapshot covers, which a crash kept from being deleted, is deleted unread
    /// by a start: inspection does not read it either, so a key retired since does not fail it.
    @Test func inspectionLeavesACoveredJournalUnread() async throws {
        let old = SymmetricKey.generate(), new = SymmetricKey.generate()
        let (path, journal) = try await journalWithThreeFrames(StateKeys(current: old))
        let kept = try Data(contentsOf: URL(fileURLWithPath: journal))
        let rotated = try open(path, StateKeys(current: new, older: [old]))
        try await rotated.snapshot() // under the new key, covering journal 1, which it deletes
        try kept.write(to: URL(fileURLWithPath: journal)) // as if the deletion had not happened
        let described = try StateInspection.describe(StateSettings(directory: path, keys: StateKeys(current: new)))
        #expect(described.contains("journal-00000001.tbj: \(kept.count) bytes, covered by the snapshot"), "\(described)")
        #expect(try open(path, StateKeys(current: new)).sessions.count == 3)
    }

    /// `state inspect` gives a start's verdict: it fails where a start stops, on what no single
    /// file shows too, and passes what a start takes in its stride.
    @Test func inspectionAgreesWithAStart() async throws {
        let keys = StateKeys(current: .generate())
        let missing = directory() + "/nothing-here"
        let absent = #expect(throws: StateInspectionError.self) { try StateInspection.describe(StateSettings(directory: missing, keys: keys)) }
        #expect(absent?.description == "the state directory \(missing) does not exist, or is not a directory")

        let (path, _) = try await journalWithThreeFrames(keys)
        var state = try open(path, keys)
        try await state.snapshot() // generation 3
        try await state.save(session(4))
        state = try open(path, keys) // journal 4
        try await state.save(session(5))
        #expect(try StateInspection.describe(StateSettings(directory: path, keys: keys)).contains("records:"))

        // A crash while journal 5 was being created: a start removes it, so inspection passes.
        #expect(FileManager.default.createFile(atPath: Journal.path(path, generation: 5), contents: Data()))
        let cut = try StateInspection.describe(StateSettings(directory: path, keys: keys))
        #expect(cut.contains("journal-00000005.tbj: 0 bytes, cut short while it was created"), "\(cut)")
        _ = try open(path, keys)

        // Journal 3 gone, journal 4 still there: every file left is whole, and a start stops.
        try FileManager.default.removeItem(atPath: Journal.path(path, generation: 3))
        #expect(throws: StateOpenError.self) { try open(path, keys) }
        let gap = #expect(throws: StateInspectionError.self) { try StateInspection.describe(StateSettings(directory: path, keys: keys)) }
        #expect(gap?.description.contains("a start stops at: \(Journal.path(path, generation: 3)) at offset 0: the file is missing") == true,
                "\(String(describing: gap))")
    }

    @Test func anyDamageToASnapshotStopsTheStart() async throws {
        let keys = StateKeys(current: .generate())
        let path = directory()
        let state = try open(path, keys)
        for number in 1...20 { try await state.save(session(number)) }
        try await state.snapshot()
        let snapshot = SnapshotWriter.path(path)
        let original = try Data(contentsOf: URL(fileURLWithPath: snapshot))
        for offset in stride(from: 0, to: original.count, by: 5) {
            let copy = directory()
            var damaged = original
            damaged[offset] ^= 0x01
            try damaged.write(to: URL(fileURLWithPath: SnapshotWriter.path(copy)))
            #expect(throws: StateOpenError.self, "flip at \(offset)") { try open(copy, keys) }
        }
        for length in stride(from: 0, to: original.count, by: 9) {
            let copy = directory()
            try original.prefix(length).write(to: URL(fileURLWithPath: SnapshotWriter.path(copy)))
            #expect(throws: StateOpenError.self, "truncated to \(length)") { try open(copy, keys) }
        }
    }

    @Test func damageCanBeAcceptedExplicitly() async throws {
        let keys = StateKeys(current: .generate())
        let (path, journal) = try await journalWithThreeFrames(keys)
        var damaged = try Data(contentsOf: URL(fileURLWithPath: journal))
        damaged[StateFileHeader.size + 20] ^= 0xFF
        try damaged.write(to: URL(fileURLWithPath: journal))
        #expect(throws: StateOpenError.self) { try open(path, keys) }
        let state = try open(path, keys, acceptDamage: true)
        #expect(state.sessions.count == 0)
        let names = try FileManager.default.contentsOfDirectory(atPath: path)
        #expect(names.contains { $0.hasPrefix("journal-00000001.tbj.damaged-") }, "\(names)")
    }

    @Test func wrongKeyAndKeyRotation() async throws {
        let old = SymmetricKey.generate()
        let (path, _) = try await journalWithThreeFrames(StateKeys(current: old))
        do {
            _ = try open(path, StateKeys(current: .generate()))
            Issue.record("opened with the wrong key")
        } catch {
            #expect(error.description.contains("encrypted with key \(StateKeys.hex(id: StateKeys.id(of: old)))"))
            #expect(error.description.contains("not among the configured state keys"))
        }
        let new = SymmetricKey.generate()
        let rotated = StateKeys(current: new, older: [old])
        let state = try open(path, rotated)
        #expect(state.sessions.count == 3)
        try await state.snapshot()
        // After the snapshot only the new key is needed.
        let reopened = try open(path, StateKeys(current: new))
        #expect(reopened.sessions.count == 3)
    }

    @Test func unknownFormatVersionIsNamed() async throws {
        let keys = StateKeys(current: .generate())
        let (path, journal) = try await journalWithThreeFrames(keys)
        var data = try Data(contentsOf: URL(fileURLWithPath: journal))
        data[5] = 9
        try data.write(to: URL(fileURLWithPath: journal))
        do {
            _ = try open(path, keys)
            Issue.record("opened a file of an unknown version")
        } catch {
            #expect(error.description.contains("at offset 4: format version 9"))
        }
    }

    @Test func filesNeverContainTokensInTheClear() async throws {
        let keys = StateKeys(current: .generate())
        let (path, journal) = try await journalWithThreeFrames(keys)
        var files = [try Data(contentsOf: URL(fileURLWithPath: journal))]
        let state = try open(path, keys)
        try await state.snapshot()
        files.append(try Data(contentsOf: URL(fileURLWithPath: SnapshotWriter.path(path))))
        for bytes in files {
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(bytes.count > StateFileHeader.size)
            #expect(!text.contains("at-1") && !text.contains("rt-2") && !text.contains("user-3"))
        }
    }

    /// The offset of the last frame of a state file.
    private func lastFrameOffset(_ data: Data) -> Int {
        frameEnds([UInt8](data)).dropLast().last ?? StateFileHeader.size
    }

    /// Where each frame of a state file ends.
    private func frameEnds(_ bytes: [UInt8]) -> [Int] {
        let prefix = FrameLayout.prefixSize(version: StateFileHeader.version)
        var ends: [Int] = []
        var offset = StateFileHeader.size
        while offset + prefix <= bytes.count {
            offset += prefix + Int(BigEndian.read(bytes, at: offset, width: 4))
            ends.append(offset)
        }
        return ends
    }
}
