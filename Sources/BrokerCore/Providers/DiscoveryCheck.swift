/// `check-config --discovery`: each provider configured by `issuer`, against its discovery
/// document as the broker would fetch it.
public enum DiscoveryCheck {
    /// One line per problem, `providers.<id>: ...`: a document that cannot be fetched, or one
    /// that lacks what the provider's configuration relies on (``ProviderRequirements``). Empty
    /// when every document was fetched and offers it all.
    public static func problems(_ config: BrokerConfig) async -> [String] {
        let discovery = DiscoveryCache(client: UpstreamClient(limits: config.server.limits.upstream))
        var lines: [String] = []
        for provider in config.providers {
            guard let issuer = provider.endpoints.issuer else { continue }
            do throws(DiscoveryError) {
                let document = try await discovery.document(for: issuer)
                lines += ProviderRequirements.problems(provider, document).map { "providers.\(provider.id): \($0)" }
            } catch {
                lines.append("providers.\(provider.id): \(error.description)")
            }
        }
        return lines
    }
}
