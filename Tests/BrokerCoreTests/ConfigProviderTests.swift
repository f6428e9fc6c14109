import BrokerCore
import Foundation
import Testing

struct ConfigProviderTests {
    /// A provider entry `corp` with `body` as its settings (indented by the caller's lines).
    private func providerProblems(_ body: String, env: [String: String] = ["CORP_SECRET": "x"]) -> [ConfigProblem] {
        let indented = body.split(separator: "\n", omittingEmptySubsequences: false).map { "    \($0)" }
        return problems(of: "providers:\n  corp:\n" + indented.joined(separator: "\n") + "\n", env: env)
    }

    private let secretAndID = "client_id: broker\nclient_secret_env: CORP_SECRET"

    @Test func discoveryDefaultsToTheOpenIDScopeAndBasicAuth() throws {
        let config = try loadConfig("providers:\n  corp:\n    issuer: https://login.example.com/tenant/v2.0\n"
            + "    client_id: broker\n    client_secret_env: CORP_SECRET\n", env: ["CORP_SECRET": "x"])
        let corp = try #require(config.provider(id: "corp"))
        #expect(corp.endpoints.issuer?.absoluteString == "https://login.example.com/tenant/v2.0")
        #expect(corp.scopes == ["openid"])
        #expect(corp.tokenEndpointAuthMethod == .clientSecretBasic)
        #expect(corp.authorizationParameters.isEmpty)
    }

    @Test func explicitEndpointsDefaultToNoScopes() throws {
        let config = try loadConfig("providers:\n  gh:\n    authorization_endpoint: https://a.example/auth\n"
            + "    token_endpoint: https://a.example/token\n    client_id: c\n    client_secret_env: S\n", env: ["S": "x"])
        let gh = try #require(config.provider(id: "gh"))
        #expect(gh.scopes.isEmpty)
        #expect(gh.endpoints.issuer == nil)
    }

    @Test func endpointStylesAreExclusiveAndRequired() {
        let both = providerProblems("issuer: https://login.example.com\ntoken_endpoint: https://login.example.com/t\n" + secretAndID)
        expectProblem(both, key: "providers.corp.token_endpoint", contains: "use either issuer (OIDC discovery) or explicit endpoints")
        let neither = providerProblems(secretAndID)
        expectProblem(neither, key: "providers.corp", contains: "missing endpoints: set issuer", line: 2)
        let halfway = providerProblems("authorization_endpoint: https://a.example/auth\n" + secretAndID)
        expectProblem(halfway, key: "providers.corp.token_endpoint", contains: "required key is missing")
        #expect(halfway.count == 1)
    }

    @Test func endpointURLRules() {
        let cases: [(String, String, String)] = [
            ("issuer: http://login.example.com", "providers.corp.issuer", "plain http is only allowed for loopback hosts"),
            ("issuer: https://login.example.com?tenant=1", "providers.corp.issuer", "must not contain a query"),
            ("issuer: https://login.example.com#x", "providers.corp.issuer", "must not contain a fragment"),
            ("issuer: /relative/path", "providers.corp.issuer", "expected an absolute URL"),
            ("issuer: ftp://login.example.com", "providers.corp.issuer", "the scheme must be https"),
            ("issuer: https://user:pw@login.example.com", "providers.corp.issuer", "must not contain user information"),
            ("authorization_endpoint: https://a.example/auth#frag\ntoken_endpoint: https://a.example/t",
             "providers.corp.authorization_endpoint", "must not contain a fragment"),
            ("authorization_endpoint: https://a.example/auth\ntoken_endpoint: http://10.0.0.5/token",
             "providers.corp.token_endpoint", "use https or set allow_insecure_http: true"),
            ("authorization_endpoint: https://a.example/auth\ntoken_endpoint: https://a.example/t\njwks_uri: mailto:x@y",
             "providers.corp.jwks_uri", "must have a host"),
        ]
        for (body, key, message) in cases {
            expectProblem(providerProblems(body + "\n" + secretAndID), key: key, contains: message)
        }
    }

