import BrokerCore
import Foundation
import Testing

struct ConfigLoaderTests {
    @Test func nilPathGivesEmbeddedDefaults() throws {
        let config = try ConfigLoader.load(path: nil, environment: [:])
        #expect(config.server.listen.host == "127.0.0.1" && config.server.listen.port == 8080)
        #expect(config.server.publicURL.absoluteString == "http://127.0.0.1:8080")
        #expect(config.server.publicURLIsDerived)
        #expect(config.server.callbackURL.absoluteString == "http://127.0.0.1:8080/callback")
        #expect(config.server.threads == ProcessInfo.processInfo.activeProcessorCount)
        #expect(config.server.shutdownGraceSeconds == 10)
        let limits = config.server.limits
        #expect(limits.maxBodyBytes == 65_536)
        #expect(limits.maxHeaderBytes == 8_192)
        #expect(limits.maxURLBytes == 4_096)
        #expect(limits.maxConnections == 1_024)
        #expect(limits.maxConnectionsPerIP == 128)
        #expect(limits.idleTimeoutSeconds == 30)
        #expect(limits.requestHeadTimeoutSeconds == 10)
        #expect(limits.requestBodyMinBytesPerSecond == 1_024)
        #expect(config.log == LogConfig(level: .info, format: .auto, access: true))
        #expect(config.providers.isEmpty)
        #expect(config.apps.isEmpty)
        #expect(config.server == BrokerConfig.defaults.server)
        #expect(config.log == BrokerConfig.defaults.log)
    }

    @Test func emptyOrCommentOnlyDocumentGivesDefaults() throws {
        for yaml in ["", "# nothing here\n", "server:\nlog:\nproviders:\napps:\n"] {
            let config = try loadConfig(yaml)
            #expect(config.server == BrokerConfig.defaults.server)
            #expect(config.log == BrokerConfig.defaults.log)
            #expect(config.providers.isEmpty && config.apps.isEmpty)
        }
    }

