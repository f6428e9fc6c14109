import CryptoShim

/// Cryptographically secure random bytes from libcrypto's CSPRNG (`RAND_bytes`).
///
/// Safe to call from any thread.
///
/// ## Failure traps
///
/// If the generator ever reports failure (practically impossible once the process has
/// started: it would mean the operating system's entropy source is gone), these functions stop
/// the process with `preconditionFailure` instead of returning or throwing. Session tokens,
/// nonces and keys are built from these bytes; a caller that ignored an error, or a buffer left
/// zeroed, would hand out predictable secrets. Stopping is the only safe outcome.
public enum SecureRandom: Sendable {
    /// Returns `count` random bytes.
    ///
    /// - Parameter count: The number of bytes; must not be negative.
    public static func bytes(count: Int) -> [UInt8] {
        precondition(count >= 0, "SecureRandom.bytes(count:) needs a non-negative count")
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            fill(UnsafeMutableRawBufferPointer(buffer))
            initialized = count
        }
    }

    /// Overwrites every byte of `buffer` with random bytes.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        guard tb_crypto_random_bytes(base, buffer.count) == 1 else {
            preconditionFailure(
                "SecureRandom: libcrypto's random generator failed; refusing to continue "
                    + "rather than produce predictable secrets"
            )
        }
    }
}
