import Foundation

/// The private keys the broker signs client assertions with are for its user alone. A key file
/// other users can read is reported at start (a container runtime often mounts secrets 0444 in
/// a container with no other user: a warning, as for the state key file, not a refusal).
enum ClientKeyPermissions {
    /// What the start should warn about; empty when every private key file is private: the
    /// signing key's, and a rotation's second key when it is a private one (the next key).
    static func check(_ providers: [ProviderConfig]) -> [String] {
        providers.flatMap { provider -> [String] in
            guard let signer = provider.clientAssertionSigner else { return [] }
            let keys = [signer.signingKey] + (signer.secondKey.map { $0.isPrivate ? [$0] : [] } ?? [])
            return keys.compactMap { FilePermissions.othersCanRead($0.source, name: "the private key file \($0.source) of provider \(provider.id)") }
        }
    }
}