    @Test func fullConfigRoundTrip() throws {
        let secretFile = try TemporaryFile(contents: "file-secret\n")
        let yaml = """
            server:
              listen: "[::1]:9443"
              public_url: https://broker.example.com/auth
              threads: 3
              shutdown_grace_seconds: 2.5
              limits:
                max_body_bytes: 1048576
                max_header_bytes: 8192
                max_url_bytes: 4096
                max_connections: 500
                max_connections_per_ip: 20
                idle_timeout_seconds: 45
            log:
              level: warning
              format: json
              access: false
            providers:
              corp:
                issuer: https://login.example.com
                client_id: broker
                client_secret_env: CORP_CLIENT_SECRET
                scopes: [openid, email, profile]
                token_endpoint_auth_method: client_secret_post
                authorization_params: {access_type: offline, prompt: consent}
                allow_insecure_http: false
              github:
                authorization_endpoint: https://github.com/login/oauth/authorize
                token_endpoint: https://github.com/login/oauth/access_token
                revocation_endpoint: https://github.com/revoke
                userinfo_endpoint: https://api.github.com/user
                jwks_uri: https://github.com/jwks.json
                client_id: gh-client
                client_secret_file: \(secretFile.path)
                scopes: ["read:user", "user:email"]
              intranet:
                authorization_endpoint: http://sso.intranet/authorize
                token_endpoint: http://sso.intranet/token
                client_id: intra
                client_secret_env: INTRA_SECRET
                allow_insecure_http: true
            apps:
              zeta:
                redirect_uris: [myapp://oauth, https://app.example.com/cb, http://127.0.0.1/callback]
                providers: [corp]
              alpha:
                redirect_uris: [com.example.app:/oauth2redirect]
            """
        let config = try loadConfig(yaml, env: ["CORP_CLIENT_SECRET": "corp-secret", "INTRA_SECRET": "intra"])
        let server = config.server
        #expect(server.listen.host == "::1" && server.listen.port == 9443)
        #expect(server.publicURL.absoluteString == "https://broker.example.com/auth")
        #expect(!server.publicURLIsDerived)
        #expect(server.callbackURL.absoluteString == "https://broker.example.com/auth/callback")
        #expect(server.threads == 3)
        #expect(server.shutdownGraceSeconds == 2.5)
        #expect(server.limits == Limits(maxBodyBytes: 1_048_576, maxHeaderBytes: 8_192, maxURLBytes: 4_096,
                                        maxConnections: 500, maxConnectionsPerIP: 20, idleTimeoutSeconds: 45))
        #expect(config.log == LogConfig(level: .warning, format: .json, access: false))

        #expect(config.providers.map(\.id) == ["corp", "github", "intranet"])
        let corp = try #require(config.provider(id: "corp"))
        #expect(corp.endpoints == .discovery(issuer: try #require(URL(string: "https://login.example.com"))))
        #expect(corp.clientID == "broker")
        #expect(corp.clientSecret?.reveal() == "corp-secret")
        #expect(corp.clientSecret?.source == "env CORP_CLIENT_SECRET")
        #expect(corp.scopes == ["openid", "email", "profile"])
        #expect(corp.tokenEndpointAuthMethod == .clientSecretPost)
        #expect(corp.authorizationParameters == ["access_type": "offline", "prompt": "consent"])
        #expect(!corp.allowInsecureHTTP)

        let github = try #require(config.provider(id: "github"))
        guard case .explicit(let endpoints) = github.endpoints else {
            Issue.record("github should have explicit endpoints")
            return
        }
        #expect(endpoints.authorization.absoluteString == "https://github.com/login/oauth/authorize")
        #expect(endpoints.token.absoluteString == "https://github.com/login/oauth/access_token")
        #expect(endpoints.revocation?.absoluteString == "https://github.com/revoke")
        #expect(endpoints.userinfo?.absoluteString == "https://api.github.com/user")
        #expect(endpoints.jwks?.absoluteString == "https://github.com/jwks.json")
        #expect(github.clientID == "gh-client")
        #expect(github.clientSecret?.reveal() == "file-secret")
        #expect(github.clientSecret?.source == "file \(secretFile.path)")
        #expect(github.scopes == ["read:user", "user:email"])
        #expect(github.tokenEndpointAuthMethod == .clientSecretBasic)
        #expect(github.authorizationParameters.isEmpty)
        #expect(config.provider(id: "intranet")?.allowInsecureHTTP == true)
        #expect(config.provider(id: "missing") == nil)

        #expect(config.apps.map(\.id) == ["alpha", "zeta"])
        let zeta = try #require(config.app(id: "zeta"))
        #expect(zeta.redirectURIs.map(\.raw) == ["myapp://oauth", "https://app.example.com/cb", "http://127.0.0.1/callback"])
        #expect(zeta.redirectURIs.map(\.kind) == [.customScheme, .https, .loopback])
        #expect(zeta.providers == ["corp"])
        #expect(zeta.allows(provider: "corp") && !zeta.allows(provider: "github"))
        let alpha = try #require(config.app(id: "alpha"))
        #expect(alpha.providers == nil)
        #expect(alpha.allows(provider: "github"))
        #expect(config.app(id: "nobody") == nil)
    }

    @Test func loadsAFileByPath() throws {
        let file = try TemporaryFile(contents: "log:\n  level: debug\n")
        let config = try ConfigLoader.load(path: file.path, environment: [:])
        #expect(config.log.level == .debug)
    }

    @Test func missingFileIsAProblemNamingIt() {
        let path = "/nonexistent/broker-\(UUID().uuidString).yaml"
        do {
            _ = try ConfigLoader.load(path: path, environment: [:])
            Issue.record("expected a ConfigError")
        } catch {
            #expect(error.problems.count == 1)
            #expect(error.problems.first?.file == path)
            #expect(error.description.contains("does not exist"))
        }
    }

    @Test func exampleConfigLoadsWithItsEnvironmentVariablesSet() throws {
        let path = ExampleConfig.path
        let environment = try ExampleConfig.secretEnvironment(value: "example-secret")
        #expect(environment.count >= 2)
        let config = try ConfigLoader.load(path: path, environment: environment)
        #expect(!config.providers.isEmpty)
        #expect(!config.apps.isEmpty)
        for app in config.apps {
            for provider in app.providers ?? [] {
                #expect(config.provider(id: provider) != nil)
            }
        }
        // Without the variables, each missing one is named.
        let missing = problems(ofFileAt: path)
        #expect(missing.count == environment.count)
        #expect(missing.allSatisfy { $0.message.contains("is not set") })
    }
}
