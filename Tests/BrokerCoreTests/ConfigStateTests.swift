import Foundation
import BrokerCore
import Testing

struct ConfigStateTests {
    @Test func defaultsKeepStateInAStateDirectoryWithTheKeyFromBrokerStateKey() throws {
        let state = try ConfigLoader.load(path: nil, environment: [:]).state
        #expect(state.directory == "state")
        #expect(state.keys == nil)
        #expect(state.keySource == "env BROKER_STATE_KEY")
        #expect(state.snapshotIntervalSeconds == 300)
        #expect(state.journalMaxBytes == 64 * 1_024 * 1_024)
        #expect(state == StateSettings())
        #expect(BrokerConfig.defaults.state == state)
        #expect(StateSettings.defaultKeyVariable == "BROKER_STATE_KEY")
        #expect(try loadConfig("state:\n").state == state)
    }

    @Test func everyKeyIsReadFromTheFile() throws {
        let config = try loadConfig("""
            state:
              directory: /var/lib/token-broker
              key_env: MY_STATE_KEYS
              snapshot_interval_seconds: 0.5e1
              journal_max_bytes: 1048576
            """)
        #expect(config.state == StateSettings(directory: "/var/lib/token-broker", keys: nil,
                                              keySource: "env MY_STATE_KEYS", snapshotIntervalSeconds: 5,
                                              journalMaxBytes: 1_048_576))
    }

    @Test func overridesLandAndWinOverTheFile() throws {
        let yaml = "state:\n  directory: from-file\n  snapshot_interval_seconds: 60\n"
        let environment = ["BROKER_STATE_DIR": "relative/dir", "BROKER_SNAPSHOT_INTERVAL_SECONDS": "86400"]
        for config in [try loadConfig(yaml, env: environment), try ConfigLoader.load(path: nil, environment: environment)] {
            #expect(config.state.directory == "relative/dir")
            #expect(config.state.snapshotIntervalSeconds == 86_400)
        }
        #expect(try loadConfig(yaml, env: ["BROKER_STATE_DIR": ""]).state.directory == "from-file")
    }

    @Test func journalSizeHasNoOverrideAndTheKeysAreNotOneEither() {
        let table = ConfigLoader.environmentOverrides
        #expect(table.first { $0.variable == "BROKER_STATE_DIR" }?.key == "state.directory")
        #expect(table.first { $0.variable == "BROKER_SNAPSHOT_INTERVAL_SECONDS" }?.key == "state.snapshot_interval_seconds")
        #expect(!table.contains { $0.key == "state.journal_max_bytes" })
        #expect(!table.contains { $0.variable == "BROKER_STATE_KEY" || $0.key.hasPrefix("state.key") })
    }

    @Test func boundsAreEnforced() {
        for value in ["0", "0.5", "86401"] {
            expectProblem(problems(of: "state:\n  snapshot_interval_seconds: \(value)\n"),
                          key: "state.snapshot_interval_seconds", contains: "must be between 1 and 86400, got", line: 2)
            expectProblem(problems(of: "", env: ["BROKER_SNAPSHOT_INTERVAL_SECONDS": value]),
                          key: "BROKER_SNAPSHOT_INTERVAL_SECONDS", contains: "must be between 1 and 86400, got")
        }
        for value in ["1048575", "4294967297", "-1"] {
            expectProblem(problems(of: "state:\n  journal_max_bytes: \(value)\n"), key: "state.journal_max_bytes",
                          contains: "must be between 1048576 and 4294967296, got \(value)", line: 2)
        }
        expectProblem(problems(of: "state:\n  journal_max_bytes: 64MiB\n"), key: "state.journal_max_bytes",
                      contains: "expected an integer, got \"64MiB\"", line: 2)
        #expect(problems(of: "state:\n  journal_max_bytes: 4294967296\n  snapshot_interval_seconds: 1\n").isEmpty)
    }

    @Test func directoryMustBeAPath() {
        expectProblem(problems(of: "state:\n  directory: \"\"\n"), key: "state.directory", contains: "must not be empty", line: 2)
        expectProblem(problems(of: "state:\n  directory:\n"), key: "state.directory",
                      contains: "expected a directory path, got nothing", line: 2)
        expectProblem(problems(of: "state:\n  directory: \"a\\0b\"\n"), key: "state.directory",
                      contains: "must not contain a NUL character", line: 2)
        expectProblem(problems(of: "state:\n  directory: [a, b]\n"), key: "state.directory",
                      contains: "expected a directory path, got a list", line: 2)
    }

    @Test func unknownKeysSuggestTheNearestKnownOne() {
        let found = problems(of: """
            state:
              directroy: state
              key_evn: MY_KEY
              keyfile: /run/secrets/key
              snapshot_interval: 300
              compress: true
            """)
        expectProblem(found, key: "state.directroy", contains: "unknown key (did you mean directory?)", line: 2)
        expectProblem(found, key: "state.key_evn", contains: "unknown key (did you mean key_env?)", line: 3)
        expectProblem(found, key: "state.keyfile", contains: "unknown key (did you mean key_file?)", line: 4)
        expectProblem(found, key: "state.snapshot_interval", contains: "unknown key", line: 5)
        #expect(found.first { $0.key == "state.compress" }?.message == "unknown key")
        #expect(found.count == 5)
        expectProblem(problems(of: "stat:\n  directory: x\n"), key: "stat", contains: "unknown key (did you mean state?)")
        expectProblem(problems(of: "state: [x]\n"), key: "state", contains: "expected a mapping, got a list", line: 1)
    }

    @Test func keyEnvAndKeyFileAreExclusiveAndChecked() {
        let both = problems(of: "state:\n  key_env: MY_KEY\n  key_file: /run/secrets/key\n",
                            env: ["BROKER_STATE_KEY": "not a key"])
        expectProblem(both, key: "state.key_file", contains: "set only one of key_env and key_file", line: 3)
        // With the source in error, no key is read: BROKER_STATE_KEY is not consulted.
        #expect(both.count == 1)

        expectProblem(problems(of: "state:\n  key_env: 1BAD-NAME\n"), key: "state.key_env",
                      contains: "is not a valid environment variable name", line: 2)
        expectProblem(problems(of: "state:\n  key_env: \"\"\n"), key: "state.key_env", contains: "must not be empty", line: 2)
        expectProblem(problems(of: "state:\n  key_file:\n"), key: "state.key_file",
                      contains: "expected a string, got nothing", line: 2)
        expectProblem(problems(of: "state:\n  key_file: [a]\n"), key: "state.key_file",
                      contains: "expected a string, got a list", line: 2)
    }
}

