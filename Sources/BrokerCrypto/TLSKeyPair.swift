import CryptoShim

/// The certificate chain and private key an HTTPS server is given, checked with libcrypto before
/// it starts: GnuTLS, which serves them, reports a bad pair only as a failed start. Any key
/// libcrypto reads is taken (RSA or EC; PKCS#8, PKCS#1 or SEC 1), unencrypted.
public enum TLSKeyPair: Sendable {
    /// What is wrong with a pair; none quotes the files.
    public enum Problem: Sendable, Equatable {
        /// The certificate text holds no PEM certificate, or one that does not parse.
        case certificate
        /// The key text holds no PEM private key that parses.
        case key
        /// The key is encrypted: a server cannot ask for its passphrase.
        case encryptedKey
        /// The key is not that of the chain's first certificate.
        case mismatch
    }

    /// Every problem of the pair of PEM texts; none when the server can serve with it.
    public static func problems(certificate: String, key: String) -> [Problem] {
        let first = certificate.withUTF8Bytes { pem in
            pem.baseAddress.flatMap { tb_crypto_certificate_new($0, pem.count) }
        }
        defer { tb_crypto_certificate_free(first) }
        var encrypted: Int32 = 0
        let privateKey = key.withUTF8Bytes { pem in
            pem.baseAddress.flatMap { tb_crypto_tls_key_new($0, pem.count, &encrypted) }
        }
        defer { tb_crypto_public_key_free(privateKey) }
        var problems: [Problem] = []
        if first == nil { problems.append(.certificate) }
        if privateKey == nil { problems.append(encrypted == 1 ? .encryptedKey : .key) }
        if let first, let privateKey, tb_crypto_certificate_matches_key(first, privateKey) != 1 {
            problems.append(.mismatch)
        }
        return problems
    }
}
