import Foundation

/// What a provider's configuration relies on that its discovery document must offer. A provider
/// with problems stops `serve` when its document is fetched at start (``DiscoveryCheck``), else
/// starts no login (``LoginFlow/begin(_:at:state:)``) and fails `/readyz`; `check-config
/// --discovery` reports it; sessions it already has go on being refreshed.
enum ProviderRequirements {
    /// Each thing the document lacks, in a sentence for an operator; empty when it has them all.
    static func problems(_ config: ProviderConfig, _ document: DiscoveryDocument) -> [String] {
        var problems: [String] = []
        // Only private_key_jwt is checked: providers that leave client_secret_post out of the
        // list often take it all the same, and brokers configured so work today.
        if config.tokenEndpointAuthMethod == .privateKeyJWT, !document.tokenEndpointAuthMethods.contains("private_key_jwt") {
            problems.append("token_endpoint_auth_method is private_key_jwt, but the provider's discovery document does not list "
                + "it in token_endpoint_auth_methods_supported (it lists \(document.tokenEndpointAuthMethods.joined(separator: ", "))): "
                + "enable private_key_jwt for this client at the provider, or use a client secret")
        }
        let endpoint = document.pushedAuthorizationRequestEndpoint
        switch config.pushedAuthorization {
        case .required where endpoint == nil:
            problems.append("par is required, but the provider's discovery document has no pushed_authorization_request_endpoint")
        case .off where document.requiresPushedAuthorizationRequests:
            problems.append("par is off, but the provider requires pushed authorization requests (require_pushed_authorization_requests): "
                + "set par to auto or required")
        case .auto where document.requiresPushedAuthorizationRequests && endpoint == nil:
            problems.append("the provider requires pushed authorization requests, but its discovery document has no "
                + "pushed_authorization_request_endpoint")
        default:
            break
        }
        if config.dpop == .required, let algorithms = document.dpopSigningAlgorithms, !algorithms.contains("ES256") {
            problems.append("dpop is required, but the provider's discovery document lists only "
                + "\(algorithms.joined(separator: ", ")) in dpop_signing_alg_values_supported, and the broker signs its proofs with ES256")
        }
        return problems
    }

    /// Whether the broker binds the provider's tokens with DPoP: `required`, or `auto` when the
    /// document lists ES256 (the one algorithm the broker signs proofs with).
    static func sendsProofs(_ config: ProviderConfig, _ document: DiscoveryDocument) -> Bool {
        switch config.dpop {
        case .required: true
        case .auto: document.dpopSigningAlgorithms?.contains("ES256") ?? false
        case .off: false
        }
    }

    /// The endpoint authorization requests are pushed to, or nil when they go by the browser.
    static func pushedAuthorizationEndpoint(_ config: ProviderConfig, _ document: DiscoveryDocument) -> URL? {
        config.pushedAuthorization == .off ? nil : document.pushedAuthorizationRequestEndpoint
    }
}
