import BrokerCrypto
import Foundation
import Testing

@testable import BrokerCore

/// `token_endpoint_auth_method: private_key_jwt` with its keys, and `par`, in the configuration.
struct ConfigClientAuthenticationTests {
    static func keyPath(_ name: String) throws -> String {
        let file = try #require(
            Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Resources/client-keys")
                ?? Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "client-keys")
        )
        return file.path
    }

    /// A provider `corp` by issuer (or, with `explicit`, by endpoints) with `body` added.
    private func yaml(_ body: String, explicit: Bool = false) -> String {
        let endpoints = explicit ? "    authorization_endpoint: https://a.example/auth\n    token_endpoint: https://a.example/token\n"
            : "    issuer: https://login.example.com\n"
        let lines = body.split(separator: "\n").map { "    \($0)" }.joined(separator: "\n")
        return "providers:\n  corp:\n" + endpoints + "    client_id: broker\n" + lines + "\n"
    }

    private func keyJWT(_ key: String = "rsa-pkcs8.pem", _ extra: String = "") throws -> String {
        "token_endpoint_auth_method: private_key_jwt\nprivate_key_file: \(try Self.keyPath(key))\n" + extra
    }

    @Test func privateKeyJWTTakesAKeyFileAndNoSecret() throws {
        let config = try loadConfig(yaml(try keyJWT("ec-sec1.pem", "second_key_file: \(try Self.keyPath("rsa-public.pem"))")))
        let corp = try #require(config.provider(id: "corp"))
        #expect(corp.tokenEndpointAuthMethod == .privateKeyJWT && corp.clientSecret == nil)
        let signer = try #require(corp.clientAssertionSigner)
        #expect(signer.algorithm == .es256 && signer.audience == .issuer)
        #expect(signer.signingKey.keyID == (try ClientAssertionTests.key("ec-pkcs8.pem").keyID))
        #expect(signer.secondKey?.keyID == (try ClientAssertionTests.key("rsa-pkcs8.pem").keyID))
        #expect(corp.pushedAuthorization == .auto)
        #expect(config.server.clientKeysURL(of: "corp").absoluteString == "http://127.0.0.1:8080/providers/corp/client-jwks")
    }

    @Test func theAlgorithmAndAudienceCanBeChosen() throws {
        let chosen = try loadConfig(yaml(try keyJWT("rsa-pkcs1.pem", "token_endpoint_auth_signing_alg: PS256\nclient_assertion_audience: endpoint")))
        let signer = try #require(chosen.provider(id: "corp")?.clientAssertionSigner)
        #expect(signer.algorithm == .ps256 && signer.audience == .endpoint)
        // Explicit endpoints have no issuer: their assertions name the endpoint.
        let explicit = try loadConfig(yaml(try keyJWT(), explicit: true))
        #expect(explicit.provider(id: "corp")?.clientAssertionSigner?.audience == .endpoint)
    }

    @Test func privateKeyJWTProblems() throws {
        let missing = problems(of: yaml("token_endpoint_auth_method: private_key_jwt"))
        expectProblem(missing, key: "providers.corp.private_key_file", contains: "required key is missing: private_key_jwt signs with")
        let withSecret = problems(of: yaml(try keyJWT() + "client_secret_env: CORP_SECRET"), env: ["CORP_SECRET": "x"])
        expectProblem(withSecret, key: "providers.corp.client_secret_env", contains: "is not used with private_key_jwt")
        let absent = problems(of: yaml("token_endpoint_auth_method: private_key_jwt\nprivate_key_file: /nonexistent/key.pem"))
        expectProblem(absent, key: "providers.corp.private_key_file", contains: "cannot read key file /nonexistent/key.pem: it does not exist")
        let publicKey = problems(of: yaml(try keyJWT("rsa-public.pem")))
        expectProblem(publicKey, key: "providers.corp.private_key_file", contains: "is not a PEM private key of a supported kind")
        let small = problems(of: yaml(try keyJWT("rsa-1024.pem")))
        expectProblem(small, key: "providers.corp.private_key_file", contains: "RSA of 2048 bits or more, or EC P-256")
        let mismatch = problems(of: yaml(try keyJWT("rsa-pkcs8.pem", "token_endpoint_auth_signing_alg: ES256")))
        expectProblem(mismatch, key: "providers.corp.token_endpoint_auth_signing_alg", contains: "ES256 does not go with an RSA key")
        let unknown = problems(of: yaml(try keyJWT("rsa-pkcs8.pem", "token_endpoint_auth_signing_alg: HS256")))
        expectProblem(unknown, key: "providers.corp.token_endpoint_auth_signing_alg", contains: "expected one of RS256, PS256, ES256")
        let same = problems(of: yaml(try keyJWT("rsa-pkcs8.pem", "second_key_file: \(try Self.keyPath("rsa-pkcs1.pem"))")))
        expectProblem(same, key: "providers.corp.second_key_file", contains: "holds the same key as private_key_file")
        let issuerless = problems(of: yaml(try keyJWT("rsa-pkcs8.pem", "client_assertion_audience: issuer"), explicit: true))
        expectProblem(issuerless, key: "providers.corp.client_assertion_audience", contains: "issuer needs a provider configured by issuer")
        let audience = problems(of: yaml(try keyJWT("rsa-pkcs8.pem", "client_assertion_audience: token")))
        expectProblem(audience, key: "providers.corp.client_assertion_audience", contains: "expected one of issuer, endpoint")
        for found in [missing, withSecret, absent, publicKey, small, mismatch, unknown, same, issuerless, audience] {
            #expect(found.count == 1, "\(ConfigError(problems: found))")
        }
    }

    @Test func keyKeysNeedPrivateKeyJWT() throws {
        let found = problems(of: yaml("client_secret_env: CORP_SECRET\nprivate_key_file: \(try Self.keyPath("rsa-pkcs8.pem"))\n"
            + "client_assertion_audience: issuer"), env: ["CORP_SECRET": "x"])
        expectProblem(found, key: "providers.corp.private_key_file", contains: "is used only with token_endpoint_auth_method: private_key_jwt")
        expectProblem(found, key: "providers.corp.client_assertion_audience", contains: "is used only with")
        #expect(found.count == 2)
    }

    @Test func parIsAutoRequiredOrOff() throws {
        let secret = "client_secret_env: CORP_SECRET"
        for mode in PushedAuthorizationMode.allCases {
            let config = try loadConfig(yaml("\(secret)\npar: \(mode.rawValue)"), env: ["CORP_SECRET": "x"])
            #expect(config.provider(id: "corp")?.pushedAuthorization == mode)
        }
        let wrong = problems(of: yaml("\(secret)\npar: always"), env: ["CORP_SECRET": "x"])
        expectProblem(wrong, key: "providers.corp.par", contains: "expected one of auto, required, off")
        let explicit = problems(of: yaml("\(secret)\npar: required", explicit: true), env: ["CORP_SECRET": "x"])
        expectProblem(explicit, key: "providers.corp.par", contains: "required needs a provider configured by issuer")
        // Negative control: auto with explicit endpoints is fine (there is simply no PAR endpoint).
        #expect(problems(of: yaml("\(secret)\npar: auto", explicit: true), env: ["CORP_SECRET": "x"]).isEmpty)
    }

    @Test func dpopIsAutoRequiredOrOffAndAutoByDefault() throws {
        let secret = "client_secret_env: CORP_SECRET"
        for mode in ProviderDPoPMode.allCases {
            let config = try loadConfig(yaml("\(secret)\ndpop: \(mode.rawValue)", explicit: true), env: ["CORP_SECRET": "x"])
            #expect(config.provider(id: "corp")?.dpop == mode)
        }
        #expect(try loadConfig(yaml(secret), env: ["CORP_SECRET": "x"]).provider(id: "corp")?.dpop == .auto)
        let wrong = problems(of: yaml("\(secret)\ndpop: yes"), env: ["CORP_SECRET": "x"])
        expectProblem(wrong, key: "providers.corp.dpop", contains: "expected one of auto, required, off")
    }
}
