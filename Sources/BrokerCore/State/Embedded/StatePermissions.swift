import Foundation

/// Other users have no business with the state directory. The files in it are created 0600 and
/// encrypted, so an open directory exposes names and sizes. A directory open to others is closed
/// to them where the broker owns it, else reported at start (the state key file is one of the
/// secret files ``StartChecks`` reports). The group is left alone: Kubernetes' `fsGroup` gives
/// the broker its volume through it.
enum StatePermissions {
    /// What the start should warn about; empty when the directory is private.
    static func check(directory: String) -> [String] {
        var warnings: [String] = []
        if let mode = FilePermissions.mode(of: directory), mode & 0o007 != 0 {
            if (try? FileManager.default.setAttributes([.posixPermissions: mode & ~0o007], ofItemAtPath: directory)) != nil {
                warnings.append("the state directory \(directory) was open to other users (mode \(FilePermissions.octal(mode))); it is now \(FilePermissions.octal(mode & ~0o007))")
            } else {
                warnings.append("the state directory \(directory) is open to other users (mode \(FilePermissions.octal(mode))) and the broker cannot change that: make it 0700 (or 0770 for the broker's group) and owned by the broker's user")
            }
        }
        return warnings
    }
}
