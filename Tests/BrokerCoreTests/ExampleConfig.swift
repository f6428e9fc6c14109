import Foundation

/// `config/example.yaml`, which the README points new users to, and what it needs to load.
enum ExampleConfig {
    static let path = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("config/example.yaml").path

    /// Every `client_secret_env` variable the file names, set to `value`.
    static func secretEnvironment(value: String) throws -> [String: String] {
        var environment: [String: String] = [:]
        for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("client_secret_env:") else { continue }
            environment[trimmed.dropFirst("client_secret_env:".count).trimmingCharacters(in: .whitespaces)] = value
        }
        return environment
    }
}
