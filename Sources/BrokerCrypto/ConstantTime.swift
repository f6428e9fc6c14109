import CryptoShim

/// Compares two byte sequences in time that depends only on their length, never on their
/// content (libcrypto's `CRYPTO_memcmp`).
///
/// Use it whenever one side is secret (a MAC, a token, a client secret), so that response
/// timing does not reveal how many leading bytes of a guess were right. Sequences of different
/// lengths are unequal; that answer is immediate and reveals only that the lengths differ.
public func constantTimeEquals(
    _ lhs: UnsafeRawBufferPointer,
    _ rhs: UnsafeRawBufferPointer
) -> Bool {
    guard lhs.count == rhs.count else { return false }
    return tb_crypto_equal(lhs.baseAddress, rhs.baseAddress, lhs.count) == 1
}

/// Compares two byte arrays in time that depends only on their length, never on their content.
///
/// Arrays of different lengths are unequal, without their contents being examined.
public func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
    lhs.withUnsafeBytes { left in
        rhs.withUnsafeBytes { right in constantTimeEquals(left, right) }
    }
}

/// Compares the UTF-8 bytes of two strings in time that depends only on their length, never on
/// their content.
///
/// The comparison is byte for byte, without Unicode normalization: strings that Swift's `==`
/// treats as equal but encode differently (such as "é" precomposed and decomposed) are unequal.
public func constantTimeEquals(_ lhs: some StringProtocol, _ rhs: some StringProtocol) -> Bool {
    lhs.withUTF8Bytes { left in
        rhs.withUTF8Bytes { right in constantTimeEquals(left, right) }
    }
}
