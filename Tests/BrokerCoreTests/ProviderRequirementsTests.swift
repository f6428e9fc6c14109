import Foundation
import Testing

@testable import BrokerCore

/// What a discovery document says about PAR, RFC 9207's `iss` and client authentication, and
/// what a provider's configuration needs from it.
struct ProviderRequirementsTests {
    static let issuer = URL(string: "https://idp.example")!

    static func document(_ extra: String = "") throws -> DiscoveryDocument {
        let body = #"{"issuer":"https://idp.example","authorization_endpoint":"https://idp.example/a","token_endpoint":"https://idp.example/t""#
            + extra + "}"
        return try DiscoveryCache.parse(Array(body.utf8), expectedIssuer: issuer)
    }

    static func config(method: TokenEndpointAuthMethod = .clientSecretBasic, par: PushedAuthorizationMode = .auto,
                       dpop: ProviderDPoPMode = .auto) throws -> ProviderConfig {
        let authentication: ClientAuthentication = switch method {
        case .privateKeyJWT: .privateKeyJWT(try ClientAssertionTests.signer("ec-pkcs8.pem"))
        case .clientSecretPost: .clientSecretPost(Secret("s", source: "test"))
        case .clientSecretBasic: .clientSecretBasic(Secret("s", source: "test"))
        }
        return ProviderConfig(id: "idp", endpoints: .discovery(issuer: issuer), clientID: "c", clientAuthentication: authentication,
                              pushedAuthorization: par, dpop: dpop)
    }

    @Test func dpopGoesByTheDocumentsAlgorithmsUnlessRequiredOrOff() throws {
        let es256 = try Self.document(#","dpop_signing_alg_values_supported":["RS256","ES256"]"#)
        let rsaOnly = try Self.document(#","dpop_signing_alg_values_supported":["RS256"]"#)
        let silent = try Self.document()
        #expect(es256.dpopSigningAlgorithms == ["RS256", "ES256"] && silent.dpopSigningAlgorithms == nil)
        #expect(Provider(config: try Self.config(), discovered: es256).sendsProofs)
        #expect(!Provider(config: try Self.config(), discovered: rsaOnly).sendsProofs)
        #expect(!Provider(config: try Self.config(), discovered: silent).sendsProofs)
        #expect(!Provider(config: try Self.config(dpop: .off), discovered: es256).sendsProofs)
        #expect(Provider(config: try Self.config(dpop: .required), discovered: silent).sendsProofs)
        #expect(Provider(config: try Self.config(dpop: .required), discovered: silent).problems.isEmpty)
        let refused = ProviderRequirements.problems(try Self.config(dpop: .required), rsaOnly)
        #expect(refused.count == 1 && refused[0].contains("ES256"))
        #expect(ProviderRequirements.problems(try Self.config(dpop: .auto), rsaOnly).isEmpty)
    }

    @Test func theDocumentsNewFieldsAreRead() throws {
        let bare = try Self.document()
        #expect(bare.pushedAuthorizationRequestEndpoint == nil && !bare.requiresPushedAuthorizationRequests)
        #expect(!bare.issuerInAuthorizationResponse && bare.tokenEndpointAuthMethods == ["client_secret_basic"])
        let full = try Self.document(#","pushed_authorization_request_endpoint":"https://idp.example/par","#
            + #""require_pushed_authorization_requests":true,"authorization_response_iss_parameter_supported":true,"#
            + #""token_endpoint_auth_methods_supported":["private_key_jwt"]"#)
        #expect(full.pushedAuthorizationRequestEndpoint?.absoluteString == "https://idp.example/par")
        #expect(full.requiresPushedAuthorizationRequests && full.issuerInAuthorizationResponse)
        #expect(full.tokenEndpointAuthMethods == ["private_key_jwt"])
        #expect(throws: DiscoveryError.self) { try Self.document(#","pushed_authorization_request_endpoint":"/par""#) }
    }

    @Test func privateKeyJWTMustBeListed() throws {
        let listed = try Self.document(#","token_endpoint_auth_methods_supported":["client_secret_basic","private_key_jwt"]"#)
        #expect(ProviderRequirements.problems(try Self.config(method: .privateKeyJWT), listed).isEmpty)
        let unlisted = try Self.document(#","token_endpoint_auth_methods_supported":["client_secret_basic","client_secret_post"]"#)
        let problems = ProviderRequirements.problems(try Self.config(method: .privateKeyJWT), unlisted)
        #expect(problems.count == 1 && problems[0].contains("does not list it in token_endpoint_auth_methods_supported "
            + "(it lists client_secret_basic, client_secret_post)"))
        // Absent means client_secret_basic alone (RFC 8414 §2).
        #expect(ProviderRequirements.problems(try Self.config(method: .privateKeyJWT), try Self.document()).count == 1)
        // Secret methods are not checked.
        #expect(ProviderRequirements.problems(try Self.config(method: .clientSecretPost), unlisted).isEmpty)
    }

    @Test(arguments: [
        (PushedAuthorizationMode.auto, "", nil, false),
        (.auto, #","pushed_authorization_request_endpoint":"https://idp.example/par""#, "https://idp.example/par", false),
        (.auto, #","require_pushed_authorization_requests":true"#, nil, true),
        (.required, "", nil, true),
        (.required, #","pushed_authorization_request_endpoint":"https://idp.example/par""#, "https://idp.example/par", false),
        (.off, #","pushed_authorization_request_endpoint":"https://idp.example/par""#, nil, false),
        (.off, #","pushed_authorization_request_endpoint":"https://idp.example/par","require_pushed_authorization_requests":true"#, nil, true),
    ])
    func parUsesTheEndpointWhenItShould(_ mode: PushedAuthorizationMode, _ extra: String, _ endpoint: String?, _ problem: Bool) throws {
        let config = try Self.config(par: mode)
        let document = try Self.document(extra)
        #expect(ProviderRequirements.pushedAuthorizationEndpoint(config, document)?.absoluteString == endpoint)
        #expect(ProviderRequirements.problems(config, document).isEmpty == !problem)
        let provider = Provider(config: config, discovered: document)
        #expect(provider.pushedAuthorizationEndpoint?.absoluteString == endpoint && provider.problems.isEmpty == !problem)
    }
}
