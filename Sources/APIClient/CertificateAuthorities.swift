import CurlShim

/// The certificate authorities outbound TLS connections are verified against: the system's, and
/// those of one more PEM file besides (a provider's own CA, `ca_file`). Parsed once, here; each
/// new connection is handed the parsed store (CurlShim's castore.c), where libcurl alone would
/// read its whole bundle again for every new connection.
public final class CertificateAuthorities: @unchecked Sendable {
    // Read-only after init and safe to share: OpenSSL's X509_STORE locks its own lookups.
    let store: OpaquePointer

    /// The system's authorities, with those of the PEM file at `extraFile` besides. Throws a
    /// sentence naming the file and what is wrong with it.
    public init(adding extraFile: String? = nil) throws(CertificateAuthoritiesError) {
        var error = [CChar](repeating: 0, count: 512)
        let made = error.withUnsafeMutableBufferPointer { buffer in
            extraFile.map { file in file.withCString { tb_ca_store_create($0, buffer.baseAddress, buffer.count) } }
                ?? tb_ca_store_create(nil, buffer.baseAddress, buffer.count)
        }
        guard let made else {
            throw CertificateAuthoritiesError(description: String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        store = made
    }

    deinit {
        tb_ca_store_release(store)
    }

    /// The system's authorities alone, parsed on first use and kept for the process; nil only
    /// when there was no memory for them (libcurl's own configuration is used then).
    public static let system: CertificateAuthorities? = try? CertificateAuthorities()
}

/// Why a CA file could not be used; names the file, never its content.
public struct CertificateAuthoritiesError: Error, Sendable, CustomStringConvertible {
    public let description: String
}
