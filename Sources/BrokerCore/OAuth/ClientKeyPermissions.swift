import Foundation

/// The private keys the broker signs client assertions with are for its user alone. A key file
/// other users can read is reported at start (a container runtime often mounts secrets 0444 in
/// a container with no other user: a warning, as for the state key file, not a refusal).
enum ClientKeyPermissions {
    /// What the start should warn about; empty when every signing key file is private.
    static func check(_ providers: [ProviderConfig]) -> [String] {
        providers.compactMap { provider in
            guard let path = provider.clientAssertionSigner?.signingKey.source,
                  let mode = (try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? Int,
                  mode & 0o004 != 0
            else { return nil }
            return "the private key file \(path) of provider \(provider.id) can be read by other users (mode 0\(String(mode, radix: 8))): "
                + "make it 0400 or 0600 and owned by the broker's user"
        }
    }
}
