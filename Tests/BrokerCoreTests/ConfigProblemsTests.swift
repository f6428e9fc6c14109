import BrokerCore
import Foundation
import Testing

struct ConfigProblemsTests {
    @Test func yamlSyntaxErrorIsOneProblemWithItsLine() {
        let found = problems(of: "server:\n  listen: 127.0.0.1:8080\n  threads: [1, 2\nlog:\n  level: info\n")
        #expect(found.count == 1)
        #expect(found.first?.message.hasPrefix("invalid YAML") == true)
        #expect(found.first?.line != nil)
        #expect(found.first?.file == "test.yaml")
    }

    @Test func duplicateKeyIsReportedWithItsLine() {
        let found = problems(of: "log:\n  level: info\n  level: debug\n")
        #expect(found.count == 1)
        #expect(found.first?.message.contains("duplicate key level") == true)
        #expect(found.first?.line == 2)
    }

    @Test func rootMustBeAMapping() {
        expectProblem(problems(of: "- a\n- b\n"), key: "", contains: "expected a mapping, got a list", line: 1)
    }

    @Test func unknownKeysSuggestTheNearestKnownKey() {
        let found = problems(of: """
            sever:
              listen: 127.0.0.1:1
            log:
              levle: info
              colour: true
            providers:
              corp:
                issuer: https://login.example.com
                clinet_id: broker
                client_secret_env: CORP_SECRET
            """, env: ["CORP_SECRET": "x"])
        expectProblem(found, key: "sever", contains: "unknown key (did you mean server?)", line: 1)
        expectProblem(found, key: "log.levle", contains: "unknown key (did you mean level?)", line: 4)
        expectProblem(found, key: "providers.corp.clinet_id", contains: "unknown key (did you mean client_id?)", line: 9)
        expectProblem(found, key: "providers.corp.client_id", contains: "required key is missing")
        let colour = found.first { $0.key == "log.colour" }
        #expect(colour?.message == "unknown key")
    }

    @Test func wrongTypesSayWhatWasExpected() {
        let found = problems(of: """
            server:
              listen: [127.0.0.1]
              threads: abc
              shutdown_grace_seconds: soon
              limits: 5
            log:
              level: loud
              format: xml
              access: maybe
            """)
        expectProblem(found, key: "server.listen", contains: "expected HOST:PORT, got a list", line: 2)
        expectProblem(found, key: "server.threads", contains: "expected an integer, got \"abc\"", line: 3)
        expectProblem(found, key: "server.shutdown_grace_seconds", contains: "expected a number, got \"soon\"", line: 4)
        expectProblem(found, key: "server.limits", contains: "expected a mapping, got \"5\"", line: 5)
        expectProblem(found, key: "log.level", contains: "expected one of trace, debug, info, notice, warning, error, critical, got \"loud\"", line: 7)
        expectProblem(found, key: "log.format", contains: "expected one of auto, json, text, got \"xml\"", line: 8)
        expectProblem(found, key: "log.access", contains: "expected true or false, got \"maybe\"", line: 9)
        #expect(found.count == 7)
    }

    @Test func numbersOutsideTheirBoundsAreRefused() {
        let found = problems(of: """
            server:
              threads: -1
              shutdown_grace_seconds: 7200
              limits:
                max_body_bytes: 0
                max_header_bytes: 100
                max_url_bytes: 10
                max_connections: 0
                max_connections_per_ip: 0
                idle_timeout_seconds: 0
                request_head_timeout_seconds: 0
                request_body_min_bytes_per_second: -1
            """)
        for key in ["threads", "shutdown_grace_seconds", "limits.max_body_bytes", "limits.max_header_bytes",
                    "limits.max_url_bytes", "limits.max_connections", "limits.max_connections_per_ip",
                    "limits.idle_timeout_seconds", "limits.request_head_timeout_seconds",
                    "limits.request_body_min_bytes_per_second"] {
            expectProblem(found, key: "server.\(key)", contains: "must be between")
        }
        expectProblem(found, key: "server.limits.max_body_bytes", contains: "must be between 1024 and 67108864, got 0", line: 5)
    }

    @Test func perIPLimitMayNotExceedTheTotal() {
        let found = problems(of: "server:\n  limits:\n    max_connections: 10\n    max_connections_per_ip: 20\n")
        expectProblem(found, key: "server.limits.max_connections_per_ip", contains: "must not exceed max_connections (10)", line: 4)
    }

