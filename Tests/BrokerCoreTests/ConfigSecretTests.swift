import BrokerCore
import Foundation
import Testing

struct ConfigSecretTests {
    private let value = "s3cr3t-value"

    private func everyRendering<T>(of subject: T) -> [String] {
        var dumped = ""
        dump(subject, to: &dumped)
        return [String(describing: subject), String(reflecting: subject), "\(subject)", dumped]
    }

    @Test func secretPrintsOnlyItsSource() {
        let secret = Secret(value, source: "env CORP_CLIENT_SECRET")
        #expect(secret.reveal() == value)
        #expect(secret.source == "env CORP_CLIENT_SECRET")
        #expect(secret.description == "Secret(<redacted>, from env CORP_CLIENT_SECRET)")
        #expect(secret.debugDescription == secret.description)
        for text in everyRendering(of: secret) {
            #expect(!text.contains(value), "\(text)")
        }
    }

    @Test func secretNeverAppearsInConfigProviderOrErrorDescriptions() throws {
        let yaml = """
            providers:
              corp:
                issuer: https://login.example.com
                client_id: broker
                client_secret_env: CORP_CLIENT_SECRET
            apps:
              demo:
                redirect_uris: [myapp://oauth]
            """
        let environment = ["CORP_CLIENT_SECRET": value]
        let config = try loadConfig(yaml, env: environment)
        let provider = try #require(config.provider(id: "corp"))
        #expect(provider.clientSecret?.reveal() == value)
        var renderings = everyRendering(of: config) + everyRendering(of: provider)
            + everyRendering(of: provider.clientSecret)
        #expect(renderings.contains { $0.contains("Secret(<redacted>, from env CORP_CLIENT_SECRET)") })

        // The same file with other problems: the error must not leak the resolved secret either.
        let broken = yaml + "\n    providers: [corp, crop]\nlog:\n  level: loud\n"
        do {
            _ = try loadConfig(broken, env: environment.merging(["BROKER_THREADS": "x"]) { $1 })
            Issue.record("expected a ConfigError")
        } catch {
            #expect(error.problems.count == 3)
            renderings += everyRendering(of: error)
        }
        for text in renderings {
            #expect(!text.contains(value), "\(text)")
        }
    }

    @Test func fileSecretLosesOneTrailingNewline() throws {
        for (contents, expected) in [("abc\n", "abc"), ("abc", "abc"), ("abc\n\n", "abc\n"), ("abc\r\n", "abc"),
                                     ("line1\nline2\n", "line1\nline2")] {
            let file = try TemporaryFile(contents: contents)
            let config = try loadConfig("providers:\n  p:\n    issuer: https://l.example\n    client_id: c\n"
                + "    client_secret_file: \(file.path)\n")
            let secret = try #require(config.provider(id: "p")?.clientSecret)
            #expect(secret.reveal() == expected)
            #expect(secret.source == "file \(file.path)")
            #expect(!secret.description.contains(expected))
        }
    }

    @Test func emptyOrMissingSecretFileIsAProblemNamingThePath() throws {
        let empty = try TemporaryFile(contents: "\n")
        let found = problems(of: "providers:\n  p:\n    issuer: https://l.example\n    client_id: c\n"
            + "    client_secret_file: \(empty.path)\n")
        expectProblem(found, key: "providers.p.client_secret_file", contains: "secret file \(empty.path) is empty", line: 5)

        let missing = "/nonexistent/\(UUID().uuidString)"
        let notFound = problems(of: "providers:\n  p:\n    issuer: https://l.example\n    client_id: c\n"
            + "    client_secret_file: \(missing)\n")
        expectProblem(notFound, key: "providers.p.client_secret_file",
                      contains: "cannot read secret file \(missing): it does not exist")

        let directory = FileManager.default.temporaryDirectory.path
        let isDirectory = problems(of: "providers:\n  p:\n    issuer: https://l.example\n    client_id: c\n"
            + "    client_secret_file: \(directory)\n")
        expectProblem(isDirectory, key: "providers.p.client_secret_file", contains: "cannot read secret file")
    }

    @Test func relativeSecretFileIsResolvedFromTheConfigDirectory() throws {
        let name = "secret-\(UUID().uuidString)"
        let secret = try TemporaryFile(contents: "relative\n", name: name)
        let config = try TemporaryFile(contents: "providers:\n  p:\n    issuer: https://l.example\n    client_id: c\n"
            + "    client_secret_file: \(name)\n", name: "config-\(UUID().uuidString).yaml")
        let loaded = try ConfigLoader.load(path: config.path, environment: [:])
        #expect(loaded.provider(id: "p")?.clientSecret?.reveal() == "relative")
        #expect(loaded.provider(id: "p")?.clientSecret?.source == "file \(secret.path)")
    }
}

/// A file in the temporary directory, deleted when the value is released.
final class TemporaryFile: Sendable {
    let path: String

    init(contents: String, name: String = "secret-\(UUID().uuidString)") throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent(name).path
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}
