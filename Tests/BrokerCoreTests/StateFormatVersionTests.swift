import BrokerCrypto
import Foundation
import Logging
import Testing

@testable import BrokerCore

/// Files of format version 1 (no check on a frame's length; Resources/state-v1, written by the
/// broker before version 2) are still read, damage in them is still damage, and what the broker
/// writes next is version 2.
@Suite(.serialized)
struct StateFormatVersionTests {
    private let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
    private let keys = StateKeys(current: try! SymmetricKey(bytes: Array(0..<32)))

    private func copyOfVersion1() throws -> String {
        let source = try #require(
            Bundle.module.url(forResource: "state-v1", withExtension: nil, subdirectory: "Resources")
                ?? Bundle.module.url(forResource: "state-v1", withExtension: nil)
        )
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("state-v1-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
        for name in ["snapshot.tbs", "journal-00000002.tbj"] {
            try FileManager.default.copyItem(atPath: source.appendingPathComponent(name).path, toPath: "\(copy)/\(name)")
        }
        return copy
    }

    private func open(_ path: String) throws(StateOpenError) -> EmbeddedStateStore {
        try EmbeddedStateStore(settings: StateSettings(directory: path), keys: keys, lifetimes: SessionLifetimes(idle: 1e10, absolute: 1e10), acceptDamage: false, clock: { Date().timeIntervalSince1970 }, logger: logger)
    }

    @Test func version1FilesAreReadAndVersion2IsWritten() async throws {
        let path = try copyOfVersion1()
        let state = try open(path)
        let now = Date().timeIntervalSince1970
        #expect(state.sessions.count == 4)
        #expect(state.session(OpaqueToken.hash("tbs_v1_2"), now: now) == nil)
        #expect(state.session(OpaqueToken.hash("tbs_v1_3"), now: now)?.refreshToken == "rt-3-rotated")
        #expect(state.session(OpaqueToken.hash("tbs_v1_5"), now: now)?.accessToken == "at-5")
        try await state.snapshot()
        for name in ["snapshot.tbs", "journal-00000004.tbj"] {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(path)/\(name)")))
            #expect(BigEndian.read(bytes, at: 4, width: 2) == 2, "\(name) is written in version 2")
        }
        #expect(try open(path).sessions.count == 4)
    }

    /// The check value every CRC-32C implementation gives for "123456789".
    @Test func crc32cGivesItsCheckValue() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
    }

    /// Version 1 has no check on the length, but a whole last frame that fails authentication
    /// is damage there too (it was once taken for a torn write).
    @Test func aDamagedLastFrameOfAVersion1JournalStopsTheStart() throws {
        let path = try copyOfVersion1()
        let journal = "\(path)/journal-00000002.tbj"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: journal))
        bytes[bytes.count - 20] ^= 0x04
        try bytes.write(to: URL(fileURLWithPath: journal))
        #expect(throws: StateOpenError.self) { try open(path) }
    }
}
