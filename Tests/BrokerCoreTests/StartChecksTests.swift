import Foundation
import BrokerCrypto
import Testing

@testable import BrokerCore

/// What `serve` and `check-config` both check beyond the configuration itself: a start without
/// a state key is refused for good, and secret files other users can read are reported.
struct StartChecksTests {
    private func scratch() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("start-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    private func write(_ path: String, _ text: String, mode: Int) {
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: mode])
    }

    @Test func withoutAStateKeyTheStartIsRefusedSayingWhereTheKeyWasLookedFor() throws {
        let unset = try loadConfig("providers: {}\napps: {}\n")
        #expect(StartChecks.refusals(unset, development: false).map { $0.hasPrefix("no state key: BROKER_STATE_KEY is not set.") } == [true])
        #expect(StartChecks.refusals(unset, development: true).isEmpty, "development mode keeps sessions in memory")
        let missing = try loadConfig("state:\n  key_file: /nonexistent/state-key\n")
        #expect(StartChecks.refusals(missing, development: false).map {
            $0.hasPrefix("no state key: the state key file /nonexistent/state-key does not exist.")
        } == [true])
        let keyed = try loadConfig("providers: {}\n", env: ["BROKER_STATE_KEY": SymmetricKey.generate().base64])
        #expect(StartChecks.refusals(keyed, development: false).isEmpty)
    }

    @Test func secretFilesOthersCanReadAreReportedAndLeftAlone() throws {
        let directory = try scratch()
        let key = "\(directory)/state-key", secret = "\(directory)/client-secret", token = "\(directory)/admin-token"
        let tlsKey = "\(directory)/tls.key", certificate = "\(directory)/tls.crt", backend = "\(directory)/orders-secret"
        write(key, SymmetricKey.generate().base64, mode: 0o644)
        write(secret, "s", mode: 0o444)
        write(token, String(repeating: "t", count: 40), mode: 0o600)
        write(tlsKey, try String(contentsOfFile: try ConfigTLSTests.resource("ec-pkcs8.pem"), encoding: .utf8), mode: 0o640)
        write(certificate, try String(contentsOfFile: try ConfigTLSTests.resource("ec-certificate.pem"), encoding: .utf8), mode: 0o644)
        write(backend, String(repeating: "b", count: 40), mode: 0o604)
        let config = try loadConfig("""
            server:
              tls_certificate_file: \(certificate)
              tls_key_file: \(tlsKey)
            resource_servers:
              orders:
                secret_file: \(backend)
            state:
              key_file: \(key)
            admin:
              token_file: \(token)
            providers:
              corp:
                issuer: https://login.example.com
                client_id: broker
                client_secret_file: \(secret)
            """)
        let warnings = StartChecks.warnings(config)
        #expect(warnings.count == 3, "the certificate is public, a key readable by its group is not reported")
        #expect(warnings.contains { $0.hasPrefix("the state key file \(key) can be read by other users (mode 0644)") })
        #expect(warnings.contains { $0.hasPrefix("the client secret file of provider corp \(secret) can be read by other users (mode 0444)") })
        #expect(warnings.contains { $0.hasPrefix("the secret file of resource server orders \(backend) can be read by other users (mode 0604)") })
        #expect((try FileManager.default.attributesOfItem(atPath: key)[.posixPermissions] as? Int) == 0o644, "reported, not changed")
        try FileManager.default.setAttributes([.posixPermissions: 0o604], ofItemAtPath: tlsKey)
        #expect(StartChecks.warnings(config).contains { $0.hasPrefix("the TLS private key file \(tlsKey) can be read by other users") })
        for file in [key, secret, backend, tlsKey] { try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file) }
        #expect(StartChecks.warnings(config).isEmpty)
    }
}
