import BrokerCrypto

extension ConfigDraft {
    /// Resolves the TLS files from the configuration file's directory, as every file the
    /// configuration names, and checks that HTTPS can be served with them: both set or neither,
    /// a certificate chain, an unencrypted private key, and the key of the first certificate.
    /// `serve` loads the configuration as `check-config` does, so a pair GnuTLS would refuse is
    /// an invalid configuration, not a failed start that a restart retries. Problems name the
    /// files, never their text.
    mutating func resolveTLSFiles(baseDirectory: String?, file: String?) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        func problem(_ key: String, _ message: String) {
            let line = lines[key]
            problems.append(ConfigProblem(key: key, message: message, line: line, file: line == nil ? nil : file))
        }
        func read(_ path: String?, _ key: String, _ what: String) -> String? {
            guard let path else { return nil }
            switch SecretReference.readText(path, what: what) {
            case .success(let text): return text
            case .failure(let error): problem(key, error.message); return nil
            }
        }
        let certificateKey = "server.tls_certificate_file", keyKey = "server.tls_key_file"
        tlsCertificateFile = tlsCertificateFile.map { SecretReference.absolutePath($0, baseDirectory: baseDirectory) }
        tlsKeyFile = tlsKeyFile.map { SecretReference.absolutePath($0, baseDirectory: baseDirectory) }
        if (tlsCertificateFile == nil) != (tlsKeyFile == nil) {
            problem(tlsCertificateFile == nil ? certificateKey : keyKey, "HTTPS needs both server.tls_certificate_file and server.tls_key_file")
        }
        let certificate = read(tlsCertificateFile, certificateKey, "TLS certificate file")
        let key = read(tlsKeyFile, keyKey, "TLS key file")
        guard let certificate, let key, let certificatePath = tlsCertificateFile, let keyPath = tlsKeyFile else { return problems }
        for found in TLSKeyPair.problems(certificate: certificate, key: key) {
            switch found {
            case .certificate:
                problem(certificateKey, "TLS certificate file \(certificatePath) holds no PEM certificate chain that parses")
            case .key:
                problem(keyKey, "TLS key file \(keyPath) holds no PEM private key that parses")
            case .encryptedKey:
                problem(keyKey, "TLS key file \(keyPath) holds an encrypted key, and the server cannot ask for its passphrase "
                    + "(openssl pkey -in KEY -out PLAIN writes it unencrypted)")
            case .mismatch:
                problem(keyKey, "TLS key file \(keyPath) is not the key of the first certificate in \(certificatePath)")
            }
        }
        return problems
    }
}
