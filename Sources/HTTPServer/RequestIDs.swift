import Synchronization

/// Request ids: the client's `X-Request-Id` when it is short and plain, otherwise a fresh one
/// (a random per-process prefix and a counter: unique, cheap, and not a secret).
final class RequestIDs: Sendable {
    private let prefix = UInt32.random(in: 0x1000_0000...UInt32.max)
    private let counter = Atomic<UInt64>(0)
    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// `<prefix>-<counter>` in lowercase hex, e.g. `d349a28b-1f`: up to 15 bytes, the length a
    /// `String` holds without allocating, for the first 16 million requests.
    func make(clientSupplied: String?) -> String {
        if let clientSupplied, Self.isAcceptable(clientSupplied) { return clientSupplied }
        let number = counter.wrappingAdd(1, ordering: .relaxed).newValue
        var text: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0) // 8 + 1 + at most 16 bytes
        return withUnsafeMutableBytes(of: &text) { buffer in
            for index in 0..<8 { buffer[index] = Self.hexDigits[Int(prefix >> (28 - 4 * index) & 0xF)] }
            buffer[8] = UInt8(ascii: "-")
            var digits = 1
            while digits < 16, number >> (4 * digits) != 0 { digits += 1 }
            for index in 0..<digits { buffer[9 + index] = Self.hexDigits[Int(number >> (4 * (digits - 1 - index)) & 0xF)] }
            return String(decoding: UnsafeRawBufferPointer(rebasing: buffer[..<(9 + digits)]), as: UTF8.self)
        }
    }

    /// 1 to 64 characters of `[A-Za-z0-9._-]`.
    static func isAcceptable(_ id: String) -> Bool {
        let utf8 = id.utf8
        return (1...64).contains(utf8.count) && utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                true
            default:
                false
            }
        }
    }
}
