import Foundation
import WireValues

extension BrokerConfig {
    /// The issuer of provider `provider`'s authorization server: `<public_url>/providers/{provider}`.
    func issuer(of provider: String) -> String {
        server.publicURL.appendingPathComponent("providers").appendingPathComponent(provider).absoluteString
    }

    /// RFC 8414 metadata of provider `provider`'s authorization server: public clients, PKCE
    /// with S256, the authorization-code, refresh-token and device (RFC 8628) grants, RFC 9207's
    /// `iss`, DPoP (RFC 9449) and the introspection endpoint (RFC 7662) when resource servers are
    /// configured; `grantTypes`, those its token endpoint offers.
    func authorizationServerMetadata(of provider: String, grantTypes: [String]) -> JSONValue {
        let issuer = issuer(of: provider)
        let strings = { (values: [String]) in JSONValue.array(values.map(JSONValue.string)) }
        // RFC 7662's endpoint, for the resource servers configured (one for every provider).
        let signing = resourceServers.contains { if case .keys = $0.credential { true } else { false } }
        let introspection: [(String, JSONValue)] = resourceServers.isEmpty ? [] : [
            ("introspection_endpoint", .string(server.publicURL.appendingPathComponent("introspect").absoluteString)),
            ("introspection_endpoint_auth_methods_supported",
             strings(["client_secret_basic", "client_secret_post"] + (signing ? ["private_key_jwt"] : []))),
        ] + (signing ? [("introspection_endpoint_auth_signing_alg_values_supported", strings(DPoPProof.algorithms))] : [])
        return .object([
            ("issuer", .string(issuer)),
            ("authorization_endpoint", .string(issuer + "/authorize")),
            ("token_endpoint", .string(issuer + "/token")),
            ("revocation_endpoint", .string(issuer + "/revoke")),
            ("device_authorization_endpoint", .string(issuer + "/device_authorization")),
            ("response_types_supported", strings(["code"])),
            ("response_modes_supported", strings(["query"])),
            ("grant_types_supported", strings(grantTypes)),
            ("code_challenge_methods_supported", strings(["S256"])),
            ("token_endpoint_auth_methods_supported", strings(["none"])),
            ("revocation_endpoint_auth_methods_supported", strings(["none"])),
            ("scopes_supported", strings(self.provider(id: provider)?.scopes ?? [])),
            ("authorization_response_iss_parameter_supported", .bool(true)),
            ("dpop_signing_alg_values_supported", strings(DPoPProof.algorithms)),
        ] + introspection)
    }
}
