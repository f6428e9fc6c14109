import Foundation
import Testing

@testable import BrokerCore

/// A state directory open to others is closed to them.
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
        let warnings = StatePermissions.check(directory: directory)
        #expect(try mode(directory) == 0o750)
        #expect(warnings == ["the state directory \(directory) was open to other users (mode 0755); it is now 0750"])
        #expect(StatePermissions.check(directory: directory).isEmpty)
    }
}
