public import Foundation

extension BrokerConfig {
    /// Where each OpenID Connect provider (one found by discovery) sends its back-channel logout
    /// tokens: `<public_url>/providers/{provider}/backchannel_logout`, to register at the
    /// provider as the client's `backchannel_logout_uri`. `check-config` prints them.
    public var backChannelLogoutURLs: [(provider: String, url: URL)] {
        providers.compactMap { provider in
            guard provider.endpoints.issuer != nil else { return nil }
            return (provider.id, server.publicURL.appendingPathComponent("providers/\(provider.id)/backchannel_logout"))
        }
    }
}