    @Test func plainHTTPIsFineOnLoopbackOrWhenAllowed() throws {
        for body in ["issuer: http://127.0.0.1:9000/realms/test", "issuer: http://localhost:9000",
                     "issuer: http://[::1]:9000", "issuer: http://127.5.5.5",
                     "issuer: http://idp.internal\nallow_insecure_http: true"] {
            #expect(providerProblems(body + "\n" + secretAndID).isEmpty, "\(body)")
        }
        let config = try loadConfig("providers:\n  corp:\n    authorization_endpoint: https://a.example/auth?tenant=x\n"
            + "    token_endpoint: https://a.example/t\n    client_id: c\n    client_secret_env: S\n", env: ["S": "x"])
        #expect(config.providers.count == 1, "a query is allowed on endpoints other than the issuer")
    }

    @Test func clientIDIsRequiredAndNonEmpty() {
        expectProblem(providerProblems("issuer: https://l.example\nclient_secret_env: CORP_SECRET"),
                      key: "providers.corp.client_id", contains: "required key is missing", line: 2)
        expectProblem(providerProblems("issuer: https://l.example\nclient_id: \"\"\nclient_secret_env: CORP_SECRET"),
                      key: "providers.corp.client_id", contains: "must not be empty")
        expectProblem(providerProblems("issuer: https://l.example\nclient_id: [a]\nclient_secret_env: CORP_SECRET"),
                      key: "providers.corp.client_id", contains: "expected a string, got a list")
    }

    @Test func numericClientIDIsTakenAsText() throws {
        let config = try loadConfig("providers:\n  corp:\n    issuer: https://l.example\n    client_id: 12345\n"
            + "    client_secret_env: S\n", env: ["S": "x"])
        #expect(config.provider(id: "corp")?.clientID == "12345")
    }

    @Test func secretsOnlyByReference() {
        let inline = providerProblems("issuer: https://l.example\nclient_id: c\nclient_secret: hunter2")
        expectProblem(inline, key: "providers.corp.client_secret",
                      contains: "inline secrets are not allowed; use client_secret_env", line: 5)
        #expect(inline.count == 1, "no second complaint about the missing reference")
        #expect(!ConfigError(problems: inline).description.contains("hunter2"))

        let both = providerProblems("issuer: https://l.example\nclient_id: c\nclient_secret_env: CORP_SECRET\n"
            + "client_secret_file: /run/secrets/x")
        expectProblem(both, key: "providers.corp.client_secret_file", contains: "set only one of client_secret_env and client_secret_file")

        let neither = providerProblems("issuer: https://l.example\nclient_id: c")
        expectProblem(neither, key: "providers.corp.client_secret_env", contains: "required key is missing")

        let badName = providerProblems("issuer: https://l.example\nclient_id: c\nclient_secret_env: not-a-name!")
        expectProblem(badName, key: "providers.corp.client_secret_env", contains: "is not a valid environment variable name")
        #expect(!ConfigError(problems: badName).description.contains("not-a-name!"))
    }

    @Test func environmentSecretMustBeSetAndNonEmpty() {
        let unset = providerProblems("issuer: https://l.example\nclient_id: c\nclient_secret_env: CORP_SECRET", env: [:])
        expectProblem(unset, key: "providers.corp.client_secret_env",
                      contains: "environment variable CORP_SECRET is not set", line: 5)
        #expect(unset.first?.file == "test.yaml")
        let empty = providerProblems("issuer: https://l.example\nclient_id: c\nclient_secret_env: CORP_SECRET",
                                     env: ["CORP_SECRET": ""])
        expectProblem(empty, key: "providers.corp.client_secret_env", contains: "environment variable CORP_SECRET is empty")
    }

