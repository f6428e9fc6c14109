import BrokerCrypto

/// The code a person types at `/device` (RFC 8628 §6.1): 8 characters from 20 consonants
/// (no vowels, so no words; no digits to mistake for letters), 20^8 ≈ 2.6 × 10^10 codes, shown as
/// four letters, a dash, four letters (`BCDF-GHJK`), accepted in either case, with or without the
/// dash and spaces.
enum UserCode {
    static let alphabet = Array("BCDFGHJKLMNPQRSTVWXZ")
    static let length = 8

    /// A fresh code, uniformly drawn, in its normalised form (no dash).
    static func make() -> String {
        var code: [Character] = []
        while code.count < length {
            // 240 = 12 × 20: bytes above it are dropped so that every letter is equally likely.
            for byte in SecureRandom.bytes(count: length) where byte < 240 && code.count < length {
                code.append(alphabet[Int(byte) % alphabet.count])
            }
        }
        return String(code)
    }

    /// `code` as a person typed it, normalised; nil when it cannot be a user code.
    static func normalise(_ typed: String) -> String? {
        let letters = typed.uppercased().filter { $0 != "-" && $0 != " " }
        guard letters.count == length, letters.allSatisfy(alphabet.contains) else { return nil }
        return letters
    }

    /// Four letters, a dash, four letters (`BCDF-GHJK`), for people.
    static func display(_ normalised: String) -> String {
        "\(normalised.prefix(4))-\(normalised.dropFirst(4))"
    }

    /// The key a user code is stored under.
    static func hash(_ normalised: String) -> SHA256Digest {
        SHA256.hash("user-code:" + normalised)
    }
}
