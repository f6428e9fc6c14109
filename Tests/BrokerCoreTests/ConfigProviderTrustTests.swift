import APIClient
import Foundation
import Testing

@testable import BrokerCore

/// A provider's `ca_file` and `api_connections`: read and checked at load, the CA file naming its
/// path when it cannot be used; the CA trusted for the origins the provider's configuration names.
struct ConfigProviderTrustTests {
    private let provider = "providers:\n  corp:\n    issuer: https://login.corp.example/realm\n    client_id: broker\n"
        + "    client_secret_env: CORP_SECRET\n    api_base_url: https://api.corp.example/v1\n"

    private func file(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ca-\(UUID().uuidString).pem").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func aCAFileIsTrustedForTheOriginsTheProviderNames() throws {
        // The system's bundle stands in for a private CA's: a PEM file of certificates.
        let config = try loadConfig(provider + "    ca_file: /etc/ssl/certs/ca-certificates.crt\n", env: ["CORP_SECRET": "x"])
        let corp = try #require(config.provider(id: "corp"))
        #expect(corp.caFile == "/etc/ssl/certs/ca-certificates.crt" && corp.apiConnections == .shared)
        let trust = try ProviderTrust(config.providers)
        #expect(Set(trust.origins.keys) == ["https://login.corp.example:443", "https://api.corp.example:443"])
        #expect(trust.authorities(of: "corp") === trust.origins["https://login.corp.example:443"])
        #expect(trust.authorities(of: "other") === CertificateAuthorities.system)
    }

    @Test func aCAFileThatCannotBeUsedIsAProblemNamingItsPath() throws {
        let empty = try file("no certificate here\n")
        for (path, expected) in [("/nonexistent/corp-ca.pem", "/nonexistent/corp-ca.pem cannot be read"),
                                 (empty, "\(empty) holds no PEM certificate")] {
            let found = problems(of: provider + "    ca_file: \(path)\n", env: ["CORP_SECRET": "x"])
            #expect(found.contains { $0.key == "providers.corp.ca_file" && $0.message.contains(expected) }, "\(found)")
        }
    }

    @Test func apiConnectionsAreSharedOrPerSession() throws {
        let config = try loadConfig(provider + "    api_connections: per_session\n", env: ["CORP_SECRET": "x"])
        #expect(config.provider(id: "corp")?.apiConnections == .perSession)
        let found = problems(of: provider + "    api_connections: pooled\n", env: ["CORP_SECRET": "x"])
        #expect(found.contains { $0.key == "providers.corp.api_connections" && $0.message.contains("expected one of shared, per_session") })
    }
}
