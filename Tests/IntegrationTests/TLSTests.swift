import Foundation
import Testing

/// HTTPS served directly (libmicrohttpd with GnuTLS), with a self-signed certificate.
struct TLSTests {
    private func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        try runProcess(URL(fileURLWithPath: "/usr/bin/env"), [executable] + arguments)
    }

    @Test func servesHTTPSWithTheConfiguredCertificate() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = directory.appendingPathComponent("cert.pem").path
        let key = directory.appendingPathComponent("key.pem").path
        let made = try run("openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", certificate, "-days", "1", "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1",
        ])
        #expect(made.status == 0, "\(made.output)")
        let broker = try BrokerProcess(config: "server:\n  tls_certificate_file: \(certificate)\n  tls_key_file: \(key)\n")
        let secure = try run("curl", ["-s", "--cacert", certificate, "https://127.0.0.1:\(broker.port)/healthz"])
        #expect(secure.status == 0)
        #expect(secure.output == #"{"status":"ok"}"#)
        let untrusted = try run("curl", ["-s", "https://127.0.0.1:\(broker.port)/healthz"])
        #expect(untrusted.status != 0, "a client that does not trust the certificate must fail")
        #expect(throws: RawHTTPError.self) { try RawHTTP.request(port: broker.port, target: "/healthz") }
        #expect(broker.lines.contains { $0.contains(#""public_url":"https://127.0.0.1:"#) })
    }
}