    @Test func allProblemsAreCollectedInOnePass() {
        let found = problems(of: """
            server:
              threads: many
            log:
              level: loud
            providers:
              corp:
                issuer: ftp://login.example.com
                client_id: broker
                client_secret_env: MISSING_SECRET
            apps:
              demo:
                redirect_uris: [http://localhost/cb]
                providers: [corp, nope]
            """, env: ["BROKER_MAX_BODY_BYTES": "huge"])
        #expect(found.map(\.key) == [
            "server.threads", "log.level", "providers.corp.issuer", "providers.corp.client_secret_env",
            "apps.demo.redirect_uris[0]", "apps.demo.providers[1]", "BROKER_MAX_BODY_BYTES",
        ])
        #expect(found.map(\.line) == [2, 4, 7, 9, 12, 13, nil])
    }

    @Test func errorDescriptionListsOneProblemPerLine() {
        do {
            _ = try ConfigLoader.load(yaml: "server:\n  threads: abc\nlog:\n  levle: info\n", fileName: "broker.yaml",
                                      environment: ["BROKER_LOG_ACCESS": "perhaps"])
            Issue.record("expected a ConfigError")
        } catch {
            #expect(error.description == """
                broker.yaml:2: server.threads: expected an integer, got "abc"
                broker.yaml:4: log.levle: unknown key (did you mean level?)
                BROKER_LOG_ACCESS: expected true or false, got "perhaps"
                """)
        }
    }

}

// MARK: - Helpers shared by the Config*Tests files

/// Loads `yaml` as the file `test.yaml`.
func loadConfig(_ yaml: String, env: [String: String] = [:]) throws(ConfigError) -> BrokerConfig {
    try ConfigLoader.load(yaml: yaml, fileName: "test.yaml", environment: env)
}

/// The problems loading `yaml` reports; empty when it loads.
func problems(of yaml: String, env: [String: String] = [:]) -> [ConfigProblem] {
    do {
        _ = try loadConfig(yaml, env: env)
        return []
    } catch {
        return error.problems
    }
}

/// The problems loading the file at `path` with an empty environment reports.
func problems(ofFileAt path: String) -> [ConfigProblem] {
    do {
        _ = try ConfigLoader.load(path: path, environment: [:])
        return []
    } catch {
        return error.problems
    }
}

/// Expects a problem at `key` whose message contains `text` (and at `line`, when given).
func expectProblem(_ problems: [ConfigProblem], key: String, contains text: String, line: Int? = nil,
                   sourceLocation: SourceLocation = #_sourceLocation) {
    let match = problems.first { $0.key == key && $0.message.contains(text) }
    #expect(match != nil, "no problem at \(key) containing \(text) in:\n\(ConfigError(problems: problems))",
            sourceLocation: sourceLocation)
    if let line, let match {
        #expect(match.line == line, "line of \(key)", sourceLocation: sourceLocation)
    }
}

/// `display_name`: what a person is shown for an app or a provider on the broker's pages.
struct ConfigDisplayNameTests {
    private static let yaml = """
        providers:
          corp:
            issuer: https://login.example.com
            client_id: broker
            client_secret_env: CORP_SECRET
            display_name: Corp Single Sign-On
        apps:
          tv:
            device_flow: true
            display_name: "Living-room TV"
          web:
            redirect_uris: [https://app.example.com/cb]
        """

    @Test func appsAndProvidersMayHaveOne() throws {
        let config = try ConfigLoader.load(yaml: Self.yaml, fileName: "test.yaml", environment: ["CORP_SECRET": "s"])
        #expect(config.provider(id: "corp")?.shownName == "Corp Single Sign-On")
        #expect(config.app(id: "tv")?.shownName == "Living-room TV")
        #expect(config.app(id: "web")?.displayName == nil && config.app(id: "web")?.shownName == "web", "the id without one")
    }

    @Test func oneWithAControlCharacterOrTooLongIsAProblem() {
        for bad in [#""TV\u0007""#, String(repeating: "x", count: 101), #""""#] {
            let yaml = Self.yaml.replacingOccurrences(of: #""Living-room TV""#, with: bad)
            do {
                _ = try ConfigLoader.load(yaml: yaml, fileName: "test.yaml", environment: ["CORP_SECRET": "s"])
                Issue.record("accepted \(bad)")
            } catch {
                #expect(error.problems.contains { $0.key == "apps.tv.display_name" }, "\(error.problems)")
            }
        }
    }
}
