import Foundation
import Testing

/// The command line as an operator uses it.
struct CommandLineTests {
    private func run(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        let inherited = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("BROKER_") }
        return try runProcess(BrokerProcess.binary, arguments, environment: inherited.merging(environment) { $1 })
    }

    private func writeConfig(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID().uuidString).yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func checkConfigNamesATypoAndFails() throws {
        let path = try writeConfig("""
            providers:
              corp:
                issuer: https://login.example.com
                clinet_id: broker
                client_secret_env: CORP_SECRET
            """)
        let (status, output) = try run(["check-config", path], environment: ["CORP_SECRET": "never-printed-secret"])
        #expect(status != 0)
        #expect(output.contains("providers.corp.clinet_id"))
        #expect(output.contains("did you mean client_id?"))
        #expect(!output.contains("never-printed-secret"))
    }

    @Test func checkConfigAcceptsTheExample() throws {
        let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("config/example.yaml").path
        let text = try String(contentsOfFile: example, encoding: .utf8)
        let variables = Set(text.matches(of: /client_secret_env: *([A-Z0-9_]+)/).map { String($0.1) })
        var environment = Dictionary(uniqueKeysWithValues: variables.map { ($0, "example-secret") })
        // check-config checks what serve needs besides the file: a state key.
        environment["BROKER_STATE_KEY"] = try run(["gen-key"]).output.trimmingCharacters(in: .whitespacesAndNewlines)
        let (status, output) = try run(["check-config", example], environment: environment)
        #expect(status == 0, "\(output)")
        #expect(output.contains("OK"))
    }

    @Test func serveRefusesAnInvalidConfig() throws {
        let path = try writeConfig("server:\n  listen: nowhere\n")
        let (status, output) = try run(["serve", "--config", path])
        #expect(status == 2)
        #expect(output.contains("server.listen"))
    }

    /// The broker's start error with `config`, `arguments` and `environment`; nil when it starts.
    private func startError(config: String = "", arguments: [String], environment: [String: String] = [:]) -> String? {
        do {
            _ = try BrokerProcess(config: config, arguments: arguments, environment: environment)
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test func developmentModeRefusesAPublicURLOffLoopback() throws {
        let refusal = try #require(startError(arguments: ["--dev"], environment: ["BROKER_PUBLIC_URL": "https://broker.example.com"]))
        #expect(refusal.contains("cannot start: development mode"))
        #expect(refusal.contains("public_url"))
        #expect(startError(arguments: ["--dev"], environment: ["BROKER_PUBLIC_URL": "http://127.0.0.1:9"]) == nil,
                "a loopback public URL is fine")
    }

    /// An empty BROKER_CONFIG (a Compose `${BROKER_CONFIG:-}`) is unset, as every other
    /// `BROKER_*` variable: the embedded defaults, not a file named "".
    @Test func anEmptyConfigVariableIsUnset() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("state-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (status, output) = try run(["state", "inspect"], environment: [
            "BROKER_CONFIG": "", "BROKER_STATE_DIR": directory.path, "BROKER_STATE_KEY": BrokerProcess.stateKey,
        ])
        #expect(status == 0, "\(output)")
        #expect(!output.contains("configuration file"))
    }

    @Test func developmentModeRefusesTrustedProxies() throws {
        let refusal = try #require(startError(config: "server:\n  trusted_proxies: 127.0.0.1\n", arguments: ["--dev"]))
        #expect(refusal.contains("cannot start: development mode"))
        #expect(refusal.contains("trusted_proxies"))
        #expect(startError(config: "server:\n  trusted_proxies: 127.0.0.1\n", arguments: []) == nil, "outside development mode it is fine")
    }

    @Test func versionAndHelp() throws {
        let version = try run(["version"])
        #expect(version.status == 0)
        #expect(version.output.hasPrefix("token-broker "))
        let help = try run(["--help"])
        #expect(help.status == 0)
        #expect(help.output.contains("check-config"))
    }
}
