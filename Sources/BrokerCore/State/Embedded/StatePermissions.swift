import Foundation

/// Other users have no business with the state directory or the state key file. The files in the
/// directory are created 0600 and encrypted, so an open directory exposes names and sizes, and an
/// open key file the key that opens everything. A directory open to others is closed to them
/// where the broker owns it; anything else is reported at start (a key file mounted by a
/// container runtime is often 0444 or 0644, in a container with no other user: a warning, not a
/// refusal). The group is left alone: Kubernetes' `fsGroup` gives the broker its volume through it.
enum StatePermissions {
    /// What the start should warn about; empty when both are private.
    static func check(directory: String, keyFile: String?) -> [String] {
        var warnings: [String] = []
        if let mode = FilePermissions.mode(of: directory), mode & 0o007 != 0 {
            if (try? FileManager.default.setAttributes([.posixPermissions: mode & ~0o007], ofItemAtPath: directory)) != nil {
                warnings.append("the state directory \(directory) was open to other users (mode \(FilePermissions.octal(mode))); it is now \(FilePermissions.octal(mode & ~0o007))")
            } else {
                warnings.append("the state directory \(directory) is open to other users (mode \(FilePermissions.octal(mode))) and the broker cannot change that: make it 0700 (or 0770 for the broker's group) and owned by the broker's user")
            }
        }
        if let keyFile, let warning = FilePermissions.othersCanRead(keyFile, name: "the state key file \(keyFile)") { warnings.append(warning) }
        return warnings
    }
}
