import Foundation
import Testing

@testable import BrokerCore

/// A state directory open to others is closed to them; a state key file others can read is
/// reported.
struct StatePermissionsTests {
    private func scratch() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("perm-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    private func mode(_ path: String) throws -> Int {
        try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
    }

    @Test func anOpenStateDirectoryIsTightened() throws {
        let directory = try scratch()
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory)
        let warnings = StatePermissions.check(directory: directory, keyFile: nil)
        #expect(try mode(directory) == 0o750)
        #expect(warnings == ["the state directory \(directory) was open to other users (mode 0755); it is now 0750"])
        #expect(StatePermissions.check(directory: directory, keyFile: nil).isEmpty)
    }

    @Test func aKeyFileOthersCanReadIsReported() throws {
        let directory = try scratch()
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory)
        let key = "\(directory)/state-key"
        _ = FileManager.default.createFile(atPath: key, contents: Data("k".utf8), attributes: [.posixPermissions: 0o644])
        let warnings = StatePermissions.check(directory: directory, keyFile: key)
        #expect(warnings.count == 1)
        #expect(warnings.first?.contains("the state key file \(key) can be read by other users (mode 0644)") == true)
        #expect(try mode(key) == 0o644, "a key file is reported, not changed")
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: key)
        #expect(StatePermissions.check(directory: directory, keyFile: key).isEmpty)
    }
}