    /// The secret itself written where its variable's name belongs reads as a name no variable
    /// has: the message must not print it.
    @Test(arguments: ["gho_16C7e42F292c6912E7710c838347Ae178B4a", "JBSWY3DPEHPK3PXPJBSWY3DP", "xoxb2Zq9sWqLk"])
    func aSecretPastedAsAVariableNameIsNotPrinted(_ secret: String) {
        let problems = providerProblems("issuer: https://l.example\nclient_id: c\nclient_secret_env: \(secret)", env: [:])
        expectProblem(problems, key: "providers.corp.client_secret_env", contains: "is not set", line: 5)
        #expect(!ConfigError(problems: problems).description.contains(secret))
    }

    @Test func scopesAreAListOfValidTokens() {
        let scalar = providerProblems("issuer: https://l.example\nscopes: openid email\n" + secretAndID)
        expectProblem(scalar, key: "providers.corp.scopes", contains: "expected a list, got \"openid email\"")
        let spaced = providerProblems("issuer: https://l.example\nscopes: [openid, \"email profile\"]\n" + secretAndID)
        expectProblem(spaced, key: "providers.corp.scopes[1]", contains: "invalid scope \"email profile\"")
        let twice = providerProblems("issuer: https://l.example\nscopes: [openid, openid]\n" + secretAndID)
        expectProblem(twice, key: "providers.corp.scopes[1]", contains: "duplicate scope")
    }

    @Test func authMethodMustBeKnown() {
        let found = providerProblems("issuer: https://l.example\ntoken_endpoint_auth_method: client_secret_jwt\n" + secretAndID)
        expectProblem(found, key: "providers.corp.token_endpoint_auth_method",
                      contains: "expected one of client_secret_basic, client_secret_post, private_key_jwt, got \"client_secret_jwt\"")
    }

    @Test func authorizationParamsMayNotOverrideBrokerParameters() throws {
        let found = providerProblems("issuer: https://l.example\nauthorization_params: {state: x, nonce: y, prompt: consent}\n"
            + secretAndID)
        expectProblem(found, key: "providers.corp.authorization_params.state", contains: "is set by the broker")
        expectProblem(found, key: "providers.corp.authorization_params.nonce", contains: "is set by the broker")
        #expect(found.count == 2)
        let config = try loadConfig("providers:\n  g:\n    issuer: https://l.example\n    client_id: c\n"
            + "    client_secret_env: S\n    authorization_params:\n      include_granted_scopes: true\n      max_age: 0\n",
            env: ["S": "x"])
        #expect(config.provider(id: "g")?.authorizationParameters == ["include_granted_scopes": "true", "max_age": "0"])
    }

    @Test func allowInsecureHTTPMustBeABoolean() {
        let found = providerProblems("issuer: https://l.example\nallow_insecure_http: sometimes\n" + secretAndID)
        expectProblem(found, key: "providers.corp.allow_insecure_http", contains: "expected true or false")
    }

    @Test func providerIDsFollowTheRule() throws {
        for id in ["Corp", "-corp", "corp.example", String(repeating: "a", count: 65)] {
            let found = problems(of: "providers:\n  \(id):\n    issuer: https://l.example\n    client_id: c\n"
                + "    client_secret_env: S\n", env: ["S": "x"])
            expectProblem(found, key: "providers.\(id)", contains: "invalid id", line: 2)
        }
        let longest = String(repeating: "a", count: 64)
        for id in ["corp", "0day", "my_idp-2", longest] {
            let config = try loadConfig("providers:\n  \(id):\n    issuer: https://l.example\n    client_id: c\n"
                + "    client_secret_env: S\n", env: ["S": "x"])
            #expect(config.provider(id: id) != nil)
        }
    }

    @Test func providerMustBeAMapping() {
        expectProblem(problems(of: "providers:\n  corp: https://login.example.com\n"), key: "providers.corp",
                      contains: "expected a mapping, got \"https://login.example.com\"")
        expectProblem(problems(of: "providers: [corp]\n"), key: "providers", contains: "expected a mapping, got a list")
    }
}
