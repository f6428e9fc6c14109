import Foundation
import Testing

/// HTTPS served directly (libmicrohttpd with GnuTLS), with a self-signed certificate.
struct TLSTests {
    private func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        try runProcess(URL(fileURLWithPath: "/usr/bin/env"), [executable] + arguments)
    }

    /// A self-signed certificate and key for 127.0.0.1 in a new directory (removed by the caller).
    private func makeCertificate() throws -> (directory: URL, certificate: String, key: String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let certificate = directory.appendingPathComponent("cert.pem").path
        let key = directory.appendingPathComponent("key.pem").path
        let made = try run("openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", certificate, "-days", "1", "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1",
        ])
        #expect(made.status == 0, "\(made.output)")
        return (directory, certificate, key)
    }

    @Test func servesHTTPSWithTheConfiguredCertificate() throws {
        let (directory, certificate, key) = try makeCertificate()
        defer { try? FileManager.default.removeItem(at: directory) }
        let broker = try BrokerProcess(config: "server:\n  tls_certificate_file: \(certificate)\n  tls_key_file: \(key)\n")
        let secure = try run("curl", ["-s", "--cacert", certificate, "https://127.0.0.1:\(broker.port)/healthz"])
        #expect(secure.status == 0)
        #expect(secure.output == #"{"status":"ok"}"#)
        let untrusted = try run("curl", ["-s", "https://127.0.0.1:\(broker.port)/healthz"])
        #expect(untrusted.status != 0, "a client that does not trust the certificate must fail")
        #expect(throws: RawHTTPError.self) { try RawHTTP.request(port: broker.port, target: "/healthz") }
        #expect(broker.lines.contains { $0.contains(#""public_url":"https://127.0.0.1:"#) })
    }

    /// A key of another certificate is an invalid configuration: `check-config` refuses it, and
    /// `serve` exits 2 (a restart would not mend it) before it opens the state.
    @Test func aKeyOfAnotherCertificateIsAnInvalidConfiguration() throws {
        let (directory, certificate, _) = try makeCertificate()
        let (other, _, otherKey) = try makeCertificate()
        defer { for made in [directory, other] { try? FileManager.default.removeItem(at: made) } }
        let config = directory.appendingPathComponent("broker.yaml").path
        try "server:\n  tls_certificate_file: \(certificate)\n  tls_key_file: \(otherKey)\n".write(toFile: config, atomically: true, encoding: .utf8)
        let state = directory.appendingPathComponent("state").path
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("BROKER_") }
        environment["BROKER_STATE_KEY"] = BrokerProcess.stateKey
        environment["BROKER_STATE_DIR"] = state
        let check = try runProcess(BrokerProcess.binary, ["check-config", config], environment: environment)
        let serve = try runProcess(BrokerProcess.binary, ["serve", "--config", config, "--listen", "127.0.0.1:0"], environment: environment)
        let message = "server.tls_key_file: TLS key file \(otherKey) is not the key of the first certificate in \(certificate)"
        #expect(check.status == 1 && check.output.contains(message), "\(check.output)")
        #expect(serve.status == 2 && serve.output.contains(message), "\(serve.output)")
        #expect(!FileManager.default.fileExists(atPath: state), "refused before the state is opened")
    }

    /// The early 413 of a chunked body over the limit is written through the TLS session too,
    /// and the rest of the 32 MiB is not read (curl reports how much it could send).
    @Test func chunkedBodyOverTheLimitIs413OverHTTPS() throws {
        let (directory, certificate, key) = try makeCertificate()
        defer { try? FileManager.default.removeItem(at: directory) }
        let body = directory.appendingPathComponent("body")
        try Data(repeating: 0x61, count: 32 << 20).write(to: body)
        let broker = try BrokerProcess(config: "server:\n  tls_certificate_file: \(certificate)\n  tls_key_file: \(key)\n")
        let upload = try run("curl", [
            "-s", "--cacert", certificate, "-w", "\n%{http_code} %{size_upload}",
            "-H", "Transfer-Encoding: chunked", "-H", "Content-Type: application/x-www-form-urlencoded",
            "--data-binary", "@\(body.path)", "https://127.0.0.1:\(broker.port)/token",
        ])
        let lines = upload.output.split(separator: "\n")
        #expect(lines.first?.contains("payload_too_large") == true)
        let summary = lines.last?.split(separator: " ") ?? []
        #expect(summary.first == "413")
        #expect(summary.last.flatMap { Int($0) }.map { $0 < 32 << 20 } == true, "the broker must stop reading the body")
    }
}
