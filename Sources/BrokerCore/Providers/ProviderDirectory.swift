import Foundation

/// Every configured provider, resolved on demand. Providers with explicit endpoints are ready at
/// once; providers by `issuer` are ready once their discovery document is cached, and are
/// resolved through a network call before that.
struct ProviderDirectory: Sendable {
    private let configs: [String: ProviderConfig]
    let discovery: DiscoveryCache

    init(providers: [ProviderConfig], discovery: DiscoveryCache) {
        configs = Dictionary(uniqueKeysWithValues: providers.map { ($0.id, $0) })
        self.discovery = discovery
    }

    func config(_ id: String) -> ProviderConfig? { configs[id] }

    /// The provider, if it can be had without a network call.
    func ready(_ id: String) -> Provider? {
        guard let config = configs[id] else { return nil }
        switch config.endpoints {
        case .explicit(let endpoints):
            return Provider(config: config, explicit: endpoints)
        case .discovery(let issuer):
            return discovery.cached(issuer).map { Provider(config: config, discovered: $0) }
        }
    }

    /// The provider, fetching its discovery document when needed.
    func resolve(_ id: String) async throws(ProviderLookupError) -> Provider {
        if let ready = ready(id) { return ready }
        guard let config = configs[id], case .discovery(let issuer) = config.endpoints else {
            throw .unknown
        }
        do {
            return Provider(config: config, discovered: try await discovery.document(for: issuer))
        } catch {
            throw .discoveryFailed
        }
    }
}
