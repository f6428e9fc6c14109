/// An error from a BrokerCrypto operation.
///
/// A struct around a private enum, so new cases can be added without breaking callers that
/// switch over errors. Compare against the static members:
///
/// ```swift
/// do { _ = try AESGCM.open(box, key: key) }
/// catch where error == .authenticationFailure { ... }
/// ```
///
/// The ``description`` is a short fixed string that never contains key material, plaintext or
/// any other data, so it is safe to log and to use as a metric label.
public struct CryptoError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Code: Hashable, Sendable {
        case invalidKeyLength
        case invalidNonceLength
        case authenticationFailure
        case malformedSealedBox
        case libraryFailure
    }

    private let code: Code

    private init(_ code: Code) {
        self.code = code
    }

    /// A key did not have the required length (32 bytes for AES-256).
    public static var invalidKeyLength: CryptoError { CryptoError(.invalidKeyLength) }

    /// A nonce did not have the required length (12 bytes for AES-GCM).
    public static var invalidNonceLength: CryptoError { CryptoError(.invalidNonceLength) }

    /// The authentication tag did not verify: the ciphertext, the tag, the nonce or the
    /// authenticated data were altered, or the key is wrong. No plaintext is released.
    public static var authenticationFailure: CryptoError { CryptoError(.authenticationFailure) }

    /// A sealed box's serialized form was too short or had parts of the wrong length.
    public static var malformedSealedBox: CryptoError { CryptoError(.malformedSealedBox) }

    /// libcrypto reported an unexpected failure (for example, it could not allocate memory).
    public static var libraryFailure: CryptoError { CryptoError(.libraryFailure) }

    /// A short, fixed description that contains no data.
    public var description: String {
        switch code {
        case .invalidKeyLength: "invalid key length"
        case .invalidNonceLength: "invalid nonce length"
        case .authenticationFailure: "authentication failure"
        case .malformedSealedBox: "malformed sealed box"
        case .libraryFailure: "crypto library failure"
        }
    }
}