/// `state.backend` and `state.postgres`: the URL never holds a password, the password comes
/// from a variable or a file, and `postgres` needs a URL.
struct ConfigPostgresTests {
    private func load(_ yaml: String, _ environment: [String: String] = [:]) throws(ConfigError) -> BrokerConfig {
        try ConfigLoader.load(yaml: yaml, fileName: "broker.yaml", environment: environment)
    }

    @Test func thePostgresStoreIsConfiguredWithItsPasswordApart() throws {
        let config = try load("""
            state:
              backend: postgres
              postgres:
                url: postgres://broker@db.internal:5432/broker?sslmode=verify-full
                password_env: DB_PASSWORD
                pool_size: 4
            """, ["DB_PASSWORD": "s3cret"])
        #expect(config.state.backend == .postgres && config.state.postgres.poolSize == 4)
        #expect(config.state.postgres.password?.reveal() == "s3cret")
        #expect(!"\(config.state.postgres)".contains("s3cret"))
    }

    @Test func aPasswordInTheURLIsRefusedWithoutRepeatingIt() {
        for url in ["postgres://broker:hunter2@db/broker", "postgres://db/broker?password=hunter2"] {
            do {
                _ = try load("state:\n  postgres:\n    url: \(url)\n")
                Issue.record("accepted \(url)")
            } catch {
                #expect(error.description.contains("must not hold a password") && !error.description.contains("hunter2"))
            }
        }
    }

    @Test func thePasswordComesFromTheEnvironmentOrAFileItNames() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pg-password-\(UUID().uuidString)").path
        try "from-a-file\n".write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let yaml = "state:\n  backend: postgres\n  postgres:\n    url: postgres://broker@db/broker\n"
        #expect(try load(yaml, ["BROKER_POSTGRES_PASSWORD": "from-env"]).state.postgres.password?.reveal() == "from-env")
        #expect(try load(yaml, ["BROKER_POSTGRES_PASSWORD_FILE": file]).state.postgres.password?.reveal() == "from-a-file")
        #expect(try load(yaml).state.postgres.password == nil)
        #expect(throws: ConfigError.self, "both") {
            try load(yaml, ["BROKER_POSTGRES_PASSWORD": "from-env", "BROKER_POSTGRES_PASSWORD_FILE": file])
        }
        do {
            _ = try load(yaml, ["BROKER_POSTGRES_PASSWORD_FILE": file + "-missing"])
            Issue.record("a missing password file was accepted")
        } catch {
            #expect(error.description.contains("BROKER_POSTGRES_PASSWORD_FILE"))
        }
        let named = "state:\n  postgres:\n    url: postgres://broker@db/broker\n    password_env: DB_PASSWORD\n"
        #expect(try load(named, ["DB_PASSWORD": "named", "BROKER_POSTGRES_PASSWORD_FILE": file]).state.postgres.password?.reveal() == "named",
                "the file's own reference wins")
    }

    @Test func thePostgresBackendNeedsAURL() {
        #expect(throws: ConfigError.self) { try load("state:\n  backend: postgres\n") }
        #expect(throws: ConfigError.self) { try load("state:\n  backend: mysql\n") }
    }
}
