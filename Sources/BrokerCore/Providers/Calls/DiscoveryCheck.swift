import APIClient

/// Providers against their discovery documents: all of them for `check-config --discovery`; at
/// `serve`, those whose configuration rests on the document.
public enum DiscoveryCheck {
    /// One line per problem, `providers.<id>: ...`: a document that cannot be fetched, or one
    /// that lacks what the provider's configuration relies on (``ProviderRequirements``). Empty
    /// when every document was fetched and offers it all.
    public static func problems(_ config: BrokerConfig) async -> [String] {
        let trust: ProviderTrust
        do throws(CertificateAuthoritiesError) {
            trust = try ProviderTrust(config.providers)
        } catch {
            return ["providers: \(error.description)"]
        }
        guard let client = UpstreamClient(limits: config.server.limits.upstream, origins: trust.origins) else {
            return ["libcurl could not set up the HTTP client"]
        }
        let discovery = DiscoveryCache(client: client)
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

    /// At `serve`: the providers configured by `issuer` whose configuration rests on the document
    /// (`private_key_jwt`, `par: required`), each document fetched now (and so cached), and what
    /// the fetched ones lack, as `providers.<id>: ...` lines. A document that cannot be fetched
    /// yet does not stop the start (`/readyz` says so until it can): its provider is in
    /// `unfetched`, with why.
    static func atStart(_ providers: [ProviderConfig], discovery: DiscoveryCache) async -> (problems: [String], unfetched: [String]) {
        let relying = providers.filter { $0.tokenEndpointAuthMethod == .privateKeyJWT || $0.pushedAuthorization == .required }
        return await withTaskGroup(of: (problems: [String], unfetched: String?).self) { group in
            for provider in relying {
                guard let issuer = provider.endpoints.issuer else { continue }
                group.addTask {
                    do throws(DiscoveryError) {
                        let document = try await discovery.document(for: issuer)
                        return (ProviderRequirements.problems(provider, document).map { "providers.\(provider.id): \($0)" }, nil)
                    } catch {
                        return ([], "providers.\(provider.id): \(error.description)")
                    }
                }
            }
            var result: (problems: [String], unfetched: [String]) = ([], [])
            for await outcome in group {
                result.problems += outcome.problems
                if let unfetched = outcome.unfetched { result.unfetched.append(unfetched) }
            }
            result.problems.sort()
            return result
        }
    }
}
