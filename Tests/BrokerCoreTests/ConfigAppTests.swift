import BrokerCore
import Testing

struct ConfigAppTests {
    private let providers = """
        providers:
          corp:
            issuer: https://login.example.com
            client_id: c
            client_secret_env: S
          github:
            authorization_endpoint: https://github.com/login/oauth/authorize
            token_endpoint: https://github.com/login/oauth/access_token
            client_id: c
            client_secret_env: S

        """

    private func appProblems(_ apps: String) -> [ConfigProblem] {
        problems(of: providers + apps, env: ["S": "x"])
    }

    @Test func appNamingAnUnknownProviderIsAProblemWithASuggestion() {
        let found = appProblems("apps:\n  demo:\n    redirect_uris: [myapp://oauth]\n    providers: [corp, githib, okta]\n")
        expectProblem(found, key: "apps.demo.providers[1]", contains: "unknown provider \"githib\" (did you mean github?)", line: 14)
        let okta = found.first { $0.key == "apps.demo.providers[2]" }
        #expect(okta?.message == "unknown provider \"okta\"")
        #expect(found.count == 2)
    }

    @Test func appMayNotListAProviderTwiceOrNone() {
        expectProblem(appProblems("apps:\n  demo:\n    redirect_uris: [myapp://oauth]\n    providers: [corp, corp]\n"),
                      key: "apps.demo.providers[1]", contains: "duplicate provider \"corp\"")
        expectProblem(appProblems("apps:\n  demo:\n    redirect_uris: [myapp://oauth]\n    providers: []\n"),
                      key: "apps.demo.providers", contains: "must list at least one provider")
    }

    @Test func anAppMayRequireDPoP() throws {
        let config = try loadConfig(providers + "apps:\n  demo:\n    redirect_uris: [myapp://oauth]\n    dpop: required\n"
            + "  plain:\n    redirect_uris: [myapp://plain]\n", env: ["S": "x"])
        #expect(config.app(id: "demo")?.dpop == .required)
        #expect(config.app(id: "plain")?.dpop == .optional, "optional by default")
        #expect(config.app(id: "demo")?.dpopNonce == false, "no nonces by default")
        expectProblem(appProblems("apps:\n  demo:\n    redirect_uris: [myapp://oauth]\n    dpop: always\n"),
                      key: "apps.demo.dpop", contains: "expected one of optional, required, got \"always\"")
        let nonced = try loadConfig(providers + "apps:\n  demo:\n    redirect_uris: [myapp://oauth]\n    dpop_nonce: true\n", env: ["S": "x"])
        #expect(nonced.app(id: "demo")?.dpopNonce == true)
    }

    @Test func duplicateRedirectURIsAreProblems() {
        let exact = appProblems("apps:\n  demo:\n    redirect_uris:\n      - myapp://oauth\n      - https://a.example/cb\n"
            + "      - myapp://oauth\n")
        expectProblem(exact, key: "apps.demo.redirect_uris[2]", contains: "duplicate redirect URI \"myapp://oauth\": same as redirect_uris[0]", line: 16)
        let loopback = appProblems("apps:\n  demo:\n    redirect_uris: [\"http://127.0.0.1:8000/cb\", \"http://127.0.0.1:9000/cb\"]\n")
        expectProblem(loopback, key: "apps.demo.redirect_uris[1]", contains: "loopback ports are ignored when matching")
    }

    @Test func redirectURIsAreRequiredAndChecked() {
        expectProblem(appProblems("apps:\n  demo:\n    providers: [corp]\n"), key: "apps.demo.redirect_uris",
                      contains: "required key is missing", line: 12)
        expectProblem(appProblems("apps:\n  demo:\n    redirect_uris: []\n"), key: "apps.demo.redirect_uris",
                      contains: "must list at least one redirect URI")
        expectProblem(appProblems("apps:\n  demo:\n    redirect_uris: myapp://oauth\n"), key: "apps.demo.redirect_uris",
                      contains: "expected a list")
        let bad = appProblems("apps:\n  demo:\n    redirect_uris: [myapp://oauth, \"http://localhost:3000/cb\", \"javascript:x\"]\n")
        expectProblem(bad, key: "apps.demo.redirect_uris[1]", contains: "RFC 8252 §8.3", line: 13)
        expectProblem(bad, key: "apps.demo.redirect_uris[2]", contains: "is not allowed")
        expectProblem(appProblems("apps:\n  demo:\n    redirect_uris: [myapp://oauth]\n    redirect_uri: x\n"),
                      key: "apps.demo.redirect_uri", contains: "unknown key (did you mean redirect_uris?)")
    }

    @Test func appIDsFollowTheRule() {
        expectProblem(appProblems("apps:\n  Demo_App:\n    redirect_uris: [myapp://oauth]\n"), key: "apps.Demo_App",
                      contains: "invalid id \"Demo_App\"", line: 12)
    }

    @Test func brokenProviderDoesNotAlsoBreakItsApps() {
        let found = problems(of: "providers:\n  corp:\n    issuer: https://l.example\n    client_id: c\n"
            + "apps:\n  demo:\n    redirect_uris: [myapp://oauth]\n    providers: [corp]\n")
        #expect(found.map(\.key) == ["providers.corp.client_secret_env"])
    }
}
