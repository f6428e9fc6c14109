import Foundation

/// A file's permission bits, for the start's warnings about secrets other users can read.
enum FilePermissions {
    static func mode(of path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? Int
    }

    /// `0755`, as `chmod` takes it.
    static func octal(_ mode: Int) -> String {
        "0" + String(mode, radix: 8)
    }

    /// The warning when other users can read the file at `path`, which the warning calls `name`
    /// ("the state key file /run/key"); nil when they cannot (or the file cannot be looked at).
    static func othersCanRead(_ path: String, name: String) -> String? {
        guard let mode = mode(of: path), mode & 0o004 != 0 else { return nil }
        return "\(name) can be read by other users (mode \(octal(mode))): make it 0400 or 0600 and owned by the broker's user"
    }
}
