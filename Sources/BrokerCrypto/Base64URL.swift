/// Base64url (RFC 4648 §5) without padding, as used in JWTs, PKCE and URL-safe tokens.
///
/// Pure Swift and strict: decoding accepts exactly what ``encode(_:)-([UInt8])`` produces.
public enum Base64URL: Sendable {
    /// Encodes `bytes` with the URL alphabet (`A`–`Z`, `a`–`z`, `0`–`9`, `-`, `_`) and no
    /// padding.
    public static func encode(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBytes { Base64Codec.url.encode($0) }
    }

    /// Encodes the bytes in `bytes` with the URL alphabet and no padding, without copying them.
    public static func encode(_ bytes: UnsafeRawBufferPointer) -> String {
        Base64Codec.url.encode(bytes)
    }

    /// Decodes unpadded base64url text.
    ///
    /// Returns `nil` when the text contains `=` padding or any character outside the URL
    /// alphabet (including whitespace and the standard alphabet's `+` and `/`), when its length
    /// leaves a remainder of 1 modulo 4 (no byte sequence encodes to that), or when the unused
    /// low bits of the last character are not zero (a non-canonical encoding).
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        text.withUTF8Bytes { Base64Codec.url.decode($0) }
    }
}
