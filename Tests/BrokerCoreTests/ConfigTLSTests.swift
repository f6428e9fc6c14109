import BrokerCore
import Foundation
import Testing

/// `server.tls_certificate_file` and `server.tls_key_file`: read and checked as a pair when the
/// configuration is loaded, so that `check-config` refuses what GnuTLS would refuse at start.
struct ConfigTLSTests {
    /// A file of `Resources/tls` (certificates) or `Resources/client-keys` (their keys).
    static func resource(_ name: String) throws -> String {
        let folder = name.hasSuffix("-certificate.pem") ? "tls" : "client-keys"
        let file = try #require(
            Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Resources/\(folder)")
                ?? Bundle.module.url(forResource: name, withExtension: nil, subdirectory: folder)
        )
        return file.path
    }

    private func yaml(_ certificate: String, _ key: String) -> String {
        "server:\n  tls_certificate_file: \(certificate)\n  tls_key_file: \(key)\n"
    }

    /// The problems of `certificate` with `key`; none quotes a line of either file.
    private func pairProblems(_ certificate: String, _ key: String) -> [ConfigProblem] {
        let found = problems(of: yaml(certificate, key))
        let lines = [certificate, key].flatMap { path in
            ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").filter { !$0.hasPrefix("-----") }
        }
        #expect(!found.contains { problem in lines.contains { problem.message.contains($0) } }, "a problem quotes a file")
        return found
    }

    @Test func aCertificateWithItsKeyInAnyFormLoads() throws {
        for (certificate, keys) in [("rsa-certificate.pem", ["rsa-pkcs8.pem", "rsa-pkcs1.pem"]),
                                    ("ec-certificate.pem", ["ec-pkcs8.pem", "ec-sec1.pem"])] {
            for key in keys {
                let files = TLSFiles(certificateFile: try Self.resource(certificate), keyFile: try Self.resource(key))
                let config = try loadConfig(yaml(files.certificateFile, files.keyFile))
                #expect(config.server.tls == files, "\(certificate) with \(key)")
                #expect(config.server.publicURL.absoluteString == "https://127.0.0.1:8080")
            }
        }
    }

    /// A server's certificate followed by the rest of its chain (here the other certificate
    /// stands in for an intermediate): the key is checked against the first one.
    @Test func aChainIsCheckedAgainstItsFirstCertificate() throws {
        let leaf = try Self.resource("rsa-certificate.pem"), other = try Self.resource("ec-certificate.pem")
        let chain = try TemporaryFile(contents: try String(contentsOfFile: leaf, encoding: .utf8) + String(contentsOfFile: other, encoding: .utf8))
        let config = try loadConfig(yaml(chain.path, try Self.resource("rsa-pkcs8.pem")))
        #expect(config.server.tls?.certificateFile == chain.path)
        let found = pairProblems(chain.path, try Self.resource("ec-pkcs8.pem"))
        #expect(found.count == 1 && found.first?.message.contains("is not the key of the first certificate") == true, "\(found)")
    }

    @Test func aKeyOfAnotherCertificateIsRefusedNamingTheKeyFile() throws {
        for (certificate, key) in [("rsa-certificate.pem", "rsa-second.pem"), ("ec-certificate.pem", "ec-second.pem"),
                                   ("rsa-certificate.pem", "ec-pkcs8.pem")] {
            let certificatePath = try Self.resource(certificate), keyPath = try Self.resource(key)
            let found = pairProblems(certificatePath, keyPath)
            #expect(found.count == 1, "\(certificate) with \(key)")
            expectProblem(found, key: "server.tls_key_file",
                          contains: "TLS key file \(keyPath) is not the key of the first certificate in \(certificatePath)", line: 3)
        }
    }

    @Test func junkInPEMArmourIsRefused() throws {
        let certificate = try Self.resource("rsa-certificate.pem"), key = try Self.resource("rsa-pkcs8.pem")
        let junkCertificate = try TemporaryFile(contents: "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGUgYXQgYWxs\n-----END CERTIFICATE-----\n")
        let junkKey = try TemporaryFile(contents: "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5IGF0IGFsbCwgbm90IGF0IGFsbA==\n-----END PRIVATE KEY-----\n")
        let badChain = try TemporaryFile(contents: try String(contentsOfFile: certificate, encoding: .utf8)
            + String(contentsOfFile: junkCertificate.path, encoding: .utf8))
        let junk = pairProblems(junkCertificate.path, junkKey.path)
        #expect(junk.count == 2)
        expectProblem(junk, key: "server.tls_certificate_file",
                      contains: "TLS certificate file \(junkCertificate.path) holds no PEM certificate chain that parses", line: 2)
        expectProblem(junk, key: "server.tls_key_file", contains: "TLS key file \(junkKey.path) holds no PEM private key that parses", line: 3)
        expectProblem(pairProblems(badChain.path, key), key: "server.tls_certificate_file", contains: "holds no PEM certificate chain that parses")
        expectProblem(pairProblems(certificate, certificate), key: "server.tls_key_file", contains: "holds no PEM private key that parses")
        #expect(pairProblems(certificate, key).isEmpty, "the same certificate and its own key load")
    }

    @Test func anEncryptedKeyIsRefusedForItsPassphrase() throws {
        let key = try Self.resource("rsa-encrypted.pem")
        let found = pairProblems(try Self.resource("rsa-certificate.pem"), key)
        #expect(found.count == 1)
        expectProblem(found, key: "server.tls_key_file",
                      contains: "TLS key file \(key) holds an encrypted key, and the server cannot ask for its passphrase", line: 3)
    }

    @Test func aKeyFileThatIsNotUTF8IsRefused() throws {
        let key = try TemporaryFile(contents: "")
        try Data([0x30, 0x82, 0xff, 0xfe, 0x00, 0xc3]).write(to: URL(fileURLWithPath: key.path))
        let found = pairProblems(try Self.resource("ec-certificate.pem"), key.path)
        #expect(found.count == 1)
        expectProblem(found, key: "server.tls_key_file", contains: "TLS key file \(key.path) is not UTF-8 text", line: 3)
    }

    @Test func oneFileWithoutTheOtherIsRefused() throws {
        let found = problems(of: "server:\n  tls_certificate_file: \(try Self.resource("ec-certificate.pem"))\n")
        #expect(found.count == 1)
        expectProblem(found, key: "server.tls_key_file", contains: "HTTPS needs both server.tls_certificate_file and server.tls_key_file")
    }

    /// As every other file the configuration names, from the file or the environment.
    @Test func relativePathsAreResolvedFromTheConfigDirectory() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = directory.appendingPathComponent("certificate.pem").path, key = directory.appendingPathComponent("key.pem").path
        try FileManager.default.copyItem(atPath: try Self.resource("ec-certificate.pem"), toPath: certificate)
        try FileManager.default.copyItem(atPath: try Self.resource("ec-sec1.pem"), toPath: key)
        let configFile = directory.appendingPathComponent("broker.yaml").path
        try yaml("certificate.pem", "key.pem").write(toFile: configFile, atomically: true, encoding: .utf8)
        let expected = TLSFiles(certificateFile: certificate, keyFile: key)
        #expect(try ConfigLoader.load(path: configFile, environment: [:]).server.tls == expected)
        try "server:\n  listen: 127.0.0.1:8443\n".write(toFile: configFile, atomically: true, encoding: .utf8)
        let environment = ["BROKER_TLS_CERTIFICATE_FILE": "certificate.pem", "BROKER_TLS_KEY_FILE": "key.pem"]
        #expect(try ConfigLoader.load(path: configFile, environment: environment).server.tls == expected)

        try yaml("certificate.pem", "missing.pem").write(toFile: configFile, atomically: true, encoding: .utf8)
        let missing = problems(ofFileAt: configFile)
        #expect(missing.count == 1)
        expectProblem(missing, key: "server.tls_key_file",
                      contains: "cannot read TLS key file \(directory.appendingPathComponent("missing.pem").path): it does not exist", line: 3)
    }
}
