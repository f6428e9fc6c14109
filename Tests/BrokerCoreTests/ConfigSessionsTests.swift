import BrokerCore
import Testing

struct ConfigSessionsTests {
    @Test func defaultsAreThoseOfTheSpecification() throws {
        let sessions = try ConfigLoader.load(path: nil, environment: [:]).sessions
        #expect(sessions.idleLifetimeSeconds == 30 * 86_400)
        #expect(sessions.absoluteLifetimeSeconds == 90 * 86_400)
        #expect(sessions.refreshSkewSeconds == 60)
        #expect(sessions.profileCacheSeconds == 60)
        #expect(sessions.loginLifetimeSeconds == 600)
        #expect(sessions.handoffLifetimeSeconds == 60)
        #expect(sessions == SessionSettings())
        #expect(BrokerConfig.defaults.sessions == sessions)
        #expect(try loadConfig("sessions:\n").sessions == sessions)
    }

    @Test func everyKeyIsReadFromTheFile() throws {
        let config = try loadConfig("""
            sessions:
              idle_lifetime_seconds: 3600
              absolute_lifetime_seconds: 86400.5
              refresh_skew_seconds: 0
              profile_cache_seconds: 0
              login_lifetime_seconds: 10
              handoff_lifetime_seconds: 2.5e1
            """)
        #expect(config.sessions == SessionSettings(
            idleLifetimeSeconds: 3_600, absoluteLifetimeSeconds: 86_400.5, refreshSkewSeconds: 0,
            profileCacheSeconds: 0, loginLifetimeSeconds: 10, handoffLifetimeSeconds: 25))
    }

    @Test func everyOverrideLandsAndWinsOverTheFile() throws {
        let yaml = """
            sessions:
              idle_lifetime_seconds: 3600
              absolute_lifetime_seconds: 7200
              refresh_skew_seconds: 30
              profile_cache_seconds: 30
              login_lifetime_seconds: 300
              handoff_lifetime_seconds: 30
            """
        let environment = [
            "BROKER_SESSION_IDLE_LIFETIME_SECONDS": "120",
            "BROKER_SESSION_ABSOLUTE_LIFETIME_SECONDS": "240",
            "BROKER_REFRESH_SKEW_SECONDS": "5",
            "BROKER_PROFILE_CACHE_SECONDS": "3600",
            "BROKER_LOGIN_LIFETIME_SECONDS": "1.5e3",
            "BROKER_HANDOFF_LIFETIME_SECONDS": "600",
        ]
        let expected = SessionSettings(idleLifetimeSeconds: 120, absoluteLifetimeSeconds: 240, refreshSkewSeconds: 5,
                                       profileCacheSeconds: 3_600, loginLifetimeSeconds: 1_500,
                                       handoffLifetimeSeconds: 600)
        #expect(try loadConfig(yaml, env: environment).sessions == expected)
        #expect(try ConfigLoader.load(path: nil, environment: environment).sessions == expected)
        // One override alone changes only its own setting.
        let one = try loadConfig(yaml, env: ["BROKER_REFRESH_SKEW_SECONDS": "90"]).sessions
        #expect(one.refreshSkewSeconds == 90)
        #expect(one.profileCacheSeconds == 30 && one.idleLifetimeSeconds == 3_600)
    }

    @Test func boundsAreEnforcedAtBothEnds() {
        let cases: [(key: String, variable: String, below: String, above: String, message: String)] = [
            ("idle_lifetime_seconds", "BROKER_SESSION_IDLE_LIFETIME_SECONDS", "59", "157680001",
             "must be between 60 and 157680000"),
            ("absolute_lifetime_seconds", "BROKER_SESSION_ABSOLUTE_LIFETIME_SECONDS", "59.9", "157680000.5",
             "must be between 60 and 157680000"),
            ("refresh_skew_seconds", "BROKER_REFRESH_SKEW_SECONDS", "-1", "3601", "must be between 0 and 3600"),
            ("profile_cache_seconds", "BROKER_PROFILE_CACHE_SECONDS", "-0.5", "3601", "must be between 0 and 3600"),
            ("login_lifetime_seconds", "BROKER_LOGIN_LIFETIME_SECONDS", "9", "3601", "must be between 10 and 3600"),
            ("handoff_lifetime_seconds", "BROKER_HANDOFF_LIFETIME_SECONDS", "4", "601", "must be between 5 and 600"),
        ]
        for item in cases {
            for value in [item.below, item.above] {
                expectProblem(problems(of: "sessions:\n  \(item.key): \(value)\n"), key: "sessions.\(item.key)",
                              contains: "\(item.message), got", line: 2)
                expectProblem(problems(of: "", env: [item.variable: value]), key: item.variable,
                              contains: "\(item.message), got")
            }
        }
        // The bounds themselves are accepted.
        #expect(problems(of: """
            sessions:
              idle_lifetime_seconds: 157680000
              absolute_lifetime_seconds: 157680000
              refresh_skew_seconds: 3600
              profile_cache_seconds: 3600
              login_lifetime_seconds: 3600
              handoff_lifetime_seconds: 5
            """).isEmpty)
    }

    @Test func absoluteLifetimeMayNotBeShorterThanTheIdleOne() throws {
        let found = problems(of: "sessions:\n  idle_lifetime_seconds: 7200\n  absolute_lifetime_seconds: 3600\n")
        expectProblem(found, key: "sessions.absolute_lifetime_seconds",
                      contains: "must be at least idle_lifetime_seconds (7200), got 3600", line: 3)
        #expect(found.count == 1)
        #expect(found.first?.file == "test.yaml")

        // Against the default absolute lifetime (90 days), from the environment: no line, no file.
        let fromEnvironment = problems(of: "", env: ["BROKER_SESSION_IDLE_LIFETIME_SECONDS": "8000000"])
        expectProblem(fromEnvironment, key: "sessions.absolute_lifetime_seconds",
                      contains: "must be at least idle_lifetime_seconds (8000000), got 7776000")
        #expect(fromEnvironment.first?.line == nil && fromEnvironment.first?.file == nil)

        // Equal is fine, and an override can repair the file.
        let equal = try loadConfig("sessions:\n  idle_lifetime_seconds: 600\n  absolute_lifetime_seconds: 600\n")
        #expect(equal.sessions.absoluteLifetimeSeconds == equal.sessions.idleLifetimeSeconds)
        let repaired = try loadConfig("sessions:\n  idle_lifetime_seconds: 7200\n  absolute_lifetime_seconds: 3600\n",
                                      env: ["BROKER_SESSION_ABSOLUTE_LIFETIME_SECONDS": "7200"])
        #expect(repaired.sessions.absoluteLifetimeSeconds == 7_200)
    }

    @Test func unknownKeysAndWrongTypesAreProblemsWithLines() {
        let found = problems(of: """
            sessions:
              idle_lifetime_second: 60
              handoff_lifetime: 30
              refresh_skew_seconds: soon
              profile_cache_seconds: [60]
              login_lifetime_seconds:
              session_count: 3
            """)
        expectProblem(found, key: "sessions.idle_lifetime_second",
                      contains: "unknown key (did you mean idle_lifetime_seconds?)", line: 2)
        expectProblem(found, key: "sessions.handoff_lifetime", contains: "unknown key", line: 3)
        expectProblem(found, key: "sessions.refresh_skew_seconds", contains: "expected a number, got \"soon\"", line: 4)
        expectProblem(found, key: "sessions.profile_cache_seconds", contains: "expected a number, got a list", line: 5)
        expectProblem(found, key: "sessions.login_lifetime_seconds", contains: "expected a number, got nothing", line: 6)
        expectProblem(found, key: "sessions.session_count", contains: "unknown key", line: 7)
        #expect(found.count == 6)
        #expect(found.map(\.line) == [2, 3, 4, 5, 6, 7])
        expectProblem(problems(of: "sessions: 30\n"), key: "sessions", contains: "expected a mapping", line: 1)
        expectProblem(problems(of: "session:\n  idle_lifetime_seconds: 60\n"), key: "session",
                      contains: "unknown key (did you mean sessions?)", line: 1)
    }
}
