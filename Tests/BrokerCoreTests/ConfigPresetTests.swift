import BrokerCore
import Foundation
import Testing

struct ConfigPresetTests {
    private let env = ["S": "x"]

    /// Loads one provider `p` with `body` (one setting a line) plus a client id and secret.
    private func provider(_ body: String) throws -> ProviderConfig {
        let config = try loadConfig(yaml(body), env: env)
        return try #require(config.provider(id: "p"))
    }

    private func yaml(_ body: String) -> String {
        let lines = (body + "\nclient_id: c\nclient_secret_env: S").split(separator: "\n").map { "    \($0)" }
        return "providers:\n  p:\n" + lines.joined(separator: "\n") + "\n"
    }

    private func url(_ text: String) throws -> URL {
        try #require(URL(string: text))
    }

    @Test func googleNeedsOnlyTheIDAndSecret() throws {
        let google = try provider("preset: google")
        #expect(google.preset == "google")
        #expect(google.endpoints == .discovery(issuer: try url("https://accounts.google.com")))
        #expect(google.userinfoEndpointOverride == nil)
        #expect(google.scopes == ["openid", "email", "profile"])
        #expect(google.tokenEndpointAuthMethod == .clientSecretPost)
        #expect(google.authorizationParameters == ["access_type": "offline", "prompt": "consent",
                                                   "include_granted_scopes": "true"])
        #expect(google.profileMapping == .openIDConnect)
        #expect(google.userinfoMethod == "GET" && google.scopeSeparator == " ")
    }

    @Test func githubGetsExplicitEndpointsAndItsMapping() throws {
        let github = try provider("preset: github")
        #expect(github.endpoints == .explicit(ExplicitEndpoints(
            authorization: try url("https://github.com/login/oauth/authorize"),
            token: try url("https://github.com/login/oauth/access_token"),
            userinfo: try url("https://api.github.com/user"))))
        #expect(github.scopes == ["read:user", "user:email"])
        #expect(github.profileMapping == ProviderPreset.github.profileMapping)
        #expect(github.scopeSeparator == ",")
        #expect(github.userinfoEndpoint(discovered: nil)?.absoluteString == "https://api.github.com/user")
        #expect(try provider("preset: dropbox").userinfoMethod == "POST")
    }

    @Test func explicitKeysOverrideThePreset() throws {
        let google = try provider("preset: google\nscopes: [openid, email]\ntoken_endpoint_auth_method: client_secret_basic\n"
            + "authorization_params:\n  prompt: select_account\n  hd: example.com")
        #expect(google.scopes == ["openid", "email"])
        #expect(google.tokenEndpointAuthMethod == .clientSecretBasic)
        #expect(google.authorizationParameters == ["access_type": "offline", "prompt": "select_account",
                                                   "include_granted_scopes": "true", "hd": "example.com"])

        let gitlab = try provider("preset: gitlab\nissuer: https://gitlab.example.com")
        #expect(gitlab.endpoints == .discovery(issuer: try url("https://gitlab.example.com")))
        #expect(gitlab.scopes == ["openid", "profile", "email"])

        let enterprise = try provider("preset: github\ntoken_endpoint: https://ghe.example.com/login/oauth/access_token")
        guard case .explicit(let endpoints) = enterprise.endpoints else {
            Issue.record("github stays explicit")
            return
        }
        #expect(endpoints.token.absoluteString == "https://ghe.example.com/login/oauth/access_token")
        #expect(endpoints.authorization.absoluteString == "https://github.com/login/oauth/authorize")
        #expect(endpoints.userinfo?.absoluteString == "https://api.github.com/user")
    }

    @Test func aDiscoveryPresetSwitchesToExplicitEndpointsWhenGivenThem() throws {
        let both = try provider("preset: gitlab\nauthorization_endpoint: https://a.example/auth\n"
            + "token_endpoint: https://a.example/token")
        #expect(both.endpoints == .explicit(ExplicitEndpoints(authorization: try url("https://a.example/auth"),
                                                              token: try url("https://a.example/token"))))
        #expect(both.scopes == ["openid", "profile", "email"], "the other preset values stay")
        expectProblem(problems(of: yaml("preset: gitlab\nauthorization_endpoint: https://a.example/auth"), env: env),
                      key: "providers.p.token_endpoint", contains: "required key is missing")
    }

    @Test func userinfoEndpointMayGoWithAnIssuer() throws {
        let slack = try provider("preset: slack\nuserinfo_endpoint: https://slack.example/userinfo")
        #expect(slack.endpoints.issuer?.absoluteString == "https://slack.com")
        #expect(slack.userinfoEndpointOverride?.absoluteString == "https://slack.example/userinfo")
        #expect(slack.userinfoEndpoint(discovered: try url("https://slack.com/api/openid.connect.userInfo"))
            == slack.userinfoEndpointOverride)
        let plain = try provider("issuer: https://login.example.com\nuserinfo_endpoint: https://api.example.com/me")
        #expect(plain.userinfoEndpointOverride?.absoluteString == "https://api.example.com/me")
        #expect(plain.preset == nil && plain.scopes == ["openid"])
        let none = try provider("issuer: https://login.example.com")
        #expect(none.userinfoEndpoint(discovered: try url("https://login.example.com/ui"))?.absoluteString
            == "https://login.example.com/ui")
        expectProblem(problems(of: yaml("issuer: https://l.example\nuserinfo_endpoint: http://10.0.0.1/me"), env: env),
                      key: "providers.p.userinfo_endpoint", contains: "plain http is only allowed")
    }

    @Test func unknownPresetListsTheKnownOnes() {
        let found = problems(of: yaml("preset: gogle"), env: env)
        expectProblem(found, key: "providers.p.preset", contains: "unknown preset \"gogle\" (did you mean google?)", line: 3)
        expectProblem(found, key: "providers.p.preset", contains: "known presets: " + ProviderPreset.names.joined(separator: ", "))
        #expect(found.count == 1, "no complaint about missing endpoints: \(found)")
        expectProblem(problems(of: yaml("preset: [google]"), env: env), key: "providers.p.preset",
                      contains: "expected a string, got a list")
    }

    @Test func microsoftTenantDefaultsToCommonAndIsSubstituted() throws {
        func token(_ provider: ProviderConfig) -> String? {
            guard case .explicit(let endpoints) = provider.endpoints else { return nil }
            return endpoints.token.absoluteString
        }
        let common = try provider("preset: microsoft")
        #expect(token(common) == "https://login.microsoftonline.com/common/oauth2/v2.0/token")
        #expect(common.scopes == ["openid", "profile", "email", "offline_access"])
        let contoso = try provider("preset: microsoft\ntenant: contoso.onmicrosoft.com")
        #expect(token(contoso) == "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token")
        guard case .explicit(let endpoints) = contoso.endpoints else { return }
        #expect(endpoints.authorization.absoluteString
            == "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/authorize")
        #expect(endpoints.jwks?.absoluteString
            == "https://login.microsoftonline.com/contoso.onmicrosoft.com/discovery/v2.0/keys")
        #expect(endpoints.userinfo?.absoluteString == "https://graph.microsoft.com/oidc/userinfo")
    }

    @Test func tenantMustBeValidAndBelongToAPreset() {
        let bad = problems(of: yaml("preset: microsoft\ntenant: a/b"), env: env)
        expectProblem(bad, key: "providers.p.tenant", contains: "invalid tenant \"a/b\": expected common, organizations")
        #expect(bad.count == 1)
        expectProblem(problems(of: yaml("preset: google\ntenant: common"), env: env), key: "providers.p.tenant",
                      contains: "is only used with a preset that has a tenant (microsoft)")
        expectProblem(problems(of: yaml("issuer: https://l.example\ntenant: common"), env: env),
                      key: "providers.p.tenant", contains: "is only used with a preset that has a tenant")
    }

    @Test func genericOIDCPresetsRequireTheIssuer() throws {
        for name in ["okta", "auth0", "keycloak", "oidc"] {
            let found = problems(of: yaml("preset: \(name)"), env: env)
            expectProblem(found, key: "providers.p.issuer", contains: "required key is missing: preset \(name) needs the issuer")
            #expect(found.count == 1)
        }
        let okta = try provider("preset: okta\nissuer: https://dev-123456.okta.com/oauth2/default")
        #expect(okta.endpoints.issuer?.absoluteString == "https://dev-123456.okta.com/oauth2/default")
        #expect(okta.scopes == ["openid", "email", "profile"])
        #expect(okta.tokenEndpointAuthMethod == .clientSecretBasic)
        #expect(try provider("preset: auth0\nissuer: https://dev-abc123.us.auth0.com/").tokenEndpointAuthMethod
            == .clientSecretPost)
    }

    @Test func withoutAPresetNothingChanges() throws {
        let plain = try provider("authorization_endpoint: https://a.example/auth\ntoken_endpoint: https://a.example/t")
        #expect(plain.preset == nil)
        #expect(plain.profileMapping == .openIDConnect)
        #expect(plain.userinfoMethod == "GET" && plain.scopeSeparator == " ")
        #expect(plain.scopes.isEmpty && plain.authorizationParameters.isEmpty)
        expectProblem(problems(of: yaml("scopes: [openid]"), env: env), key: "providers.p",
                      contains: "missing endpoints: set issuer (OIDC discovery) or authorization_endpoint and token_endpoint, or use a preset")
    }

    @Test func presetsStillNeedTheClientCredentials() {
        let found = problems(of: "providers:\n  g:\n    preset: google\n")
        expectProblem(found, key: "providers.g.client_id", contains: "required key is missing")
        expectProblem(found, key: "providers.g.client_secret_env", contains: "required key is missing")
        #expect(found.count == 2)
    }

    @Test func theExampleFileUsesPresets() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("config/example.yaml").path
        let config = try ConfigLoader.load(path: path, environment: [
            "GOOGLE_CLIENT_SECRET": "g", "GITHUB_CLIENT_SECRET": "h", "CORP_CLIENT_SECRET": "c",
        ])
        let google = try #require(config.provider(id: "google"))
        #expect(google.preset == "google" && google.authorizationParameters["access_type"] == "offline")
        let github = try #require(config.provider(id: "github"))
        #expect(github.preset == "github" && github.scopes == ["read:user", "user:email", "read:org"])
        #expect(config.provider(id: "corp")?.preset == nil)
    }
}
